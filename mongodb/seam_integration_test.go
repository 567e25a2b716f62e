package mongodb

// Integration tests of the adapter's production safety (refused writes,
// leases by the server's clock, causal reads, index builds) against a
// real replica set; they skip like every TestIntegration* test when none
// is configured (see mongodb_integration_test.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
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
	if err := ensureIndexes(ctx, driverIndexes{db: mdb}, func(ix IndexBuild) { built = append(built, ix.Name) }, 0); err != nil {
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
	if err := ensureIndexes(ctx, driverIndexes{db: mdb}, func(ix IndexBuild) { built = append(built, ix.Name) }, 0); err != nil {
		t.Fatal(err)
	}
	if built != nil || len(log.named("createIndexes")) != len(indexes) {
		t.Errorf("second run built %q", built)
	}
}

// failPoint sets the failCommand fail point on the test server for the
// next times commands named cmds, failing them with code; it skips t when
// the server has no test commands (enableTestCommands=1), and turns the
// fail point off at cleanup.
func failPoint(t *testing.T, db *DB, times int, code int, cmds ...string) {
	t.Helper()
	ctx := testCtx(t)
	admin := db.client.Database("admin")
	err := admin.RunCommand(ctx, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: times}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: cmds}, {Key: "errorCode", Value: code}}},
	}).Err()
	if err != nil {
		t.Skipf("failCommand fail point unavailable (start mongod with --setParameter enableTestCommands=1): %v", err)
	}
	t.Cleanup(func() {
		_ = admin.RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
	})
}

// TestIntegrationWriteRejectedOnlyForGood (item 2): a validator refusal
// (121) is reported as watch.ErrWriteRejected; a NotWritablePrimary is
// not (the engine retries it).
func TestIntegrationWriteRejectedOnlyForGood(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "submission", Value: int64(0)}}); err != nil {
		t.Fatal(err)
	}
	w := &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: materialize.UserStats{Submission: 3, ACProblemIDs: []int64{}}}}}

	// The validator first: it needs no fail point, so it is checked even
	// where failPoint skips (mongo images run without enableTestCommands).
	validator := bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "properties", Value: bson.D{
		{Key: "submission", Value: bson.D{{Key: "maximum", Value: 1}}}}}}}}
	if err := db.db.RunCommand(ctx, bson.D{{Key: "collMod", Value: "user"}, {Key: "validator", Value: validator},
		{Key: "validationLevel", Value: "strict"}, {Key: "validationAction", Value: "error"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, w); !errors.Is(err, watch.ErrWriteRejected) {
		t.Errorf("validator refusal: %v, want ErrWriteRejected", err)
	}

	// Twice: the driver retries a retryable write once by itself. The fail
	// point answers before the validator runs.
	failPoint(t, db, 2, 10107, "update")
	_, err := db.Apply(ctx, w)
	if err == nil || errors.Is(err, watch.ErrWriteRejected) {
		t.Fatalf("NotWritablePrimary: %v, want a retryable error", err)
	}
}

// TestIntegrationStreamErrorClasses (item 3): a getMore killed by an
// operator (CursorKilled 237, Interrupted 11601) is transient; an event
// over 16 MB (BSONObjectTooLarge 10334) and InvalidResumeToken (260) are
// watch.ErrResumeImpossible. The errors come from the failCommand fail
// point, as the server would send them.
func TestIntegrationStreamErrorClasses(t *testing.T) {
	cases := []struct {
		cmd   string
		code  int
		want  error
		class watch.Class
	}{
		{"getMore", 237, watch.ErrTransient, watch.Overloaded},
		{"getMore", 11601, watch.ErrTransient, watch.Overloaded},
		{"getMore", 10334, watch.ErrResumeImpossible, watch.ResumeImpossible},
		{"aggregate", 260, watch.ErrResumeImpossible, watch.ResumeImpossible},
		// Not resumable for the driver on 4.4+, and
		// never fatal.
		{"getMore", 211, watch.ErrTransient, watch.Transient},
		{"getMore", 175, watch.ErrTransient, watch.Transient},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s_%d", c.cmd, c.code), func(t *testing.T) {
			db := testDB(t)
			ctx := testCtx(t)
			if err := db.db.CreateCollection(ctx, materialize.CollUser); err != nil {
				t.Fatal(err)
			}
			start, err := db.ClusterTime(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The driver retries a resumable error once by itself; fail
			// twice so the error reaches the adapter whatever its labels.
			failPoint(t, db, 2, c.code, c.cmd)
			st, err := db.Open(ctx, watch.Position{StartAt: start})
			if err == nil {
				defer st.Close(ctx)
				_, err = nextEvent(t, st)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("code %d on %s: %v, want %v", c.code, c.cmd, err, c.want)
			}
			if got := watch.ClassOf(err); got != c.class {
				t.Errorf("code %d on %s: class %s, want %s", c.code, c.cmd, got, c.class)
			}
		})
	}
}

