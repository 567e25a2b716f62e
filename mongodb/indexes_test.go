package mongodb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/watch"
)

// fakeIndexes is an indexAdmin over in-memory index lists. create records
// whether its context had a deadline (which the driver would send as
// maxTimeMS) and can block until its context ends or release is closed.
type fakeIndexes struct {
	specs   map[string][]bson.Raw
	calls   []string // "list coll" / "create coll name"
	created []createCall
	block   bool
	release <-chan struct{}
	// refuse, when set, is the server's answer to a create it does not
	// build (nil: "all indexes already exist", ok); unset, it builds.
	refuse *error
}

type createCall struct {
	name        string
	hasDeadline bool
	err         error // the create context's error when it returned
}

func (f *fakeIndexes) list(_ context.Context, coll string) ([]bson.Raw, error) {
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
		case <-f.release:
		case <-time.After(time.Minute): // a hang
		}
		c.err = ctx.Err()
	}
	if f.refuse != nil {
		return *f.refuse
	}
	f.created = append(f.created, c)
	spec := bson.D{{Key: "v", Value: 2}, {Key: "key", Value: m.Keys}, {Key: "name", Value: name}}
	if pf := optionsPartial(m); pf != nil {
		spec = append(spec, bson.E{Key: "partialFilterExpression", Value: pf})
	}
	raw, _ := bson.Marshal(spec)
	f.specs[coll] = append(f.specs[coll], raw)
	return c.err
}

func optionsName(m mongo.IndexModel) *string {
	var o options.IndexOptions
	for _, set := range m.Options.List() {
		_ = set(&o)
	}
	return o.Name
}

