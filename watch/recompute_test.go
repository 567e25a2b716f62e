package watch_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// countingSource counts the submissions Submissions returns.
type countingSource struct {
	*memstore.Store
	returned int
}

func (c *countingSource) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	subs, bad, err := c.Store.Submissions(ctx, users, pairs)
	c.returned += len(subs)
	return subs, bad, err
}

// TestRecomputeReadsOnlyTheLandingsPair: a landing recomputes its user's
// counts and its pair's entries reading only the pair's submissions, not
// everything the user ever submitted (issue 19), and the values written
// are still the reference derivation's.
func TestRecomputeReadsOnlyTheLandingsPair(t *testing.T) {
	st := memstore.New()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hw := bson.NewObjectIDFromTimestamp(end)
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "u", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(1), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D("u", mtest.D("1", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))))
	sub := func(i int, problem int32, score int32) bson.Raw {
		var id bson.ObjectID
		id[11] = byte(i)
		id[10] = byte(i >> 8)
		return mtest.Raw("_id", id, "user", "u", "problem", problem, "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(-time.Duration(1000-i)*time.Minute)), "status", int32(0), "score", score)
	}
	for i := 0; i < 200; i++ {
		must(st.Load(materialize.CollSubmission, sub(i, int32(100+i%40), 100))) // the user's history elsewhere
	}
	landing := sub(500, 1, 100)
	must(st.Insert(materialize.CollSubmission, landing))
	src := &countingSource{Store: st}
	keys := materialize.NewKeys()
	keys.Merge(materialize.Extract(materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpInsert,
		SubmissionID: landing.Lookup("_id").ObjectID(), Pair: materialize.Pair{User: "u", Problem: 1}, HasPair: true}))
	out, err := watch.Recompute(context.Background(), src, st, materialize.NewDeriver(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if src.returned > 2 { // SubmissionsByID is not counted; the pair holds one submission
		t.Errorf("Submissions returned %d documents for a landing on a pair of one submission", src.returned)
	}
	if len(out.Writes.Users) != 1 {
		t.Fatalf("user writes %+v", out.Writes.Users)
	}
	st2 := st.Docs()
	var all []materialize.Submission
	for _, raw := range st2.Submissions {
		s, err := materialize.DecodeSubmission(raw)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	if want := materialize.DeriveUser(all); !out.Writes.Users[0].Stats.Equal(want) {
		t.Errorf("user stats %+v, want %+v", out.Writes.Users[0].Stats, want)
	}
}

// pairReportingSource reports the malformed submissions of the named
// pairs from Submissions too, as the mongodb adapter does (its pair query
// matches them), where memstore reports them only for named users.
type pairReportingSource struct {
	*memstore.Store
	bad map[materialize.Pair][]*materialize.DecodeError
}

func (s *pairReportingSource) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	subs, bad, err := s.Store.Submissions(ctx, users, pairs)
	for _, p := range pairs {
		for _, b := range s.bad[p] {
			c := *b
			bad = append(bad, &c)
		}
	}
	return subs, bad, err
}

// TestRecomputeReportsMalformedOnce: a malformed submission of a dirty
// pair of a dirty user is read twice by derive (the pair's submissions
// and the user's stats) and reported once.
func TestRecomputeReportsMalformedOnce(t *testing.T) {
	st := memstore.New()
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "u", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	var id bson.ObjectID
	id[11] = 9
	raw := mtest.Raw("_id", id, "user", "u", "problem", int32(1), "timestamp", "yesterday", "status", int32(0), "score", int32(100))
	must(st.Insert(materialize.CollSubmission, raw))
	_, derr := materialize.DecodeSubmission(raw)
	pair := materialize.Pair{User: "u", Problem: 1}
	src := &pairReportingSource{Store: st, bad: map[materialize.Pair][]*materialize.DecodeError{pair: {derr.(*materialize.DecodeError)}}}
	// The user and the pair dirty (as a submission key resolves to);
	// the submission key itself would add a third read of the document,
	// by _id, which reports it on its own.
	keys := materialize.NewKeys()
	keys.AddUser("u")
	keys.AddPair(pair)
	out, err := watch.Recompute(context.Background(), src, st, materialize.NewDeriver(), keys)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range out.Malformed {
		if b.ID == derr.(*materialize.DecodeError).ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the malformed submission reported %d times: %v", n, out.Malformed)
	}
}
