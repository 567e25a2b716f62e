package watch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// fixture is one user enrolled in one homework of one problem, with a
// deadline; submissions are added by the tests.
type fixture struct {
	st  *memstore.Store
	hw  bson.ObjectID
	end time.Time
	n   int
}

const (
	fxUser    = "alice"
	fxProblem = int64(7)
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{st: memstore.New(), hw: bson.NewObjectID(), end: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	must(f.st.Load(materialize.CollUser, mtest.Raw("_id", fxUser, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	must(f.st.Load(materialize.CollProblem, mtest.Raw("_id", int32(fxProblem), "homeworks", bson.A{f.hw})))
	must(f.st.Load(materialize.CollHomework, mtest.Raw("_id", f.hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(f.end)),
		"penalty", "score = score * 0.8 ** overtime",
		"studentStatus", mtest.D(fxUser, mtest.D("7", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))))
	return f
}

// submit inserts a pending submission at ts and returns its id.
func (f *fixture) submit(t *testing.T, ts time.Time) bson.ObjectID {
	t.Helper()
	f.n++
	id := bson.NewObjectIDFromTimestamp(ts)
	id[11] = byte(f.n)
	must(f.st.Insert(materialize.CollSubmission, mtest.Raw("_id", id, "user", fxUser, "problem", int32(fxProblem),
		"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", int32(-1), "score", int32(-1))))
	return id
}

// land writes a judging result the way process_result does.
func (f *fixture) land(t *testing.T, id bson.ObjectID, status, score int32) {
	t.Helper()
	doc := f.st.Get(materialize.CollSubmission, id)
	must(f.st.Update(materialize.CollSubmission, setFields(doc, "status", status, "score", score), []string{"status", "score", "tasks"}))
}

func (f *fixture) user(t *testing.T) materialize.UserStats {
	t.Helper()
	st, ok := materialize.DecodeUserStats(f.st.Get(materialize.CollUser, fxUser))
	if !ok {
		t.Fatal("user fields unreadable")
	}
	return st
}

func (f *fixture) entry(t *testing.T) materialize.Entry {
	t.Helper()
	es, err := mtest.StoredEntries(f.st.Get(materialize.CollHomework, f.hw))
	if err != nil {
		t.Fatal(err)
	}
	return es[fxUser]["7"]
}

func drain(t *testing.T, st *memstore.Store) {
	t.Helper()
	if err := newEngine(st).Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// crashAt makes the n-th store operation named op fail.
func crashAt(st *memstore.Store, op string, n int) {
	seen := 0
	st.Fail = func(o string) error {
		if o == op {
			seen++
			if seen == n {
				return memstore.ErrInjected
			}
		}
		return nil
	}
}

// TestSameSubmissionLandedTwice: at-least-once landing delivers the same
// judging result twice; the counts and the entry are those of one landing.
func TestSameSubmissionLandedTwice(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	drain(t, f.st)
	f.land(t, id, 0, 100) // the same result lands again
	drain(t, f.st)
	u := f.user(t)
	if u.Submission != 1 || u.ACSubmission != 1 || len(u.ACProblemIDs) != 1 {
		t.Fatalf("user = %+v, want one judged AC submission", u)
	}
	if e := f.entry(t); len(e.SubmissionIDs) != 1 || e.Score != 100 {
		t.Fatalf("entry = %+v, want one submission id and score 100", e)
	}
	checkConverged(t, f.st, "after a double landing")
}

// TestHalfFailedLandingRetried: the daemon fails half-way through a
// batch's writes (user written, entry not), the Back-End retries the
// landing in full, and the result equals one landing.
func TestHalfFailedLandingRetried(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(2*24*time.Hour)) // late: the penalty applies
	f.land(t, id, 0, 100)
	crashAt(f.st, "write.entry", 1)
	if err := newEngine(f.st).Drain(context.Background()); !errors.Is(err, memstore.ErrInjected) {
		t.Fatalf("drain = %v, want the injected failure", err)
	}
	f.st.Fail = nil
	if u := f.user(t); u.Submission != 1 {
		t.Fatalf("the user write landed before the failure: %+v", u)
	}
	f.land(t, id, 0, 100) // retried in full
	drain(t, f.st)
	if u := f.user(t); u.Submission != 1 || u.ACSubmission != 1 {
		t.Fatalf("user = %+v, want counted once", u)
	}
	if e := f.entry(t); len(e.SubmissionIDs) != 1 || e.Score != 64 { // 100 * 0.8 ** 2
		t.Fatalf("entry = %+v, want one id and the penalised score 64", e)
	}
	checkConverged(t, f.st, "after a retried landing")
}

// TestRejudge: a judged submission goes back to pending (status -1, score
// kept: a rejudge in flight), then a new result lands. While it re-judges
// nothing moves but problemStatus, which shows -1; then counts and the entry
// follow the new result alone.
func TestRejudge(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	drain(t, f.st)
	f.land(t, id, -1, 100) // rejudge: pending again
	drain(t, f.st)
	if u := f.user(t); u.Submission != 1 || u.ACSubmission != 1 || len(u.ACProblemIDs) != 1 {
		t.Fatalf("rejudge in flight: user = %+v, want the last result still counted", u)
	}
	if e := f.entry(t); len(e.SubmissionIDs) != 1 || e.Score != 100 || !e.HasStatus || e.ProblemStatus != -1 {
		t.Fatalf("rejudge in flight: entry = %+v, want score 100 kept, problemStatus -1", e)
	}
	f.land(t, id, 1, 60)
	drain(t, f.st)
	if u := f.user(t); u.Submission != 1 || u.ACSubmission != 0 {
		t.Fatalf("rejudged: user = %+v", u)
	}
	if e := f.entry(t); e.Score != 60 || e.ProblemStatus != 1 {
		t.Fatalf("rejudged: entry = %+v", e)
	}
	checkConverged(t, f.st, "after a rejudge")
}

// TestCrashPoints resumes from the saved token after a crash at each point
// of a batch: before the writes, between writes of one batch, after the
// writes but before the token is saved, and while recording keys. No update
// is lost and none is counted twice.
func TestCrashPoints(t *testing.T) {
	cases := []struct {
		name string
		op   string
		n    int
	}{
		{"before the writes (reading the source)", "read", 3},
		{"recording the key index", "keys.record", 1},
		{"before the first write", "write.user", 1},
		{"between writes of one batch", "write.entry", 1},
		{"after the writes, before the token is saved", "checkpoint.save", 2},
		{"reading the change stream", "stream.next", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			a := f.submit(t, f.end.Add(-time.Hour))
			b := f.submit(t, f.end.Add(30*time.Hour))
			f.land(t, a, 1, 40)
			f.land(t, b, 0, 100)
			saved, _, _ := f.st.LoadCheckpoint(context.Background())
			crashAt(f.st, c.op, c.n)
			err := newEngine(f.st).Drain(context.Background())
			if !errors.Is(err, memstore.ErrInjected) {
				t.Fatalf("drain = %v, want the injected failure", err)
			}
			f.st.Fail = nil
			if c.op != "checkpoint.save" {
				cp, _, _ := f.st.LoadCheckpoint(context.Background())
				if string(cp.Token) != string(saved.Token) && c.op != "stream.next" {
					t.Fatalf("token moved past unwritten events")
				}
			}
			drain(t, f.st) // restart
			if u := f.user(t); u.Submission != 2 || u.ACSubmission != 1 {
				t.Fatalf("user = %+v, want 2 judged, 1 AC", u)
			}
			if e := f.entry(t); len(e.SubmissionIDs) != 2 {
				t.Fatalf("entry = %+v, want two ids", e)
			}
			checkConverged(t, f.st, c.name)
		})
	}
}

// TestDeleteResolvedThroughKeyIndex: a delete event carries only _id; the
// key index recorded when the submission was first seen gives its pair.
// The echoes of the daemon's own writes are drained first, so the delete
// is the only event of the last drain: nothing else recomputes the user
// and the pair for it.
func TestDeleteResolvedThroughKeyIndex(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	drain(t, f.st)
	drain(t, f.st) // the echoes of the writes above: equal values, nothing written
	if u := f.user(t); u.Submission != 1 {
		t.Fatalf("setup: user = %+v, want the submission counted", u)
	}
	must(f.st.Delete(materialize.CollSubmission, id))
	reg := watch.NewMetrics(nil)
	eng := newEngine(f.st)
	eng.Metrics = reg
	f.st.ResetStats()
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.st.Stats().EventsServed; n != 1 {
		t.Fatalf("the last drain read %d events, want only the delete (an echo would recompute the keys for it)", n)
	}
	if u := f.user(t); u.Submission != 0 || u.ACSubmission != 0 {
		t.Fatalf("user = %+v, want the deleted submission uncounted", u)
	}
	if n := testutil.ToFloat64(reg.Rebuilds.WithLabelValues("unresolved")); n != 0 {
		t.Fatalf("a rebuild ran (%v); the key index should have resolved the delete", n)
	}
	checkConverged(t, f.st, "after a delete")
}

// TestDeleteOfUnknownSubmissionRebuilds: a submission that never went
// through the daemon (no key index record) is deleted; its pair is
// unknown, so the engine rebuilds instead of guessing.
func TestDeleteOfUnknownSubmissionRebuilds(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := bson.NewObjectID()
	must(f.st.Load(materialize.CollSubmission, mtest.Raw("_id", id, "user", fxUser, "problem", int32(fxProblem),
		"timestamp", bson.NewDateTimeFromTime(f.end), "status", int32(0), "score", int32(100))))
	must(f.st.Delete(materialize.CollSubmission, id))
	m := watch.NewMetrics(nil)
	eng := newEngine(f.st)
	eng.Metrics = m
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if testutil.ToFloat64(m.UnresolvedPairs) != 1 || testutil.ToFloat64(m.Rebuilds.WithLabelValues("unresolved")) != 1 {
		t.Fatalf("unresolved = %v, rebuilds = %v", testutil.ToFloat64(m.UnresolvedPairs), testutil.ToFloat64(m.Rebuilds.WithLabelValues("unresolved")))
	}
	checkConverged(t, f.st, "after an unresolved delete")
}

// runUntil runs the engine until cond holds (polling; hang at most).
func runUntil(t *testing.T, eng *watch.Engine, cond func() bool) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	deadline := time.After(hang)
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("condition not reached in %s", hang)
		case <-time.After(5 * time.Millisecond):
			if cond() {
				cancel()
				return <-done
			}
		}
	}
}

