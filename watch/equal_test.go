package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// countingStore counts Apply calls and the writes they carry.
type countingStore struct {
	*memstore.Store
	applies, writes int
}

func (c *countingStore) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	c.applies++
	c.writes += w.Len()
	return c.Store.Apply(ctx, w)
}

// numberAs encodes n as the BSON numeric type typ.
func numberAs(typ bson.Type, n int64) any {
	switch typ {
	case bson.TypeInt64:
		return n
	case bson.TypeDouble:
		return float64(n)
	}
	return int32(n)
}

// TestEqualValuesOfAnyNumericTypeAreNotWritten: stored derived values equal
// to the derivation but held as int64 or whole doubles (a dump restored by
// another tool, a Back-End that wrote Python floats) are equal values: a
// recompute of every key that reaches them writes nothing, and so does a
// rebuild. A "skip if equal" by BSON bytes or type would rewrite them on
// every recompute.
func TestEqualValuesOfAnyNumericTypeAreNotWritten(t *testing.T) {
	ctx := context.Background()
	hw := bson.ObjectID{11: 0xa1}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s1 := bson.NewObjectIDFromTimestamp(end.Add(-time.Hour))
	s2 := bson.NewObjectIDFromTimestamp(end.Add(30 * time.Hour)) // one day late
	subs := []bson.Raw{
		mtest.Raw("_id", s1, "user", "alice", "problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", int32(1), "score", int32(60)),
		mtest.Raw("_id", s2, "user", "alice", "problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(end.Add(30*time.Hour)), "status", int32(0), "score", int32(100)),
	}
	problem := mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})
	hwDoc := func(entry bson.D) bson.Raw {
		return mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "penalty", "score = score * 0.8 ** overtime",
			"studentStatus", mtest.D("alice", mtest.D("7", entry)))
	}
	// The derived values, from the independent reference.
	want := reference.Derive(reference.DB{Users: []bson.Raw{mtest.Raw("_id", "alice")}, Problems: []bson.Raw{problem},
		Homeworks: []bson.Raw{hwDoc(mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))}, Submissions: subs})
	u := want.Users["alice"]
	e := want.Entries[hw.Hex()]["alice"]["7"]
	if e.RawScore == nil || *e.RawScore == e.Score || e.ProblemStatus == nil || u.ACSubmission != 1 {
		t.Fatalf("setup: want a penalised entry with rawScore != score and an AC user, have %s, %+v", e, u)
	}
	for _, typ := range []bson.Type{bson.TypeInt32, bson.TypeInt64, bson.TypeDouble} {
		t.Run(typ.String(), func(t *testing.T) {
			ids := bson.A{}
			for _, id := range e.SubmissionIDs {
				ids = append(ids, id)
			}
			acIDs := bson.A{}
			for _, p := range u.ACProblemIDs {
				acIDs = append(acIDs, numberAs(typ, p))
			}
			st := memstore.New()
			must(st.Load(materialize.CollUser, mtest.Raw("_id", "alice", "submission", numberAs(typ, u.Submission),
				"AC_submission", numberAs(typ, u.ACSubmission), "AC_problem_ids", acIDs)))
			must(st.Load(materialize.CollProblem, problem))
			must(st.Load(materialize.CollHomework, hwDoc(mtest.D("score", numberAs(typ, e.Score), "problemStatus", numberAs(typ, *e.ProblemStatus),
				"submissionIds", ids, "rawScore", numberAs(typ, *e.RawScore)))))
			must(st.Load(materialize.CollSubmission, subs...))
			if d := reference.Check(refDB(st.Docs())); len(d) > 0 {
				t.Fatalf("setup: stored values are not the derived ones: %v", d)
			}
			cs := &countingStore{Store: st}
			eng := &watch.Engine{Store: cs, Feed: st, Checkpoints: st, Log: zerolog.Nop()}
			events := []watch.Event{
				{Change: materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpUpdate, SubmissionID: s1, Fields: []string{"score"}}},
				{Change: materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpReplace, SubmissionID: s2,
					Pair: materialize.Pair{User: "alice", Problem: 7}, HasPair: true}},
				{Change: materialize.Change{Collection: materialize.CollHomework, Op: materialize.OpUpdate, HomeworkID: hw, Fields: []string{"penalty"}}},
				{Change: materialize.Change{Collection: materialize.CollProblem, Op: materialize.OpUpdate, ProblemID: 7, Fields: []string{"homeworks"}}},
				{Change: materialize.Change{Collection: materialize.CollUser, Op: materialize.OpUpdate, UserID: "alice", Fields: []string{"submission"}}},
			}
			if err := eng.ProcessBatch(ctx, events); err != nil {
				t.Fatal(err)
			}
			if cs.applies != 0 {
				t.Errorf("recompute of equal %s values: %d Apply calls with %d writes, want none", typ, cs.applies, cs.writes)
			}
			out, err := watch.Recompute(ctx, st, st, materialize.NewDeriver(), materialize.Extract(events[1].Change))
			if err != nil {
				t.Fatal(err)
			}
			if out.Writes.Len() != 0 || out.SkippedUsers != 1 || out.SkippedEntries != 1 {
				t.Errorf("Recompute: %d writes, %d users and %d entries skipped; want 0 writes, 1 and 1 skipped", out.Writes.Len(), out.SkippedUsers, out.SkippedEntries)
			}
			rep, err := watch.Rebuild(ctx, cs, materialize.NewDeriver(), watch.RebuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cs.writes != 0 || rep.DriftedUsers+rep.DriftedEntries != 0 {
				t.Errorf("rebuild of equal %s values: %d writes, %d users and %d entries drifted; want none", typ, cs.writes, rep.DriftedUsers, rep.DriftedEntries)
			}
		})
	}
}
