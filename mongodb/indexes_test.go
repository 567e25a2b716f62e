package mongodb

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// fakeIndexes is an indexAdmin over in-memory index lists. create records
// whether its context had a deadline (which the driver would send as
// maxTimeMS) and can block until its context ends.
type fakeIndexes struct {
	specs   map[string][]mongo.IndexSpecification
	calls   []string // "list coll" / "create coll name"
	created []createCall
	block   bool
}

type createCall struct {
	name        string
	hasDeadline bool
	err         error // the create context's error when it returned
}

func (f *fakeIndexes) list(_ context.Context, coll string) ([]mongo.IndexSpecification, error) {
	f.calls = append(f.calls, "list "+coll)
	return f.specs[coll], nil
}

func (f *fakeIndexes) create(ctx context.Context, coll string, m mongo.IndexModel) error {
	name := *optionsName(m)
	f.calls = append(f.calls, "create "+coll+" "+name)
	_, dl := ctx.Deadline()
	c := createCall{name: name, hasDeadline: dl}
	if f.block {
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
		c.err = ctx.Err()
	}
	f.created = append(f.created, c)
	keys, _ := bson.Marshal(m.Keys)
	f.specs[coll] = append(f.specs[coll], mongo.IndexSpecification{Name: name, KeysDocument: keys})
	return c.err
}

func optionsName(m mongo.IndexModel) *string {
	var o options.IndexOptions
	for _, set := range m.Options.List() {
		_ = set(&o)
	}
	return o.Name
}

func spec(t *testing.T, name string, keys bson.D) mongo.IndexSpecification {
	t.Helper()
	raw, err := bson.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	return mongo.IndexSpecification{Name: name, KeysDocument: raw}
}

// TestEnsureIndexesListsFirstAndBuildsWithoutDeadline:
// under the 30 s start-up context, a missing index is built by a
// createIndexes whose context has no deadline (so no maxTimeMS that would
// abort the build), announced first; present ones (any name, keys written
// by the shell as doubles) are not created again.
func TestEnsureIndexesListsFirstAndBuildsWithoutDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fakeIndexes{specs: map[string][]mongo.IndexSpecification{
		"submission": {
			spec(t, "_id_", bson.D{{Key: "_id", Value: int32(1)}}),
			spec(t, "by_problem", bson.D{{Key: "problem", Value: 1.0}, {Key: "user", Value: 1.0}}),
			spec(t, "wrong_order", bson.D{{Key: "problem", Value: 1.0}, {Key: "user", Value: 1.0}, {Key: "timestamp", Value: 1.0}, {Key: "_id", Value: 1.0}}),
			spec(t, pendingIndex.Name, pendingIndex.Keys),
		},
		"problem": {spec(t, "hw", bson.D{{Key: "homeworks", Value: int64(1)}})},
	}}
	var announced []string
	if err := ensureIndexes(ctx, f, func(ix IndexBuild) { announced = append(announced, ix.Name) }, 0); err != nil {
		t.Fatal(err)
	}
	want := []string{"list submission", "list problem", "create submission " + coverIndexName}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	if !slices.Equal(announced, []string{coverIndexName}) {
		t.Errorf("announced %q", announced)
	}
	for _, c := range f.created {
		if c.hasDeadline {
			t.Errorf("create %s ran under a deadline: the driver sends it as maxTimeMS and the server aborts the build", c.name)
		}
	}
	// Everything present now: one listIndexes per collection, no build.
	f.calls = nil
	announced = nil
	if err := ensureIndexes(ctx, f, func(ix IndexBuild) { announced = append(announced, ix.Name) }, 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.calls, []string{"list submission", "list problem"}) || announced != nil {
		t.Errorf("second run: calls %q announced %q", f.calls, announced)
	}
}

// TestEnsureIndexesDeadlinePassesBuildContinues: the caller's deadline
// passing does not end the build's context; a cancel (a signal) does.
func TestEnsureIndexesDeadlinePassesBuildContinues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	f := &fakeIndexes{specs: map[string][]mongo.IndexSpecification{}, block: true}
	if err := ensureIndexes(ctx, f, nil, 0); err != nil {
		t.Fatalf("builds outlasting the start-up deadline failed: %v", err)
	}
	if len(f.created) != len(indexes) {
		t.Fatalf("%d builds, want %d", len(f.created), len(indexes))
	}
	for _, c := range f.created {
		if c.err != nil {
			t.Errorf("build %s cut off: %v", c.name, c.err)
		}
	}

	sig, stop := context.WithCancel(context.Background())
	f = &fakeIndexes{specs: map[string][]mongo.IndexSpecification{}, block: true}
	time.AfterFunc(20*time.Millisecond, stop)
	err := ensureIndexes(sig, f, nil, 0)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled start-up: %v, want context.Canceled", err)
	}
}

func TestSameKeys(t *testing.T) {
	k := bson.D{{Key: "user", Value: 1}, {Key: "problem", Value: 1}}
	cases := []struct {
		got  bson.D
		want bool
	}{
		{bson.D{{Key: "user", Value: 1.0}, {Key: "problem", Value: int64(1)}}, true},
		{bson.D{{Key: "user", Value: 1}}, false},
		{bson.D{{Key: "problem", Value: 1}, {Key: "user", Value: 1}}, false},
		{bson.D{{Key: "user", Value: -1}, {Key: "problem", Value: 1}}, false},
		{bson.D{{Key: "user", Value: "hashed"}, {Key: "problem", Value: 1}}, false},
	}
	for _, c := range cases {
		raw, _ := bson.Marshal(c.got)
		if got := sameKeys(raw, k); got != c.want {
			t.Errorf("sameKeys(%v) = %v, want %v", c.got, got, c.want)
		}
	}
}

func (f *fakeIndexes) database() string { return "normal-oj" }