// TestHistoryLost: the saved token is no longer in the oplog. The default
// policy rebuilds and streams on from the rebuild's start time; "exit"
// returns an error wrapping ErrHistoryLost.
func TestHistoryLost(t *testing.T) {
	for _, policy := range []watch.HistoryLostPolicy{watch.OnHistoryLostRebuild, watch.OnHistoryLostExit} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
			f.st.TruncateOplog() // the oplog rolled past the checkpoint
			eng := newEngine(f.st)
			eng.Config.HistoryLost = policy
			eng.Config.IdlePause = time.Millisecond
			eng.Metrics = watch.NewMetrics(nil)
			err := runUntil(t, eng, func() bool { return f.user(t).Submission == 1 })
			if policy == watch.OnHistoryLostExit {
				if !errors.Is(err, watch.ErrHistoryLost) {
					t.Fatalf("Run = %v, want ErrHistoryLost", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			if testutil.ToFloat64(eng.Metrics.Rebuilds.WithLabelValues("history_lost")) != 1 {
				t.Fatal("no history-lost rebuild recorded")
			}
			checkConverged(t, f.st, "after history loss")
		})
	}
}

// TestTransientErrorsRetry: transient stream errors reopen the stream from
// the checkpoint after a backoff; nothing is lost.
func TestTransientErrorsRetry(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	fails := 0
	f.st.Fail = func(op string) error {
		if (op == "stream.open" || op == "stream.next") && fails < 3 {
			fails++
			return memstore.ErrInjected
		}
		return nil
	}
	eng := newEngine(f.st)
	eng.Config.MinBackoff = time.Millisecond
	eng.Config.MaxBackoff = 4 * time.Millisecond
	eng.Config.IdlePause = time.Millisecond
	eng.Metrics = watch.NewMetrics(nil)
	if err := runUntil(t, eng, func() bool { return f.user(t).Submission == 1 }); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(eng.Metrics.Restarts.WithLabelValues("transient")); n != 3 {
		t.Fatalf("transient restarts = %v, want 3", n)
	}
	f.st.Fail = nil
	drain(t, f.st)
	checkConverged(t, f.st, "after transient errors")
}

