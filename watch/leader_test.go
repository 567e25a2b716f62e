package watch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// fakeClock is a clock the test moves; safe for the Leader's goroutines.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// gatedLeases wraps the memstore lease: renewals and releases can be
// refused (a network partition), and the test can act on the lease between two of the
// Leader's calls (hold).
type gatedLeases struct {
	resume.LeaseStore
	mu     sync.Mutex
	refuse bool
	calls  int
}

var errPartition = errors.New("lease store unreachable")

func (g *gatedLeases) Acquire(ctx context.Context, owner string, ttl time.Duration) (resume.Lease, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	if g.refuse {
		return resume.Lease{}, false, errPartition
	}
	return g.LeaseStore.Acquire(ctx, owner, ttl)
}

func (g *gatedLeases) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	if g.refuse {
		return resume.Lease{}, false, errPartition
	}
	return g.LeaseStore.Renew(ctx, owner, epoch, ttl)
}

func (g *gatedLeases) Release(ctx context.Context, owner string, epoch int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse {
		return errPartition
	}
	return g.LeaseStore.Release(ctx, owner, epoch)
}

func (g *gatedLeases) setRefuse(v bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuse = v
}

// callsSoFar returns the number of Acquire and Renew calls made so far.
func (g *gatedLeases) callsSoFar() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// hold runs fn with no Acquire or Renew of the Leader in between.
func (g *gatedLeases) hold(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn()
}

// The Leader ticks on real time every TTL/3; its decisions (expiry,
// renewal deadline, write guard) read the fake clock.
const (
	ldTTL    = 60 * time.Millisecond
	ldMargin = 20 * time.Millisecond
)

// eventually polls cond for up to hang of real time (a loaded machine
// can be slow; a passing test returns as soon as cond holds).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hang); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// waitTicks waits until the Leader made n more lease calls (renewals).
func waitTicks(t *testing.T, g *gatedLeases, n int) {
	t.Helper()
	from := g.callsSoFar()
	eventually(t, "lease renewals", func() bool { return g.callsSoFar() >= from+n })
}

type term struct {
	eng  *watch.Engine
	done chan error
}

// startTerm runs l.Do with a job that hands its engine over and blocks
// until its context ends.
func startTerm(t *testing.T, ctx context.Context, l *watch.Leader) (term, error) {
	t.Helper()
	engs := make(chan *watch.Engine, 1)
	done := make(chan error, 1)
	go func() {
		done <- l.Do(ctx, func(ctx context.Context, eng *watch.Engine) error {
			engs <- eng
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case eng := <-engs:
		return term{eng: eng, done: done}, nil
	case err := <-done:
		return term{}, err
	case <-time.After(hang):
		t.Fatal("the job did not start")
	}
	return term{}, nil
}

// withServerTime runs fn with the store's clock (the server's, which
// alone decides lease expiry) at t: a request of another instance that the
// server handles at t.
func withServerTime(st *memstore.Store, t time.Time, fn func()) {
	orig := st.Clock
	st.Clock = func() time.Time { return t }
	defer func() { st.Clock = orig }()
	fn()
}

// newLeader returns a Leader over g whose local clock is clk; clk is the
// store's (the server's) clock too.
func newLeader(st *memstore.Store, g *gatedLeases, owner string, clk *fakeClock) *watch.Leader {
	st.Clock = clk.Now
	return &watch.Leader{Leases: g, Owner: owner, TTL: ldTTL, Margin: ldMargin, Log: zerolog.Nop(), Now: clk.Now,
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(),
				Config: watch.Config{Epoch: epoch, Owner: owner}}
		}}
}