// spec is the listIndexes document of index name with keys and the
// options opts.
func spec(t *testing.T, name string, keys bson.D, opts ...bson.E) bson.Raw {
	t.Helper()
	raw, err := bson.Marshal(append(bson.D{{Key: "v", Value: 2}, {Key: "key", Value: keys}, {Key: "name", Value: name}}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestEnsureIndexesListsFirstAndBuildsWithoutDeadline:
// under the 30 s start-up context, a missing index is built by a
// createIndexes whose context has no deadline (so no maxTimeMS that would
// abort the build), announced first; present ones (any name, keys written
// by the shell as doubles) are not created again.
func TestEnsureIndexesListsFirstAndBuildsWithoutDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &fakeIndexes{specs: map[string][]bson.Raw{
		"submission": {
			spec(t, "_id_", bson.D{{Key: "_id", Value: int32(1)}}),
			spec(t, "by_problem", bson.D{{Key: "problem", Value: 1.0}, {Key: "user", Value: 1.0}}),
			spec(t, "wrong_order", bson.D{{Key: "problem", Value: 1.0}, {Key: "user", Value: 1.0}, {Key: "timestamp", Value: 1.0}, {Key: "_id", Value: 1.0}}),
			spec(t, pendingIndex.Name, pendingIndex.Keys, bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: "status", Value: -1.0}}}),
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
	// Each build returns once the caller's deadline has passed.
	f := &fakeIndexes{specs: map[string][]bson.Raw{}, block: true, release: ctx.Done()}
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
	f = &fakeIndexes{specs: map[string][]bson.Raw{}, block: true}
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

// TestEnsureIndexesUnusableSameKeys: an index with the covering keys
// that the planner cannot use for the daemon's queries (hidden, partial,
// sparse, with a collation) does not count as the covering index. Ours
// is built beside it where the server builds it; where the server
// answers that an equivalent index exists (85, or "already exists" for
// one under our own name), start-up fails with an error naming the
// index and why, instead of running every landing and rebuild without
// the index. Ordinary options (unique, the simple collation) count.
func TestEnsureIndexesUnusableSameKeys(t *testing.T) {
	conflict := error(mongo.CommandError{Code: codeIndexOptionsConflict, Name: "IndexOptionsConflict", Message: "Index already exists with a different name"})
	var none error
	cases := []struct {
		name   string
		opts   []bson.E
		ix     string // the existing index's name
		usable bool   // the existing index serves the queries: nothing to build
		refuse *error // the server's answer to our create; nil: it builds ours
		want   string // what the error names; "": none
	}{
		{"hidden", []bson.E{{Key: "hidden", Value: true}}, "cover", false, &conflict, `"cover" (hidden)`},
		{"hidden, our name", []bson.E{{Key: "hidden", Value: true}}, coverIndexName, false, &none, "(hidden)"},
		{"sparse", []bson.E{{Key: "sparse", Value: true}}, "cover", false, &conflict, `"cover" (sparse)`},
		{"sparse: 1", []bson.E{{Key: "sparse", Value: int32(1)}}, "cover", false, &conflict, `"cover" (sparse)`},
		{"partial", []bson.E{{Key: "partialFilterExpression", Value: bson.D{{Key: "status", Value: 0}}}}, "cover", false, nil, ""},
		{"partial, refused", []bson.E{{Key: "partialFilterExpression", Value: bson.D{{Key: "status", Value: 0}}}}, "cover", false, &conflict, `"cover" (partial)`},
		{"collation", []bson.E{{Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}, {Key: "strength", Value: 2}}}}, "cover", false, nil, ""},
		{"collation, refused", []bson.E{{Key: "collation", Value: bson.D{{Key: "locale", Value: "en"}}}}, "cover", false, &conflict, `"cover" (collation "en")`},
		{"unique", []bson.E{{Key: "unique", Value: true}}, "cover", true, nil, ""},
		{"simple collation", []bson.E{{Key: "collation", Value: bson.D{{Key: "locale", Value: "simple"}}}}, "cover", true, nil, ""},
		{"sparse: false", []bson.E{{Key: "sparse", Value: false}}, "cover", true, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeIndexes{specs: map[string][]bson.Raw{
				"submission": {
					spec(t, "problem_1_user_1", bson.D{{Key: "problem", Value: 1}, {Key: "user", Value: 1}}),
					spec(t, c.ix, coverKeys, c.opts...),
				},
				"problem": {spec(t, "homeworks_1", bson.D{{Key: "homeworks", Value: 1}})},
			}, refuse: c.refuse}
			err := ensureIndexes(context.Background(), f, nil, 0)
			built := slices.Contains(f.calls, "create submission "+coverIndexName)
			switch {
			case c.usable:
				if err != nil || built {
					t.Errorf("a usable index with the covering keys: err %v, built %v; want it taken as is", err, built)
				}
			case c.want == "":
				if err != nil || !built {
					t.Errorf("err %v, built %v; want ours built beside the unusable index", err, built)
				}
			default:
				if !built {
					t.Errorf("no create: the unusable index was taken as the covering index")
				}
				if err == nil || !strings.Contains(err.Error(), c.want) || watch.ClassOf(err) != watch.Fatal {
					t.Errorf("err %v (class %s), want a fatal error naming %s", err, watch.ClassOf(err), c.want)
				}
			}
		})
	}
}

// TestEnsureIndexesOptionsPerIndex: whether an option makes an index
// unusable depends on the queries it serves. Only the covering index is
// read unfiltered (the scan), so only there does sparse disqualify; a
// collation disqualifies an index with a string key (user), not
// {homeworks: 1} (ObjectIds); hidden and partial disqualify every one.
func TestEnsureIndexesOptionsPerIndex(t *testing.T) {
	sparse := bson.E{Key: "sparse", Value: true}
	collated := bson.E{Key: "collation", Value: bson.D{{Key: "locale", Value: "fr"}}}
	hidden := bson.E{Key: "hidden", Value: true}
	cases := []struct {
		name  string
		index int // of indexes
		opt   bson.E
		built bool // ours is created beside it
	}{
		{"covering, sparse", 0, sparse, true},
		{"problem_1_user_1, sparse", 1, sparse, false},
		{"problem_1_user_1, collated", 1, collated, true},
		{"problem_1_user_1, hidden", 1, hidden, true},
		{"homeworks_1, sparse", 2, sparse, false},
		{"homeworks_1, collated", 2, collated, false},
		{"homeworks_1, hidden", 2, hidden, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeIndexes{specs: map[string][]bson.Raw{}}
			for i, ix := range indexes {
				var opts []bson.E
				if i == c.index {
					opts = append(opts, c.opt)
				}
				f.specs[ix.Collection] = append(f.specs[ix.Collection], spec(t, "theirs_"+ix.Name, ix.Keys, opts...))
			}
			if err := ensureIndexes(context.Background(), f, nil, 0); err != nil {
				t.Fatal(err)
			}
			ix := indexes[c.index]
			if built := slices.Contains(f.calls, "create "+ix.Collection+" "+ix.Name); built != c.built {
				t.Errorf("%s with %s: built %v, want %v (calls %q)", ix.Name, c.opt.Key, built, c.built, f.calls)
			}
		})
	}
}

