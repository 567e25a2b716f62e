package watch_test

// Tests written for mutants that survived `make mutate MUTATE_PKG=./watch`
// (docs/testing.md): each checks a documented behaviour no other test
// pinned down.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
	"github.com/rs/zerolog"
)

// TestDecodeEventFields: the cluster time, the operation, the namespace,
// the document key and, for inserts and replaces only, the (user,
// problem) of the projected fullDocument.
func TestDecodeEventFields(t *testing.T) {
	id := bson.ObjectID{11: 5}
	ev := func(op string, full bool) bson.Raw {
		d := bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "826"}}}, {Key: "operationType", Value: op},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1_700_000_123, I: 7}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: "submission"}}},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}}}
		if full {
			d = append(d, bson.E{Key: "fullDocument", Value: bson.D{{Key: "user", Value: "alice"}, {Key: "problem", Value: int64(7)}}})
		}
		b, err := bson.Marshal(d)
		must(err)
		return b
	}
	for _, c := range []struct {
		op      string
		full    bool
		hasPair bool
	}{
		{"insert", true, true}, {"replace", true, true}, {"update", true, false}, {"delete", false, false},
	} {
		got, err := watch.DecodeEvent(ev(c.op, c.full))
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		if got.ClusterTime != (bson.Timestamp{T: 1_700_000_123, I: 7}) {
			t.Errorf("%s: cluster time %v", c.op, got.ClusterTime)
		}
		if string(got.Change.Op) != c.op || got.Change.Collection != "submission" || got.Change.SubmissionID != id {
			t.Errorf("%s: change %+v", c.op, got.Change)
		}
		if got.Change.HasPair != c.hasPair || (c.hasPair && got.Change.Pair != (materialize.Pair{User: "alice", Problem: 7})) {
			t.Errorf("%s: pair %+v (has %v), want has %v", c.op, got.Change.Pair, got.Change.HasPair, c.hasPair)
		}
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
// calls the recomputation made.
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
	out, err := watch.Recompute(context.Background(), w.st, w.st, materialize.NewDeriver(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.st.Stats().Reads; out.Reads != got || got == 0 {
		t.Errorf("Outcome.Reads = %d, the store served %d read calls", out.Reads, got)
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

// TestRebuildReportCounts: a rebuild's report counts every compared and
// every drifted value (as the independent reference finds them), keeps at
// most MaxDiffs differences with their stored and derived values, and
// Drift is their sum; a dry run writes nothing, a real one exactly those.
func TestRebuildReportCounts(t *testing.T) {
	ctx := context.Background()
	w := newWorld(11)
	for i := 0; i < 60; i++ {
		w.step()
	}
	diffs := reference.Check(refDB(w.st.Docs()))
	var users, entries int
	for _, d := range diffs {
		if strings.HasPrefix(d, "user ") {
			users++
		} else {
			entries++
		}
	}
	if users == 0 || entries < 3 {
		t.Fatalf("setup: %d users and %d entries drifted, want some of each", users, entries)
	}
	for _, maxDiffs := range []int{0, 2, 1000} {
		rep, err := watch.Rebuild(ctx, w.st, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true, MaxDiffs: maxDiffs})
		if err != nil {
			t.Fatal(err)
		}
		if rep.DriftedUsers != users || rep.DriftedEntries != entries || rep.Drift() != users+entries {
			t.Errorf("MaxDiffs %d: drifted %d users, %d entries (Drift %d); the reference finds %d and %d",
				maxDiffs, rep.DriftedUsers, rep.DriftedEntries, rep.Drift(), users, entries)
		}
		if want := min(maxDiffs, users+entries); len(rep.Diffs) != want {
			t.Errorf("MaxDiffs %d: %d diffs kept, want %d", maxDiffs, len(rep.Diffs), want)
		}
		for _, d := range rep.Diffs {
			if d.Derived == "" || !strings.HasPrefix(d.Derived, "{") && !strings.HasPrefix(d.Derived, "[") {
				t.Errorf("diff %+v: derived value not rendered as Extended JSON", d)
			}
			// Stored documents read like derived ones: relaxed Extended JSON.
			if strings.HasPrefix(d.Stored, "{") && strings.Contains(d.Stored, "$numberInt") {
				t.Errorf("diff %+v: stored value in canonical, not relaxed, Extended JSON", d)
			}
		}
	}
	if s := w.st.Stats(); s.UserWrites+s.EntryWrites != 0 {
		t.Fatalf("dry runs wrote %d values", s.UserWrites+s.EntryWrites)
	}
	rep, err := watch.Rebuild(ctx, w.st, materialize.NewDeriver(), watch.RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := w.st.Stats(); s.UserWrites != users || s.EntryWrites != entries || rep.Drift() != users+entries {
		t.Errorf("rebuild wrote %d users and %d entries (drift %d), want %d and %d", s.UserWrites, s.EntryWrites, rep.Drift(), users, entries)
	}
	checkConverged(t, w.st, "after the rebuild")
}

// flushRecorder records the size of every Apply call.
type flushRecorder struct {
	*memstore.Store
	sizes  []int
	reject bool
}

func (f *flushRecorder) Apply(ctx context.Context, w *watch.Writes) error {
	f.sizes = append(f.sizes, w.Len())
	if f.reject {
		return fmt.Errorf("document too large: %w", watch.ErrWriteRejected)
	}
	return f.Store.Apply(ctx, w)
}

// TestRebuildFlushEvery: a rebuild buffers at most FlushEvery writes per
// Apply (10,000 when zero); writes the server refuses for good are counted
// in the report and the rebuild goes on.
func TestRebuildFlushEvery(t *testing.T) {
	ctx := context.Background()
	drifted := func() *memstore.Store {
		w := newWorld(11)
		for i := 0; i < 60; i++ {
			w.step()
		}
		return w.st
	}
	n := len(reference.Check(refDB(drifted().Docs())))
	if n < 5 {
		t.Fatalf("setup: %d drifted values", n)
	}
	// A flush applies its user writes and its entry writes as separate
	// guarded chunks (applyGuarded), so one flush is one or two Apply calls.
	for _, c := range []struct {
		flush    int
		max      int // largest Apply
		minCalls int
		maxCalls int
	}{
		{0, n, 1, 2},
		{-3, n, 1, 2},
		{2, 2, (n + 1) / 2, n},
	} {
		fr := &flushRecorder{Store: drifted()}
		if _, err := watch.Rebuild(ctx, fr, materialize.NewDeriver(), watch.RebuildOptions{FlushEvery: c.flush}); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, sz := range fr.sizes {
			sum += sz
		}
		if sum != n || slices.Max(fr.sizes) > c.max || len(fr.sizes) < c.minCalls || len(fr.sizes) > c.maxCalls {
			t.Errorf("FlushEvery %d: Apply sizes %v, want %d writes in %d to %d calls of at most %d", c.flush, fr.sizes, n, c.minCalls, c.maxCalls, c.max)
		}
	}
	fr := &flushRecorder{Store: drifted(), reject: true}
	rep, err := watch.Rebuild(ctx, fr, materialize.NewDeriver(), watch.RebuildOptions{FlushEvery: 2})
	if err != nil {
		t.Fatalf("rebuild with refused writes: %v, want it to go on", err)
	}
	if rep.Rejected != len(fr.sizes) || rep.Rejected < 2 {
		t.Errorf("rejected %d of %d bulk writes", rep.Rejected, len(fr.sizes))
	}
}

// TestLeaderMargin: the write guard refuses TTL - Margin after the last
// renewal, with Margin defaulting to TTL/3 when unset and kept when set.
func TestLeaderMargin(t *testing.T) {
	for _, c := range []struct {
		margin, refuseAfter time.Duration
	}{
		{0, ldTTL - ldTTL/3},
		{-time.Millisecond, ldTTL - ldTTL/3},
		{5 * time.Millisecond, ldTTL - 5*time.Millisecond},
		{30 * time.Millisecond, ldTTL - 30*time.Millisecond},
	} {
		st := memstore.New()
		g := &gatedLeases{LeaseStore: st}
		clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		l := newLeader(st, g, "a", clk)
		l.Margin = c.margin
		ctx, cancel := context.WithCancel(context.Background())
		tm, err := startTerm(t, ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		g.setRefuse(true)
		clk.Add(c.refuseAfter - time.Millisecond)
		if _, err := tm.eng.WriteGuard(ctx); err != nil {
			t.Errorf("margin %s: guard %s after acquiring: %v", c.margin, c.refuseAfter-time.Millisecond, err)
		}
		clk.Add(time.Millisecond)
		if _, err := tm.eng.WriteGuard(ctx); !errors.Is(err, watch.ErrLeaseExpiring) {
			t.Errorf("margin %s: guard %s after acquiring: %v, want ErrLeaseExpiring", c.margin, c.refuseAfter, err)
		}
		cancel()
		<-tm.done
	}
}

// releaseWatcher records the context of each Release.
type releaseWatcher struct {
	*gatedLeases
	releaseErr []error
}

func (r *releaseWatcher) Release(ctx context.Context, owner string, epoch int64) error {
	var err error
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < time.Second {
		err = fmt.Errorf("release deadline only %s away", time.Until(dl))
	}
	r.releaseErr = append(r.releaseErr, errors.Join(ctx.Err(), err))
	return r.gatedLeases.Release(ctx, owner, epoch)
}

// renewsEvery waits (up to a minute of real time) for n more renewals on
// g and checks they were not sent faster than one per every. The bounds
// hold on a loaded machine: a late tick only makes the wait longer, and
// a ticker never fires early, so n renewals take at least (n-1)·every.
// (A count of renewals in a fixed real time, as before, failed when the
// machine was busy.)
func renewsEvery(g *gatedLeases, n int, every time.Duration) error {
	start, before := time.Now(), g.callsSoFar()
	for g.callsSoFar() < before+n {
		if time.Since(start) > time.Minute {
			return fmt.Errorf("%d renewals in %s, want %d (one every %s)", g.callsSoFar()-before, time.Since(start), n, every)
		}
		time.Sleep(time.Millisecond)
	}
	if took := time.Since(start); took < time.Duration(n-1)*every {
		return fmt.Errorf("%d renewals in %s, want one every %s at most", n, took, every)
	}
	return nil
}

// TestLeaderDoRenewsAndReleases: Do renews the lease every TTL/3 while
// its job runs, and releases it afterwards with time to do so (a standby
// takes over at once, not after expiry).
func TestLeaderDoRenewsAndReleases(t *testing.T) {
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	rw := &releaseWatcher{gatedLeases: g}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := newLeader(st, g, "a", clk)
	a.Leases = rw
	err := a.Do(context.Background(), func(ctx context.Context, _ *watch.Engine) error {
		return renewsEvery(g, 15, ldTTL/3)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rw.releaseErr) != 1 || rw.releaseErr[0] != nil {
		t.Fatalf("releases: %v, want one with a live context", rw.releaseErr)
	}
	b := newLeader(st, g, "b", clk)
	if err := b.Do(context.Background(), func(context.Context, *watch.Engine) error { return nil }); err != nil {
		t.Errorf("b right after a released: %v", err)
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

// TestLeaderRun: Run campaigns; the holder streams, a second instance
// stands by; when the holder shuts down it releases the lease and the
// standby takes over at once with a new epoch, its checkpoints carrying it.
func TestLeaderRun(t *testing.T) {
	st := memstore.New()
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "alice", "submission", int32(4), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	run := func(l *watch.Leader) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		return cancel, done
	}
	a := newLeader(st, g, "a", clk)
	a.NewEngine = func(epoch int64) *watch.Engine {
		return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Now: clk.Now,
			Config: watch.Config{Epoch: epoch, Owner: "a", IdlePause: time.Millisecond}}
	}
	stopA, doneA := run(a)
	eventually(t, "a streaming", func() bool {
		cp, ok, _ := st.LoadCheckpoint(context.Background())
		return ok && cp.Epoch == 1 && cp.Owner == a.ID()
	})
	b := newLeader(st, g, "b", clk)
	b.NewEngine = func(epoch int64) *watch.Engine {
		return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Now: clk.Now,
			Config: watch.Config{Epoch: epoch, Owner: "b", IdlePause: time.Millisecond}}
	}
	rw := &releaseWatcher{gatedLeases: g}
	b.Leases = rw
	stopB, doneB := run(b)
	defer stopB()
	waitTicks(t, g, 3)
	if l, _, _ := st.Current(context.Background()); l.Owner != a.ID() || l.Epoch != 1 {
		t.Fatalf("lease %+v while a runs, want a's epoch 1", l)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	eventually(t, "b taking over", func() bool {
		l, _, _ := st.Current(context.Background())
		return l.Owner == b.ID() && l.Epoch == 2
	})
	must(st.Insert(materialize.CollUser, mtest.Raw("_id", "zed", "submission", int32(2), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	eventually(t, "b streaming", func() bool {
		cp, ok, _ := st.LoadCheckpoint(context.Background())
		return ok && cp.Epoch == 2 && cp.Owner == b.ID()
	})
	checkConverged(t, st, "after b processed an event")
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b's Run: %v", err)
	}
	if l, _, _ := st.Current(context.Background()); !l.Expires.IsZero() {
		t.Errorf("lease after b shut down: %+v, want released", l)
	}
	if len(rw.releaseErr) != 1 || rw.releaseErr[0] != nil {
		t.Errorf("b's releases: %v, want one with a live context and time to run", rw.releaseErr)
	}
}

// brokenFeed fails every Open with an error no retry can fix.
type brokenFeed struct{}

var errBrokenFeed = errors.New("not authorized on normal-oj to execute command aggregate")

func (brokenFeed) Open(context.Context, watch.Position) (watch.Stream, error) {
	return nil, errBrokenFeed
}

// TestLeaderRunLosesAndCampaigns: Run renews every TTL/3; when another
// instance takes the lease, Run ends the term and stands by instead of
// returning, then wins the lease back (a new epoch) once it is free; an
// engine error no retry can fix ends Run with that error.
func TestLeaderRunLosesAndCampaigns(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := newLeader(st, g, "a", clk)
	a.NewEngine = func(epoch int64) *watch.Engine {
		return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Now: clk.Now,
			Config: watch.Config{Epoch: epoch, Owner: "a", IdlePause: time.Millisecond}}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	eventually(t, "a holding the lease", func() bool { l, _, _ := st.Current(ctx); return l.Owner == a.ID() && l.Epoch == 1 })
	if err := renewsEvery(g, 12, ldTTL/3); err != nil {
		t.Error(err)
	}
	g.hold(func() {
		withServerTime(st, clk.Now().Add(10*ldTTL), func() { // a's lease has expired by then
			if _, ok, err := st.Acquire(ctx, "b", ldTTL); err != nil || !ok {
				t.Errorf("b's takeover: %v %v", ok, err)
			}
		})
	})
	waitTicks(t, g, 3) // a sees b's lease and stands by
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) after losing the lease; it must stand by", err)
	default:
	}
	g.hold(func() { must(st.Release(ctx, "b", 2)) })
	eventually(t, "a winning the lease back", func() bool { l, _, _ := st.Current(ctx); return l.Owner == a.ID() && l.Epoch == 3 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after shutdown: %v", err)
	}

	c := newLeader(st, g, "c", clk)
	c.NewEngine = func(epoch int64) *watch.Engine {
		return &watch.Engine{Store: st, Feed: brokenFeed{}, Checkpoints: st, Log: zerolog.Nop(), Now: clk.Now,
			Config: watch.Config{Epoch: epoch, Owner: "c"}}
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	select {
	case err := <-errc:
		if !errors.Is(err, errBrokenFeed) {
			t.Errorf("Run with a broken feed: %v, want its error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return the engine's error")
	}
}