// TestLeaderRenewsAndGuardsWrites: a Leader renews its lease while its
// term runs (the stored expiry follows the clock); its write guard allows
// writes with a deadline before the lease can expire; once no renewal
// succeeded for TTL - Margin the guard refuses every write and the term
// ends with ErrLeaseExpiring, before the lease expires.
func TestLeaderRenewsAndGuardsWrites(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	t0 := clk.Now()
	a := newLeader(st, g, "a", clk)
	tm, err := startTerm(t, ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if tm.eng.Config.Epoch != 1 {
		t.Fatalf("first term epoch %d, want 1", tm.eng.Config.Epoch)
	}
	deadline, err := tm.eng.WriteGuard(ctx)
	if err != nil {
		t.Fatalf("guard right after acquiring: %v", err)
	}
	if !deadline.After(t0) || !deadline.Before(t0.Add(ldTTL)) {
		t.Errorf("write deadline %s, want within the lease (%s, %s)", deadline, t0, t0.Add(ldTTL))
	}

	// Renewal: the stored expiry follows the clock, and the guard's
	// deadline moves with it.
	clk.Add(30 * time.Millisecond)
	t1 := clk.Now()
	eventually(t, "a renewal at the new time", func() bool {
		l, _, _ := st.Current(ctx)
		return l.Owner == a.ID() && l.Epoch == 1 && l.Expires.Equal(t1.Add(ldTTL))
	})
	clk.Add(25 * time.Millisecond) // 55ms after t0: unrenewed it would refuse (>= 40ms)
	deadline, err = tm.eng.WriteGuard(ctx)
	if err != nil {
		t.Fatalf("guard after a renewal: %v", err)
	}
	if !deadline.After(t0.Add(ldTTL)) || !deadline.Before(t1.Add(ldTTL)) {
		t.Errorf("write deadline %s after renewal at %s, want in (%s, %s)", deadline, t1, t0.Add(ldTTL), t1.Add(ldTTL))
	}
	waitTicks(t, g, 1) // renewed at t1+25ms
	renewed := clk.Now()

	// Partition: renewals fail. Just short of TTL - Margin the guard still
	// allows writes; from then on it refuses, and the term ends.
	g.setRefuse(true)
	waitTicks(t, g, 1)
	clk.Add(ldTTL - ldMargin - time.Millisecond)
	if _, err := tm.eng.WriteGuard(ctx); err != nil {
		t.Fatalf("guard %s after the last renewal: %v", ldTTL-ldMargin-time.Millisecond, err)
	}
	clk.Add(time.Millisecond)
	if _, err := tm.eng.WriteGuard(ctx); !errors.Is(err, watch.ErrLeaseExpiring) {
		t.Fatalf("guard at TTL-Margin after the last renewal: %v, want ErrLeaseExpiring", err)
	}
	select {
	case err := <-tm.done:
		if !errors.Is(err, watch.ErrLeaseExpiring) {
			t.Fatalf("term ended with %v, want ErrLeaseExpiring", err)
		}
	case <-time.After(hang):
		t.Fatal("the term did not end after renewals failed for TTL-Margin")
	}
	if l, _, _ := st.Current(ctx); !l.Expires.Equal(renewed.Add(ldTTL)) {
		t.Errorf("lease expires %s, want %s (the last successful renewal + TTL; the partition also blocks the release)", l.Expires, renewed.Add(ldTTL))
	}
	if _, err := tm.eng.WriteGuard(ctx); !errors.Is(err, watch.ErrLeaseExpiring) {
		t.Errorf("guard after the term ended: %v, want ErrLeaseExpiring", err)
	}
	// Its engine's writes are refused too: a drain stops before writing.
	if err := tm.eng.Drain(ctx); !errors.Is(err, watch.ErrLeaseExpiring) {
		t.Errorf("drain of the stopped term's engine: %v, want ErrLeaseExpiring", err)
	}
	if st.Stats().Saves != 0 {
		t.Errorf("%d checkpoints saved by a stopped term", st.Stats().Saves)
	}
}

// TestLeaderTakeoverAndEpochs: a second instance is refused while the
// lease is held and renewed, takes over only after it expired (a new
// epoch), and a deposed instance whose renewal returns a lease of another
// epoch (it lost the lease and won it back meanwhile) ends its term rather
// than writing on with a stale fencing token; every term's epoch is new.
func TestLeaderTakeoverAndEpochs(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := newLeader(st, g, "a", clk)
	b := newLeader(st, g, "b", clk)
	var epochs []int64

	ta, err := startTerm(t, ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	epochs = append(epochs, ta.eng.Config.Epoch)
	// a renews while b campaigns: b is refused, even after more than a TTL
	// of renewed time.
	for i := 0; i < 3; i++ {
		clk.Add(ldTTL / 3)
		waitTicks(t, g, 1)
		if err := b.Do(ctx, func(context.Context, *watch.Engine) error { return nil }); !errors.Is(err, watch.ErrLeaseHeld) {
			t.Fatalf("b campaigning while a holds the lease: %v, want ErrLeaseHeld", err)
		}
	}
	// a is partitioned away: its term stops; b takes over once the lease
	// expired, not before.
	g.setRefuse(true)
	waitTicks(t, g, 1)
	clk.Add(ldTTL - ldMargin)
	select {
	case err := <-ta.done:
		if !errors.Is(err, watch.ErrLeaseExpiring) {
			t.Fatalf("a's term ended with %v, want ErrLeaseExpiring", err)
		}
	case <-time.After(hang):
		t.Fatal("a's term did not stop")
	}
	g.setRefuse(false)
	if err := b.Do(ctx, func(context.Context, *watch.Engine) error { return nil }); !errors.Is(err, watch.ErrLeaseHeld) {
		t.Fatalf("b before a's lease expired: %v, want ErrLeaseHeld", err)
	}
	clk.Add(ldMargin)
	tb, err := startTerm(t, ctx, b)
	if err != nil {
		t.Fatalf("b after a's lease expired: %v", err)
	}
	epochs = append(epochs, tb.eng.Config.Epoch)
	// b's engine saves checkpoints under its epoch; a's stale epoch is fenced.
	if err := tb.eng.Drain(ctx); err != nil {
		t.Fatalf("b's drain: %v", err)
	}
	if err := st.SaveCheckpoint(ctx, resume.Checkpoint{Token: pbrt(clk.Now()), Epoch: ta.eng.Config.Epoch}); !errors.Is(err, resume.ErrFenced) {
		t.Errorf("a checkpoint with a's epoch after the takeover: %v, want ErrFenced", err)
	}
	// a starts a new term; while it runs, its lease is taken by c and
	// released again between two of a's renewals. a's next renewal (owner
	// and epoch) must fail and end the term (its engine carries the old
	// epoch); a's next term has a new epoch.
	// First let b's term end: a lease held by b blocks a.
	g.setRefuse(true)
	waitTicks(t, g, 1)
	clk.Add(ldTTL)
	<-tb.done
	g.setRefuse(false)
	ta2, err := startTerm(t, ctx, a)
	if err != nil {
		t.Fatalf("a's second term: %v", err)
	}
	epochs = append(epochs, ta2.eng.Config.Epoch)
	waitTicks(t, g, 1)
	g.hold(func() {
		// The server handles c's request when a's lease has expired.
		withServerTime(st, clk.Now().Add(10*ldTTL), func() {
			l, ok, err := st.Acquire(ctx, "c", ldTTL)
			if err != nil || !ok {
				t.Errorf("c's takeover: %v %v", ok, err)
			}
			epochs = append(epochs, l.Epoch)
			must(st.Release(ctx, "c", l.Epoch))
		})
	})
	select {
	case err := <-ta2.done:
		if !errors.Is(err, watch.ErrLeaseExpiring) {
			t.Fatalf("a's term after its lease changed epoch: %v, want ErrLeaseExpiring", err)
		}
	case <-time.After(hang):
		t.Fatal("a renewed a lease of another epoch and kept its term (and its stale fencing token)")
	}
	ctx3, stop3 := context.WithCancel(ctx)
	defer stop3()
	ta3, err := startTerm(t, ctx3, a)
	if err != nil {
		t.Fatalf("a's third term: %v", err)
	}
	epochs = append(epochs, ta3.eng.Config.Epoch) // a won it back: a new epoch
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Fatalf("epochs %v: a term's epoch was reused or went back", epochs)
		}
	}
	if _, err := ta2.eng.WriteGuard(ctx); err == nil {
		// The old term's guard may still pass by time, but its checkpoint
		// carries the old epoch and must be fenced.
		if err := ta2.eng.Drain(ctx); !errors.Is(err, resume.ErrFenced) && !errors.Is(err, watch.ErrLeaseExpiring) {
			t.Errorf("drain of a's ended term: %v, want fenced", err)
		}
	}
	t.Logf("epochs of successive terms: %v", epochs)
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
	case <-time.After(hang):
		t.Fatal("Run did not return the engine's error")
	}
}

