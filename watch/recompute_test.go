package watch_test

import (
	"context"
	"fmt"
	"slices"
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

// Read goes through the parts above, as Source.Read is defined.
func (c *countingSource) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, c, r)
}

// TestRecomputeReadsOnlyTheLandingsPair: a landing recomputes its user's
// counts and its pair's entries reading only the pair's submissions, not
// everything the user ever submitted, and the values written
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

// Read goes through the parts above, as Source.Read is defined.
func (s *pairReportingSource) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, s, r)
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

// invalidations records what the engine asks the cache to forget.
type invalidations struct{ calls [][]materialize.Pair }

func (c *invalidations) Invalidate(_ context.Context, pairs []materialize.Pair) {
	c.calls = append(c.calls, slices.Clone(pairs))
}

// TestCacheInvalidatedForChangedSubmissions: a batch that changes a
// submission invalidates the cached high score of its pair; a batch that
// changes no submission (a homework penalty) invalidates nothing.
func TestCacheInvalidatedForChangedSubmissions(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	cache := &invalidations{}
	eng := newEngine(f.st)
	eng.Cache = cache
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := materialize.Pair{User: fxUser, Problem: fxProblem}
	if len(cache.calls) == 0 || !slices.Contains(cache.calls[0], want) {
		t.Fatalf("invalidations %v, want %v invalidated", cache.calls, want)
	}
	cache.calls = nil
	doc := f.st.Get(materialize.CollHomework, f.hw)
	must(f.st.Update(materialize.CollHomework, setFields(doc, "penalty", "score = score // 2"), []string{"penalty"}))
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(cache.calls) != 0 {
		t.Errorf("a homework change invalidated %v; no submission changed", cache.calls)
	}
}

// TestRecomputeCountsReads: Outcome.Reads is the number of source read
// calls the recomputation made (a Source.Read one call, however many parts
// memstore answers it with).
func TestRecomputeCountsReads(t *testing.T) {
	w := newWorld(7)
	for i := 0; i < 30; i++ {
		w.step()
	}
	keys := materialize.NewKeys()
	for _, ev := range serveAll(t, w.st) {
		keys.Merge(materialize.Extract(ev.Change))
	}
	w.st.ResetStats()
	cs := newCallCountingStore(w.st)
	out, err := watch.Recompute(context.Background(), cs, cs, materialize.NewDeriver(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.total(); out.Reads != got || got == 0 {
		t.Errorf("Outcome.Reads = %d, the store served %d read calls (%v)", out.Reads, got, cs.calls)
	}
	if parts := w.st.Stats().Reads; parts < out.Reads {
		t.Errorf("memstore served %d reads, fewer than the %d calls", parts, out.Reads)
	}
}

// serveAll reads every event of the store's oplog.
func serveAll(t *testing.T, st *memstore.Store) []watch.Event {
	t.Helper()
	s, err := st.Open(context.Background(), watch.Position{StartAt: bson.Timestamp{T: 1, I: 0}})
	if err != nil {
		t.Fatal(err)
	}
	var out []watch.Event
	for {
		ev, ok, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// TestResetOfKeysNoProblemRenders: an entry under a key no problem id
// renders to ("01") is reset to the start value when its student's part of
// the homework changes, in a homework no problem lists (the batch then has
// no pair to recompute), whether or not it also recomputes a user.
func TestResetOfKeysNoProblemRenders(t *testing.T) {
	for _, withUser := range []bool{false, true} {
		t.Run(fmt.Sprintf("with a user key %v", withUser), func(t *testing.T) {
			f := newFixture(t)
			orphan := bson.ObjectID{11: 0xb2}
			must(f.st.Load(materialize.CollHomework, mtest.Raw("_id", orphan, "studentStatus", mtest.D())))
			drain(t, f.st)
			drain(t, f.st)
			garbage := mtest.D("score", int32(5), "problemStatus", int32(0), "submissionIds", bson.A{"x"})
			doc := f.st.Get(materialize.CollHomework, orphan)
			must(f.st.Update(materialize.CollHomework, setFields(doc, "studentStatus", mtest.D("bob", mtest.D("01", garbage))), []string{"studentStatus.bob"}))
			if withUser {
				must(f.st.Insert(materialize.CollUser, mtest.Raw("_id", "carol", "submission", int32(3), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
			}
			eng := newEngine(f.st)
			eng.Config.BatchSize = 64
			if err := eng.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkConverged(t, f.st, "after bob's garbage entry appeared")
		})
	}
}

// TestIfSubmittedPairWithExtraHomework: a change to alice's part of
// homework H makes (alice, 7) dirty only if she submitted to problem 7
// (H is listed by 7, but alice has no entry for 7 in H); the same batch
// changes problem 7, which finds her entry for 7 in H2, stale. She has no
// submission of 7, yet that entry must still be reset.
func TestIfSubmittedPairWithExtraHomework(t *testing.T) {
	st := memstore.New()
	h, h2 := bson.ObjectID{11: 0xa1}, bson.ObjectID{11: 0xa2}
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "alice", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{h, h2}), mtest.Raw("_id", int32(8), "homeworks", bson.A{h})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", h, "studentStatus", mtest.D("alice", mtest.D("8", start))),
		mtest.Raw("_id", h2, "studentStatus", mtest.D("alice", mtest.D("7", start)))))
	drain(t, st)
	drain(t, st)
	// A stale entry that no event announces (written before the daemon ran).
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", h2, "studentStatus", mtest.D("alice", mtest.D("7",
		mtest.D("score", int32(999), "problemStatus", int32(0), "submissionIds", bson.A{"dup"}))))))
	doc := st.Get(materialize.CollHomework, h)
	must(st.Update(materialize.CollHomework, doc, []string{"studentStatus.alice"}))
	p := st.Get(materialize.CollProblem, int32(7))
	must(st.Update(materialize.CollProblem, p, []string{"homeworks"}))
	eng := newEngine(st)
	eng.Config.BatchSize = 64
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkConverged(t, st, "after alice's part of H and problem 7 changed in one batch")
}