// TestShutdownAbandonsBatch: cancelling while a batch is being collected
// abandons it: Run returns nil and the checkpoint does not cover it.
func TestShutdownAbandonsBatch(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	before, _, _ := f.st.LoadCheckpoint(context.Background())
	a := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, a, 0, 100)
	ctx, cancel := context.WithCancel(context.Background())
	f.st.Fail = func(op string) error {
		if op == "stream.next" {
			cancel() // SIGTERM arrives while the batch is open
		}
		return nil
	}
	eng := newEngine(f.st)
	if err := eng.Run(ctx); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	f.st.Fail = nil
	after, _, _ := f.st.LoadCheckpoint(context.Background())
	if string(after.Token) != string(before.Token) {
		t.Fatal("the checkpoint moved although the batch was abandoned")
	}
	if u := f.user(t); u.Submission != 0 {
		t.Fatalf("an abandoned batch wrote: %+v", u)
	}
	drain(t, f.st)
	checkConverged(t, f.st, "after restart")
}

// TestFencedCheckpoint: an instance whose lease epoch is stale cannot save
// a checkpoint; Run returns resume.ErrFenced.
func TestFencedCheckpoint(t *testing.T) {
	f := newFixture(t)
	now := time.Unix(1_800_000_000, 0)
	f.st.Clock = func() time.Time { return now }
	if _, ok, _ := f.st.Acquire(context.Background(), "a", time.Second); !ok {
		t.Fatal("acquire a")
	}
	now = now.Add(2 * time.Second)
	if _, ok, _ := f.st.Acquire(context.Background(), "b", time.Second); !ok {
		t.Fatal("acquire b after expiry")
	}
	eng := newEngine(f.st)
	eng.Config.Epoch = 1 // a's epoch; b holds epoch 2
	err := eng.Run(context.Background())
	if !errors.Is(err, resume.ErrFenced) {
		t.Fatalf("Run = %v, want ErrFenced", err)
	}
	if f.st.Stats().Saves != 0 {
		t.Fatal("a stale epoch saved a checkpoint")
	}
}

