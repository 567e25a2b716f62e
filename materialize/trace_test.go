package materialize_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// recorder is a PairTracer that keeps every call.
type recorder struct {
	starts []int // number of homeworks per PairStart
	subs   []bool
	steps  []materialize.PairStep
	order  []string // "start", "sub", "step"
}

func (r *recorder) PairStart(_ string, _ int64, hs []*materialize.Homework) {
	r.starts = append(r.starts, len(hs))
	r.order = append(r.order, "start")
}
func (r *recorder) PairSubmission(_ *materialize.Submission, counts bool) {
	r.subs = append(r.subs, counts)
	r.order = append(r.order, "sub")
}
func (r *recorder) PairStep(st materialize.PairStep) {
	r.steps = append(r.steps, st)
	r.order = append(r.order, "step")
}

// TestTraceMatchesPair checks, on every (user, problem) group of every
// derive vector, that tracing changes nothing, that the trace has the
// documented shape (one PairSubmission per input submission, one PairStep
// per homework per counting submission) and that the last step of each
// homework holds the entry Pair returns.
func TestTraceMatchesPair(t *testing.T) {
	vs, err := mtest.ReadVectors(filepath.Join("testdata", "derive.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, v := range vs {
		cat, subs := decodeGrouped(v.DB)
		materialize.ForEachGroup(subs, func(user string, problem int64, g []materialize.Submission) {
			groups++
			hws := cat.Visited(problem)
			plain := materialize.NewDeriver().Pair(user, problem, slices.Clone(g), hws)
			rec := &recorder{}
			d := materialize.NewDeriver()
			d.Trace = rec
			traced := d.Pair(user, problem, slices.Clone(g), hws)
			if !equalPairResults(plain, traced) {
				t.Fatalf("%s (%s, %d): tracing changed the result", v.Name, user, problem)
			}
			if len(rec.starts) != 1 || rec.order[0] != "start" {
				t.Fatalf("%s (%s, %d): PairStart calls %v", v.Name, user, problem, rec.order)
			}
			n := rec.starts[0]
			if n != len(traced.Entries) {
				t.Fatalf("%s (%s, %d): PairStart named %d homeworks, result has %d entries", v.Name, user, problem, n, len(traced.Entries))
			}
			if n == 0 {
				if len(rec.order) != 1 {
					t.Fatalf("%s (%s, %d): calls after an empty PairStart: %v", v.Name, user, problem, rec.order)
				}
				return
			}
			if len(rec.subs) != len(g) {
				t.Fatalf("%s (%s, %d): %d PairSubmission calls for %d submissions", v.Name, user, problem, len(rec.subs), len(g))
			}
			counting := 0
			for _, c := range rec.subs {
				if c {
					counting++
				}
			}
			if len(rec.steps) != counting*n {
				t.Fatalf("%s (%s, %d): %d steps, want %d", v.Name, user, problem, len(rec.steps), counting*n)
			}
			if counting == 0 {
				return
			}
			last := rec.steps[len(rec.steps)-n:]
			for i, he := range traced.Entries {
				if last[i].Homework.ID != he.Homework || !equalEntries(last[i].Entry, he.Entry) {
					t.Fatalf("%s (%s, %d): last step of homework %d is %+v, result %+v", v.Name, user, problem, i, last[i], he)
				}
			}
			errs := 0
			for _, st := range rec.steps {
				if st.PenaltyErr != nil {
					errs++
				}
			}
			if errs != traced.PenaltyErrors {
				t.Fatalf("%s (%s, %d): %d steps with a penalty error, result counts %d", v.Name, user, problem, errs, traced.PenaltyErrors)
			}
		})
	}
	if groups == 0 {
		t.Fatal("no groups in the vectors")
	}
}

// TestTraceSteps checks the step fields on a hand-computed case: a problem
// in two homeworks (the first with a halving penalty, the second with a
// failing one), on-time submissions of 60 then 10, a created one, and one
// 2.5 days late of 100.
func TestTraceSteps(t *testing.T) {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	h1 := &materialize.Homework{ID: bson.NewObjectID(), End: end, Penalty: "score = score * 0.5",
		Students: map[string]map[string]struct{}{"u": {"7": {}}}}
	h2 := &materialize.Homework{ID: bson.NewObjectID(), End: end, Penalty: "score = 1 / 0",
		Students: map[string]map[string]struct{}{"u": {"7": {}}}}
	subs := []materialize.Submission{
		{ID: bson.NewObjectID(), User: "u", Problem: 7, Timestamp: end + 60*3600*1000, Status: 0, Score: 100},
		{ID: bson.NewObjectID(), User: "u", Problem: 7, Timestamp: end - 1000, Status: 1, Score: 60},
		{ID: bson.NewObjectID(), User: "u", Problem: 7, Timestamp: end - 500, Status: -2, Score: -1},
		{ID: bson.NewObjectID(), User: "u", Problem: 7, Timestamp: end - 800, Status: 5, Score: 10},
	}
	rec := &recorder{}
	d := materialize.NewDeriver()
	d.Trace = rec
	res := d.Pair("u", 7, subs, []*materialize.Homework{h1, h2})
	if want := []bool{true, true, false, true}; !slices.Equal(rec.subs, want) {
		t.Fatalf("counts %v, want %v (sorted by timestamp; the created one does not count)", rec.subs, want)
	}
	type view struct {
		hw                   *materialize.Homework
		in, raw              int64
		late                 bool
		days                 int64
		run                  bool
		gained               int64
		failed, set          bool
		score, rawAfter, out int64
	}
	want := []view{
		{h1, 60, 0, false, 0, false, 0, false, true, 60, 60, 60},
		{h2, 60, 0, false, 0, false, 0, false, true, 60, 60, 60},
		// on time but lower: problemStatus stays
		{h1, 10, 60, false, 0, false, 0, false, false, 60, 60, 10},
		{h2, 10, 60, false, 0, false, 0, false, false, 60, 60, 10},
		// late: penalty(score=100-60, overtime=2) = 20; 60+20 = 80 carries on
		{h1, 100, 60, true, 2, true, 20, false, true, 80, 100, 80},
		// carried 80 against rawScore 60: penalty fails, gains 0; score 60
		{h2, 80, 60, true, 2, true, 0, true, true, 60, 80, 60},
	}
	if len(rec.steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(rec.steps), len(want))
	}
	for i, st := range rec.steps {
		got := view{st.Homework, st.In, st.RawBefore, st.Late, st.LateDays, st.PenaltyRun, st.Gained,
			st.PenaltyErr != nil, st.SetStatus, st.Entry.Score, st.Entry.RawScore, st.Out}
		if got != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, got, want[i])
		}
	}
	if res.PenaltyErrors != 1 || rec.steps[5].PenaltyErr == nil || errors.Is(rec.steps[5].PenaltyErr, materialize.ErrScoreOverflow) {
		t.Errorf("penalty errors %d (%v), want 1 program error", res.PenaltyErrors, rec.steps[5].PenaltyErr)
	}
	// A kept step's submissionIds is not changed by later steps.
	if len(rec.steps[0].Entry.SubmissionIDs) != 1 || len(res.Entries[0].Entry.SubmissionIDs) != 3 {
		t.Errorf("submissionIds of step 0 %v, final %v", rec.steps[0].Entry.SubmissionIDs, res.Entries[0].Entry.SubmissionIDs)
	}
}

func equalPairResults(a, b materialize.PairResult) bool {
	if a.PenaltyErrors != b.PenaltyErrors || len(a.Entries) != len(b.Entries) {
		return false
	}
	for i := range a.Entries {
		if a.Entries[i].Homework != b.Entries[i].Homework || !equalEntries(a.Entries[i].Entry, b.Entries[i].Entry) {
			return false
		}
	}
	return true
}

func equalEntries(a, b materialize.Entry) bool {
	return a.Score == b.Score && a.HasStatus == b.HasStatus && (!a.HasStatus || a.ProblemStatus == b.ProblemStatus) &&
		a.HasRaw == b.HasRaw && a.RawScore == b.RawScore && slices.Equal(a.SubmissionIDs, b.SubmissionIDs)
}