// TestDeletedOnlySubmissionWithHomeworkUserChange: one batch deletes
// alice's only submission of problem 7 and changes her part of homework H,
// which lists 7 but holds no entry of hers for it. The change to H alone
// would make (alice, 7) matter only if she submitted to 7 (IfSubmitted);
// the delete makes it matter whatever: her entry for 7 in H2 still counts
// the deleted submission, and only reading the pair's (now no)
// submissions resets it. Seen failing with the pair marked IfSubmitted
// although the delete had made it dirty, and with the homework users
// expanded before the submissions.
func TestDeletedOnlySubmissionWithHomeworkUserChange(t *testing.T) {
	st := memstore.New()
	h, h2 := bson.ObjectID{11: 0xb1}, bson.ObjectID{11: 0xb2}
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "alice", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{h, h2}), mtest.Raw("_id", int32(8), "homeworks", bson.A{h})))
	must(st.Load(materialize.CollHomework,
		mtest.Raw("_id", h, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D("alice", mtest.D("8", start))),
		mtest.Raw("_id", h2, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D("alice", mtest.D("7", start)))))
	ts := end.Add(-time.Hour)
	s := bson.NewObjectIDFromTimestamp(ts)
	must(st.Insert(materialize.CollSubmission, mtest.Raw("_id", s, "user", "alice", "problem", int32(7), "languageType", int32(1),
		"timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100))))
	drain(t, st)
	drain(t, st)
	if es, err := mtest.StoredEntries(st.Get(materialize.CollHomework, h2)); err != nil || len(es["alice"]["7"].SubmissionIDs) != 1 {
		t.Fatalf("before the batch, alice's entry for 7 in H2 = %+v (%v), want her submission in it", es["alice"]["7"], err)
	}

	must(st.Delete(materialize.CollSubmission, s))
	must(st.Update(materialize.CollHomework, setFields(st.Get(materialize.CollHomework, h), "studentStatus",
		mtest.D("alice", mtest.D("8", mtest.D("score", int32(5), "problemStatus", nil, "submissionIds", bson.A{})))),
		[]string{"studentStatus.alice"}))
	eng := newEngine(st)
	eng.Config.BatchSize = 64
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkConverged(t, st, "after alice's only submission of 7 was deleted and her part of H changed in one batch")
}