// flakyLeases fails every Acquire and Renew while down is set, as a lease
// store whose server cannot be reached does.
type flakyLeases struct {
	*memstore.Store
	down atomic.Bool
}

func (f *flakyLeases) Acquire(ctx context.Context, owner string, ttl time.Duration) (resume.Lease, bool, error) {
	if f.down.Load() {
		return resume.Lease{}, false, errors.New("server selection timeout")
	}
	return f.Store.Acquire(ctx, owner, ttl)
}

func (f *flakyLeases) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	if f.down.Load() {
		return resume.Lease{}, false, errors.New("server selection timeout")
	}
	return f.Store.Renew(ctx, owner, epoch, ttl)
}

// waitGauge polls get until it returns want (or hang passed).
func waitGauge(t *testing.T, what string, get func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", what, get(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestLeaderReportsMongoDBUp: the lease round trips drive
// materializer_mongodb_up, on a standby (Run, another owner holds the
// lease) and on the holder (renewals during a term), so /readyz can tell a
// standby from an instance that cannot reach MongoDB.
func TestLeaderReportsMongoDBUp(t *testing.T) {
	const ttl = 60 * time.Millisecond
	tests := []struct {
		name string
		run  func(ctx context.Context, l *watch.Leader) error
	}{
		{"standby", func(ctx context.Context, l *watch.Leader) error {
			// Another instance holds the lease for the whole test.
			if _, ok, err := l.Leases.Acquire(ctx, "other", time.Hour); err != nil || !ok {
				t.Fatalf("other instance: acquire = %v, %v", ok, err)
			}
			return l.Run(ctx)
		}},
		{"holder", func(ctx context.Context, l *watch.Leader) error {
			err := l.Do(ctx, func(ctx context.Context, _ *watch.Engine) error {
				<-ctx.Done()
				return nil
			})
			if errors.Is(err, watch.ErrLeaseExpiring) {
				return nil // renewals failed long enough: the term ended, as it should
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leases := &flakyLeases{Store: memstore.New()}
			m := watch.NewMetrics(nil)
			l := &watch.Leader{Leases: leases, Owner: "me", TTL: ttl, Metrics: m, Log: zerolog.Nop(),
				NewEngine: func(int64) *watch.Engine { return &watch.Engine{} }}
			up := func() float64 { return testutil.ToFloat64(m.MongoDBUp) }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.run(ctx, l) }()

			waitGauge(t, "mongodb_up after a successful round trip", up, 1)
			leases.down.Store(true)
			waitGauge(t, "mongodb_up after a failed round trip", up, 0)
			if tc.name == "standby" {
				leases.down.Store(false)
				waitGauge(t, "mongodb_up once the server is back", up, 1)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("leader: %v", err)
			}
		})
	}
}

// fatalFeed opens no stream: a fatal (unclassified) error.
type fatalFeed struct{}

func (fatalFeed) Open(context.Context, watch.Position) (watch.Stream, error) {
	return nil, errors.New("open change stream: (Unauthorized) not authorized on normal-oj to execute command")
}

// TestLeaderReleasesLeaseOnFatalError:
// an engine that stops with a fatal error (the process then exits 1) gives
// its lease up, so a standby takes over at once, not after the TTL.
func TestLeaderReleasesLeaseOnFatalError(t *testing.T) {
	st := memstore.New()
	l := &watch.Leader{Leases: st, Owner: "a", TTL: time.Hour, Log: zerolog.Nop(),
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: st, Feed: fatalFeed{}, Checkpoints: st, Log: zerolog.Nop(),
				Config: watch.Config{Epoch: epoch, Owner: "a"}}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := l.Run(ctx); err == nil {
		t.Fatal("Run = nil, want the engine's fatal error")
	}
	lease, ok, err := st.Current(ctx)
	if err != nil || !ok {
		t.Fatalf("no lease: %v", err)
	}
	if !lease.Expires.IsZero() {
		t.Errorf("lease still held until %v after a fatal error: a standby waits the whole TTL", lease.Expires)
	}
}