// optionsPartial is the partialFilterExpression m's options set (nil: none).
func optionsPartial(m mongo.IndexModel) any {
	if m.Options == nil {
		return nil
	}
	var o options.IndexOptions
	for _, set := range m.Options.List() {
		_ = set(&o)
	}
	return o.PartialFilterExpression
}

// TestEnsureIndexesSecondStart: a start after the one that built the
// indexes finds every one of them usable and builds nothing. Seen failing
// with every partial index counted unusable: the pending index (partial
// on status -1 by design) was built again at each start and start-up
// failed, naming it.
func TestEnsureIndexesSecondStart(t *testing.T) {
	f := &fakeIndexes{specs: map[string][]bson.Raw{}}
	if err := ensureIndexes(context.Background(), f, nil, time.Minute); err != nil {
		t.Fatalf("first start: %v", err)
	}
	built := len(f.created)
	if built != len(indexes) {
		t.Fatalf("first start built %d indexes, want %d", built, len(indexes))
	}
	if err := ensureIndexes(context.Background(), f, nil, time.Minute); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if len(f.created) != built {
		t.Errorf("second start built %d more: %v", len(f.created)-built, f.calls)
	}
}

// TestUnusablePartialIndex: a partial index serves only the build whose
// filter it is, under that build's name (the pending query hints it by
// name); every other partial index is unusable.
func TestUnusablePartialIndex(t *testing.T) {
	spec := func(name string, partial any) bson.Raw {
		d := bson.D{{Key: "v", Value: 2}, {Key: "key", Value: pendingIndex.Keys}, {Key: "name", Value: name}}
		if partial != nil {
			d = append(d, bson.E{Key: "partialFilterExpression", Value: partial})
		}
		raw, _ := bson.Marshal(d)
		return raw
	}
	cover := IndexBuild{Collection: pendingIndex.Collection, Keys: pendingIndex.Keys, Name: "other"}
	for _, tc := range []struct {
		name   string
		spec   bson.Raw
		ix     IndexBuild
		usable bool
	}{
		{"ours", spec(pendingIndex.Name, bson.D{{Key: "status", Value: int32(-1)}}), pendingIndex, true},
		{"ours, built by the shell (a double)", spec(pendingIndex.Name, bson.D{{Key: "status", Value: -1.0}}), pendingIndex, true},
		{"another filter", spec(pendingIndex.Name, bson.D{{Key: "status", Value: int32(-2)}}), pendingIndex, false},
		{"another name", spec("mine", bson.D{{Key: "status", Value: int32(-1)}}), pendingIndex, false},
		{"not partial", spec(pendingIndex.Name, nil), pendingIndex, false},
		{"partial, for a build without a filter", spec("x", bson.D{{Key: "status", Value: int32(-1)}}), cover, false},
		{"plain, for a build without a filter", spec("x", nil), cover, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := unusableIndex(tc.spec, tc.ix)
			if (why == "") != tc.usable {
				t.Errorf("unusableIndex = %q, want usable %v", why, tc.usable)
			}
		})
	}
}
