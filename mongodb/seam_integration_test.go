package mongodb

// Integration tests of issue 8 (the MongoDB seam made production-safe),
// against a real replica set; they skip like every TestIntegration* test
// when none is configured (see mongodb_integration_test.go).

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// commandLog records the commands a monitored client starts.
type commandLog struct {
	mu   sync.Mutex
	cmds []bson.Raw
}

func (l *commandLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.cmds = append(l.cmds, slices.Clone(e.Command))
	}}
}

// named returns the recorded commands whose first key is name.
func (l *commandLog) named(name string) []bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []bson.Raw
	for _, c := range l.cmds {
		if e, err := c.IndexErr(0); err == nil && e.Key() == name {
			out = append(out, c)
		}
	}
	return out
}

// monitoredClient connects a second client to the test server whose
// commands are recorded.
func monitoredClient(t *testing.T) (*mongo.Client, *commandLog) {
	t.Helper()
	l := &commandLog{}
	c, err := mongo.Connect(options.Client().ApplyURI(serverURI(t)).SetMonitor(l.monitor()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c, l
}

// TestIntegrationEnsureIndexesNoMaxTime (item 1): under a start-up
// deadline, EnsureIndexes lists first and sends createIndexes without
// maxTimeMS; a second run only lists.
func TestIntegrationEnsureIndexesNoMaxTime(t *testing.T) {
	db := testDB(t)
	client, log := monitoredClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mdb := client.Database(db.Database())
	if _, err := mdb.Collection("submission").InsertOne(ctx, bson.D{{Key: "user", Value: "a"}, {Key: "problem", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	var built []string
	if err := ensureIndexes(ctx, driverIndexes{mdb}, func(ix IndexBuild) { built = append(built, ix.Name) }); err != nil {
		t.Fatal(err)
	}
	if len(built) != len(indexes) {
		t.Errorf("announced %q, want every index", built)
	}
	creates := log.named("createIndexes")
	if len(creates) != len(indexes) {
		t.Fatalf("%d createIndexes, want %d", len(creates), len(indexes))
	}
	for _, c := range creates {
		if _, err := c.LookupErr("maxTimeMS"); err == nil {
			t.Errorf("createIndexes carries maxTimeMS (the server aborts the build when it expires): %s", c)
		}
	}
	if len(log.named("listIndexes")) == 0 {
		t.Error("no listIndexes before building")
	}
	built = nil
	if err := ensureIndexes(ctx, driverIndexes{mdb}, func(ix IndexBuild) { built = append(built, ix.Name) }); err != nil {
		t.Fatal(err)
	}
	if built != nil || len(log.named("createIndexes")) != len(indexes) {
		t.Errorf("second run built %q", built)
	}
}