// TestCoalescing: a burst of 10,000 events over 500 distinct keys in one
// batch costs a constant number of bulk reads (not one per event or per
// key) and one bulk write.
func TestCoalescing(t *testing.T) {
	st, events := burst(t, 500, 20)
	eng := &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Config: watch.Config{BatchSize: events, BatchMaxWait: time.Hour}}
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := st.Stats()
	if s.WriteCalls > 2 { // the burst's batch, and the batch of its own write events
		t.Fatalf("%d write calls, want one per batch", s.WriteCalls)
	}
	if s.Reads > 16 {
		t.Fatalf("%d source reads for %d events over 500 keys", s.Reads, events)
	}
	t.Logf("%d events: %d source reads (%.4f per event), %d write calls, %d values written", events, s.Reads,
		float64(s.Reads)/float64(events), s.WriteCalls, s.UserWrites+s.EntryWrites)
	checkConverged(t, st, "after a burst")
}

// burst builds a store past its initial rebuild with `keys` submissions
// (one per user, each user in the homework), each then updated `per` times:
// keys*per events waiting in the stream.
func burst(t testing.TB, keys, per int) (*memstore.Store, int) {
	st := memstore.New()
	hw := bson.NewObjectID()
	ss := bson.D{}
	for i := 0; i < keys; i++ {
		u := "u" + itoa(i)
		must(st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
		ss = append(ss, bson.E{Key: u, Value: mtest.D("1", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))})
	}
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(1), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "penalty", "score = score * 0.9", "studentStatus", ss)))
	ids := make([]bson.ObjectID, keys)
	for i := range ids {
		ids[i] = bson.NewObjectID()
		must(st.Load(materialize.CollSubmission, mtest.Raw("_id", ids[i], "user", "u"+itoa(i), "problem", int32(1),
			"timestamp", bson.DateTime(1_700_000_000_000), "status", int32(-1), "score", int32(-1))))
	}
	if err := (&watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop()}).Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < per; round++ {
		for i, id := range ids {
			doc := st.Get(materialize.CollSubmission, id)
			must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(round%8), "score", int32((round*7+i)%101)), []string{"status", "score"}))
		}
	}
	st.ResetStats()
	return st, keys * per
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

// BenchmarkCoalescing reports the cost of one 10,000-event batch over 500
// keys: source reads and write calls per event.
func BenchmarkCoalescing(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		st, events := burst(b, 500, 20)
		eng := &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Config: watch.Config{BatchSize: events, BatchMaxWait: time.Hour}}
		b.StartTimer()
		if err := eng.Drain(context.Background()); err != nil {
			b.Fatal(err)
		}
		s := st.Stats()
		b.ReportMetric(float64(s.Reads)/float64(events), "reads/event")
		b.ReportMetric(float64(s.WriteCalls)/float64(events), "writecalls/event")
	}
}