// TestIntegrationLeaseServerClockAndIdentity (items 5 and 6): on a real
// server, a standby whose clock runs an hour ahead does not take a held
// lease (expiry is $$NOW's), the expiry the server sets is its own now +
// ttl, and two processes with the same instance id hold distinct
// identities: the second stands by, and renewing needs owner and epoch.
func TestIntegrationLeaseServerClockAndIdentity(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	ttl := time.Minute
	mk := func(clockAhead time.Duration) *watch.Leader {
		return &watch.Leader{Leases: db, Owner: "materializer-0", TTL: ttl, Log: zerolog.Nop(),
			Now:       func() time.Time { return time.Now().Add(clockAhead) },
			NewEngine: func(int64) *watch.Engine { return &watch.Engine{} }}
	}
	first, ahead := mk(0), mk(time.Hour)
	if first.ID() == ahead.ID() {
		t.Fatalf("two leaders share the identity %q", first.ID())
	}
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- first.Do(ctx, func(context.Context, *watch.Engine) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	l, ok, err := db.Current(ctx)
	if err != nil || !ok || l.Owner != first.ID() {
		t.Fatalf("current lease %+v %v %v, want held by %s", l, ok, err, first.ID())
	}
	if d := time.Until(l.Expires); d < ttl-time.Minute || d > ttl+time.Minute {
		t.Errorf("expires in %v, want about the server's now + %v", d, ttl)
	}
	if err := ahead.Do(ctx, func(context.Context, *watch.Engine) error { return nil }); !errors.Is(err, watch.ErrLeaseHeld) {
		t.Errorf("same instance id, clock 1h ahead: %v, want ErrLeaseHeld", err)
	}
	if _, ok, err := db.Renew(ctx, "materializer-0", l.Epoch, ttl); err != nil || ok {
		t.Errorf("renew by the bare instance id: ok=%v %v, want refused", ok, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// countingDB records the largest write call the rebuild makes.
type countingDB struct {
	*DB
	largest int
}

func (c *countingDB) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	c.largest = max(c.largest, w.Len())
	return c.DB.Apply(ctx, w)
}

func (c *countingDB) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	c.largest = max(c.largest, len(keys))
	return c.DB.RecordKeys(ctx, keys)
}

// TestIntegrationRebuildGuardPerChunk (item 4): a rebuild of 2,500
// drifted users and 1,500 submissions asks the write guard before each
// bulk write of at most 1,000 models, each under its own deadline.
func TestIntegrationRebuildGuardPerChunk(t *testing.T) {
	db := testDB(t)
	var docs materialize.Docs
	for i := range 2500 {
		docs.Users = append(docs.Users, mtest.Raw("_id", fmt.Sprintf("u%04d", i), "submission", int32(5), "AC_submission", int32(0), "AC_problem_ids", bson.A{}))
	}
	docs.Problems = append(docs.Problems, mtest.Raw("_id", int32(1), "homeworks", bson.A{}))
	for i := range 1500 {
		docs.Submissions = append(docs.Submissions, mtest.Raw("_id", bson.NewObjectID(), "user", "u0000", "problem", int32(1),
			"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(time.Unix(1_700_000_000+int64(i), 0)), "status", int32(1), "score", int32(0)))
	}
	load(t, db, docs)
	c := &countingDB{DB: db}
	guards := 0
	guard := func(context.Context) (time.Time, error) {
		guards++
		return time.Now().Add(20 * time.Second), nil
	}
	rep, err := watch.Rebuild(testCtx(t), c, materialize.NewDeriver(), watch.RebuildOptions{Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DriftedUsers != 2500 || rep.KeyIndexRecords != 1500 {
		t.Errorf("drifted %d, key records %d", rep.DriftedUsers, rep.KeyIndexRecords)
	}
	if c.largest > 1000 || guards < 5 {
		t.Errorf("largest guarded write %d models, %d guard calls; want <= 1000 and >= 5", c.largest, guards)
	}
}

// TestIntegrationReadsMajorityAfterEvent (item 7): a change event's
// cluster time passed as watch.ReadAfter makes the adapter's reads carry
// readConcern {level: majority, afterClusterTime}, which the server
// accepts on the primary, and they see the event's write.
func TestIntegrationReadsMajorityAfterEvent(t *testing.T) {
	base := testDB(t)
	ctx := testCtx(t)
	client, log := monitoredClient(t)
	d := newDB(client, base.cfg)
	if err := d.db.CreateCollection(ctx, materialize.CollUser); err != nil {
		t.Fatal(err)
	}
	start, err := d.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.Open(ctx, watch.Position{StartAt: start})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	if _, err := base.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "alice"}, {Key: "submission", Value: int64(4)},
		{Key: "AC_submission", Value: int64(0)}, {Key: "AC_problem_ids", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	ev := mustEvent(t, st, materialize.CollUser, materialize.OpInsert)
	users, err := d.Users(watch.WithReadAfter(ctx, ev.ClusterTime), []string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := users["alice"]; !ok || u.Stats.Submission != 4 {
		t.Errorf("read after the event: %+v", users)
	}
	finds := log.named("find")
	if len(finds) == 0 {
		t.Fatal("no find sent")
	}
	rc := finds[len(finds)-1].Lookup("readConcern").Document()
	if lvl, _ := rc.Lookup("level").StringValueOK(); lvl != "majority" {
		t.Errorf("readConcern %s", rc)
	}
	if tt, ti, ok := rc.Lookup("afterClusterTime").TimestampOK(); !ok || (bson.Timestamp{T: tt, I: ti}) != ev.ClusterTime {
		t.Errorf("readConcern %s, want afterClusterTime %v", rc, ev.ClusterTime)
	}
}
