package mongodb

import (
	"bytes"
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

// pendingDoc is a submission as the Back-End stores it, with the fields
// the pending query reads.
func pendingDoc(id int, status any, lang int32, lastSend any) bson.D {
	d := bson.D{
		{Key: "_id", Value: bson.ObjectID{11: byte(id)}}, {Key: "problem", Value: int32(7)}, {Key: "user", Value: "alice"},
		{Key: "languageType", Value: lang}, {Key: "status", Value: status}, {Key: "score", Value: int32(-1)},
		{Key: "tasks", Value: bson.A{}},
	}
	if lastSend != nil {
		d = append(d, bson.E{Key: "lastSend", Value: lastSend})
	}
	return d
}

// TestPendingFilter: the query selects the judged submissions (language
// 0-2) whose status is -1 (stored as int32 or int64) and whose lastSend
// is before the cutoff, the oldest first; not handwritten ones (graded by
// a teacher, never sent), created (-2) or judged ones, nor one sent at
// or after the cutoff. Every document it selects is in the partial
// index (the filter implies partialFilterExpression, so the hint is
// valid). Evaluated with the package's MQL evaluator (aggeval_test.go).
func TestPendingFilter(t *testing.T) {
	cutoff := time.Date(2026, 3, 1, 11, 30, 0, 0, time.UTC)
	at := func(d time.Duration) bson.DateTime { return bson.NewDateTimeFromTime(cutoff.Add(d)) }
	docs := []bson.D{
		pendingDoc(1, int32(-1), 1, at(-time.Hour)),
		pendingDoc(2, int64(-1), 0, at(-2*time.Hour)), // int64 status, older: first
		pendingDoc(3, int32(-1), 2, at(-time.Millisecond)),
		pendingDoc(4, int32(-1), 3, at(-3*time.Hour)), // handwritten
		pendingDoc(5, int32(-1), 1, at(0)),            // at the cutoff: not yet
		pendingDoc(6, int32(-1), 1, at(time.Minute)),  // after it
		pendingDoc(7, int32(-2), 1, at(-time.Hour)),   // created, never sent
		pendingDoc(8, int32(0), 1, at(-time.Hour)),    // judged
		pendingDoc(9, int32(-1), 1, nil),              // no lastSend
		pendingDoc(10, int32(-1), 1, "2026-01-01"),    // lastSend not a date
	}
	for i := range docs {
		docs[i] = norm(docs[i]).(bson.D)
	}
	stages := bson.A{bson.D{{Key: "$match", Value: pendingFilter(cutoff)}}, bson.D{{Key: "$sort", Value: pendingSort}},
		bson.D{{Key: "$project", Value: pendingProjection}}}
	got := runPipeline(docs, norm(stages).(bson.A))
	var ids []int
	for _, d := range got {
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		p := decodePending(raw)
		ids = append(ids, int(mustOID(t, p.ID)[11]))
		if p.User != "alice" || p.Problem != 7 || p.LastSend.IsZero() {
			t.Errorf("decoded %+v, want user alice, problem 7 and its lastSend", p)
		}
	}
	if want := []int{2, 1, 3}; !slices.Equal(ids, want) {
		t.Errorf("selected %v, want %v (oldest first)", ids, want)
	}
	partial := runPipeline(docs, norm(bson.A{bson.D{{Key: "$match", Value: pendingIndex.Partial}}}).(bson.A))
	inIndex := map[string]bool{}
	for _, d := range partial {
		inIndex[d[0].Value.(bson.ObjectID).Hex()] = true
	}
	for _, d := range got {
		if id := d[0].Value.(bson.ObjectID).Hex(); !inIndex[id] {
			t.Errorf("%s selected but outside the partial index: the planner could not use it", id)
		}
	}
}

func mustOID(t *testing.T, hex string) bson.ObjectID {
	t.Helper()
	id, err := bson.ObjectIDFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPendingFindOptions: the find hints the partial index by name (a
// missing index fails the query instead of scanning the collection),
// sorts by lastSend and projects only what a listing prints.
func TestPendingFindOptions(t *testing.T) {
	var o options.FindOptions
	for _, set := range pendingFindOptions().List() {
		if err := set(&o); err != nil {
			t.Fatal(err)
		}
	}
	if o.Hint != pendingIndex.Name {
		t.Errorf("hint %v, want the index name %q", o.Hint, pendingIndex.Name)
	}
	if sort, ok := o.Sort.(bson.D); !ok || len(sort) != 1 || sort[0].Key != "lastSend" {
		t.Errorf("sort %v, want lastSend", o.Sort)
	}
	if o.Projection == nil {
		t.Error("no projection: whole submissions (tasks, every case's result) would travel")
	}
}

// indexRecorder is an indexAdmin that lists nothing and records each
// created model.
type indexRecorder struct{ models []mongo.IndexModel }

func (r *indexRecorder) database() string { return "normal-oj" }
func (r *indexRecorder) list(context.Context, string) ([]bson.Raw, error) {
	return nil, nil
}
func (r *indexRecorder) create(_ context.Context, _ string, m mongo.IndexModel) error {
	r.models = append(r.models, m)
	return nil
}

// TestEnsureIndexesBuildsPendingIndexPartial: the pending index is built
// with its partialFilterExpression {status: -1}; without it the index
// would hold every submission.
func TestEnsureIndexesBuildsPendingIndexPartial(t *testing.T) {
	r := &indexRecorder{}
	if err := ensureIndexes(context.Background(), r, nil, 0); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range r.models {
		var o options.IndexOptions
		for _, set := range m.Options.List() {
			_ = set(&o)
		}
		if o.Name == nil || *o.Name != pendingIndex.Name {
			if o.PartialFilterExpression != nil {
				t.Errorf("index %v built partial", o.Name)
			}
			continue
		}
		found = true
		raw, err := bson.Marshal(o.PartialFilterExpression)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := bson.Marshal(bson.D{{Key: "status", Value: int32(-1)}})
		if !bytes.Equal(raw, want) {
			t.Errorf("partialFilterExpression %s, want {status: -1}", bson.Raw(raw))
		}
		if !sameKeys(mustMarshal(t, m.Keys), bson.D{{Key: "languageType", Value: 1}, {Key: "lastSend", Value: 1}}) {
			t.Errorf("keys %v", m.Keys)
		}
	}
	if !found {
		t.Errorf("%s not built", pendingIndex.Name)
	}
}

// TestPendingErrors: the server's refusal of the hint (no such index, or
// hidden) is ErrPendingIndexMissing, Fatal (the policy skips the check);
// other BadValues are not.
func TestPendingErrors(t *testing.T) {
	hint := mongo.CommandError{Code: 2, Name: "BadValue", Message: "error processing query: ns=normal-oj.submission ... planner returned error :: caused by :: hint provided does not correspond to an existing index"}
	if !isBadHint(hint) {
		t.Error("the hint refusal not recognised")
	}
	if isBadHint(mongo.CommandError{Code: 2, Name: "BadValue", Message: "unknown operator: $foo"}) {
		t.Error("another BadValue taken for a missing index")
	}
	err := watch.WithClass(watch.Fatal, errors.Join(ErrPendingIndexMissing, hint))
	if !errors.Is(err, ErrPendingIndexMissing) || watch.ClassOf(err) != watch.Fatal {
		t.Errorf("%v", err)
	}
}

// TestPendingListingBytes: one pending submission costs the query's
// reply its projected document, under 100 bytes, whatever the stored
// one holds (here the Back-End's tasks of case results, kilobytes); the
// size is logged for docs/benchmarks.md (-v).
func TestPendingListingBytes(t *testing.T) {
	d := pendingDoc(1, int32(-1), 1, bson.NewDateTimeFromTime(time.Unix(1, 0)))
	d[2].Value = "student00001" // a demo user name, 12 bytes
	cases := bson.A{}
	for range 20 {
		cases = append(cases, bson.D{{Key: "exitCode", Value: int32(0)}, {Key: "status", Value: "AC"}, {Key: "stdout", Value: "42\n"},
			{Key: "stderr", Value: ""}, {Key: "execTime", Value: int32(12)}, {Key: "memoryUsage", Value: int32(2048)}})
	}
	d[6].Value = bson.A{bson.D{{Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}, {Key: "cases", Value: cases}}}
	stages := norm(bson.A{bson.D{{Key: "$project", Value: pendingProjection}}}).(bson.A)
	got := runPipeline([]bson.D{norm(d).(bson.D)}, stages)
	stored, projected := len(mustMarshal(t, d)), len(mustMarshal(t, got[0]))
	if projected >= 100 {
		t.Errorf("a projected pending submission is %d bytes, want under 100", projected)
	}
	t.Logf("pending submission: %d bytes stored, %d bytes in the reply", stored, projected)
}

// TestPendingSubmissionsCommand: through the driver (its mock
// deployment), PendingSubmissions sends one find on submission with the
// filter, the projection, the lastSend sort, the index hint and
// readConcern majority, and decodes the reply in order; the server's
// refusal of the hint comes back as ErrPendingIndexMissing, Fatal.
func TestPendingSubmissionsCommand(t *testing.T) {
	d, md, sent := mockDB(t)
	cutoff := time.Date(2026, 3, 1, 11, 30, 0, 0, time.UTC)
	sub := func(n byte, sent time.Time) bson.D {
		return bson.D{{Key: "_id", Value: bson.ObjectID{11: n}}, {Key: "user", Value: "alice"}, {Key: "problem", Value: int64(7)},
			{Key: "lastSend", Value: bson.NewDateTimeFromTime(sent)}}
	}
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "normal-oj.submission"},
		{Key: "firstBatch", Value: bson.A{sub(2, cutoff.Add(-2*time.Hour)), sub(1, cutoff.Add(-time.Hour))}}}}})
	got, err := d.PendingSubmissions(context.Background(), cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != (bson.ObjectID{11: 2}).Hex() || got[1].Problem != 7 || !got[1].LastSend.Equal(cutoff.Add(-time.Hour)) {
		t.Errorf("decoded %+v", got)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("%d commands, want one find", len(cmds))
	}
	c := cmds[0]
	if v, _ := c.Lookup("find").StringValueOK(); v != "submission" {
		t.Errorf("command %s, want a find on submission", c)
	}
	if v, _ := c.Lookup("hint").StringValueOK(); v != pendingIndex.Name {
		t.Errorf("hint %s", c.Lookup("hint"))
	}
	if v, _ := c.Lookup("readConcern", "level").StringValueOK(); v != "majority" {
		t.Errorf("readConcern %s, want majority", c.Lookup("readConcern"))
	}
	if !bytes.Equal(c.Lookup("filter").Document(), mustMarshal(t, pendingFilter(cutoff))) ||
		!bytes.Equal(c.Lookup("sort").Document(), mustMarshal(t, pendingSort)) ||
		!bytes.Equal(c.Lookup("projection").Document(), mustMarshal(t, pendingProjection)) {
		t.Errorf("find %s", c)
	}
	md.AddResponses(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(2)}, {Key: "codeName", Value: "BadValue"},
		{Key: "errmsg", Value: "error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index"}})
	if _, err := d.PendingSubmissions(context.Background(), cutoff); !errors.Is(err, ErrPendingIndexMissing) || watch.ClassOf(err) != watch.Fatal {
		t.Errorf("hint refused: %v (class %s), want ErrPendingIndexMissing, fatal", err, watch.ClassOf(err))
	}
	md.AddResponses(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(13)}, {Key: "codeName", Value: "Unauthorized"},
		{Key: "errmsg", Value: "not authorized on normal-oj to execute command { find: \"submission\" }"}})
	if _, err := d.PendingSubmissions(context.Background(), cutoff); watch.ClassOf(err) != watch.Unauthorized || !strings.Contains(err.Error(), `"find"`) {
		t.Errorf("unauthorized: %v (class %s), want unauthorized naming find", err, watch.ClassOf(err))
	}
}