// stuckFeed fails every stream opened at one resume token the way a
// change stream whose next event exceeds 16 MB does: the server answers
// BSONObjectTooLarge at every reopen there (the adapter classifies it as
// ErrResumeImpossible).
type stuckFeed struct {
	st    *memstore.Store
	stuck bson.Raw
}

func (f stuckFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.st.Open(ctx, at)
	if err != nil || !bytes.Equal(at.Token, f.stuck) {
		return s, err
	}
	return tooLarge{s}, nil
}

type tooLarge struct{ watch.Stream }

func (tooLarge) Next(context.Context) (watch.Event, bool, error) {
	return watch.Event{}, false, fmt.Errorf("change stream: (BSONObjectTooLarge) BSONObj size: 17825792 is invalid: %w", watch.ErrResumeImpossible)
}

// TestResumeImpossibleRebuilds: an event the server
// cannot return (over 16 MB) used to end Run, and the restarted process
// reopened at the same token forever. Now the engine rebuilds, saves the
// rebuild's start and streams on from there.
func TestResumeImpossibleRebuilds(t *testing.T) {
	for _, policy := range []watch.HistoryLostPolicy{watch.OnHistoryLostRebuild, watch.OnHistoryLostExit} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			cp, _, _ := f.st.LoadCheckpoint(context.Background())
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
			eng := newEngine(f.st)
			eng.Feed = stuckFeed{f.st, cp.Token}
			eng.Config.HistoryLost = policy
			eng.Config.IdlePause = time.Millisecond
			eng.Metrics = watch.NewMetrics(nil)
			if err := runUntil(t, eng, func() bool { return f.user(t).Submission == 1 }); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if n := testutil.ToFloat64(eng.Metrics.Restarts.WithLabelValues("resume_impossible")); n != 1 {
				t.Errorf("resume_impossible restarts = %v, want 1", n)
			}
			after, _, _ := f.st.LoadCheckpoint(context.Background())
			if bytes.Equal(after.Token, cp.Token) && after.StartAt == cp.StartAt {
				t.Error("checkpoint still at the stuck token")
			}
			checkConverged(t, f.st, "after an oversized event")
		})
	}
}

// readAfterStore records the watch.ReadAfter time of every source read.
type readAfterStore struct {
	*memstore.Store
	seen []bson.Timestamp // zero: a read without one
}

func (s *readAfterStore) note(ctx context.Context) {
	t, _ := watch.ReadAfter(ctx)
	s.seen = append(s.seen, t)
}

func (s *readAfterStore) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	s.note(ctx)
	return s.Store.Submissions(ctx, users, pairs)
}

func (s *readAfterStore) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	s.note(ctx)
	return s.Store.Users(ctx, names)
}

func (s *readAfterStore) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	s.note(ctx)
	return s.Store.Homeworks(ctx, ids, users)
}

// Read goes through the parts above, as Source.Read is defined.
func (s *readAfterStore) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, s, r)
}

// TestBatchReadsCausallyAfterLastEvent, on the engine's
// side: every read of a batch's recomputation carries the cluster time of
// the batch's last event (the adapter turns it into readConcern
// afterClusterTime), so the reads reflect what the batch's events did.
func TestBatchReadsCausallyAfterLastEvent(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	// The batch: the two events above (the engine's own writes emit more
	// afterwards, read by later batches).
	last := bson.Timestamp{}
	st, err := f.st.Open(context.Background(), watch.Position{StartAt: bson.Timestamp{T: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, ok, err := st.Next(context.Background())
		if err != nil || !ok {
			break
		}
		last = ev.ClusterTime
	}
	rs := &readAfterStore{Store: f.st}
	eng := newEngine(f.st)
	eng.Store = rs
	eng.Config.BatchSize = 100
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rs.seen) == 0 {
		t.Fatal("no source read")
	}
	if rs.seen[0] != last {
		t.Errorf("first batch read after %v, want its last event %v", rs.seen[0], last)
	}
	for i, got := range rs.seen {
		if got.IsZero() {
			t.Errorf("read %d of a batch without a cluster time to read after", i)
		}
	}
	if f.user(t).Submission != 1 {
		t.Error("batch not applied")
	}
}
