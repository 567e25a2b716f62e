package watch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestLeaderStopsBeforeExpiry: while no renewal succeeds, the term keeps
// its job running until TTL − Margin after the last renewal was sent and
// stops it there, ending the term lost, while the lease still holds by
// the server's clock. The job never writes, so the write guard cannot
// stop it: only the term's own check does. Each wait is for the term to
// act or for two more renewal attempts (a whole tick with the clock
// where the test set it), never for an amount of real time.
func TestLeaderStopsBeforeExpiry(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	g := &gatedLeases{LeaseStore: &refuseRenewals{LeaseStore: st}}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	sent := clk.Now() // the acquisition's send time; every renewal fails
	l := newLeader(st, g, "a", clk)

	stopped := make(chan time.Time, 1)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- l.Do(ctx, func(ctx context.Context, _ *watch.Engine) error {
			close(started)
			<-ctx.Done()
			stopped <- clk.Now()
			return nil
		})
	}()
	<-started
	lease, _, err := st.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// stoppedOrTicked waits until the job stopped or the term made two
	// more renewal attempts; it reports whether the job stopped.
	stoppedOrTicked := func() bool {
		from := g.callsSoFar()
		for {
			select {
			case <-stopped:
				return true
			default:
			}
			if g.callsSoFar() >= from+2 {
				return false
			}
			time.Sleep(time.Millisecond)
		}
	}
	clk.Add(ldTTL - ldMargin - time.Millisecond)
	if stoppedOrTicked() {
		t.Fatalf("the job stopped %s after the last renewal was sent, before TTL − Margin (%s)", clk.Now().Sub(sent), ldTTL-ldMargin)
	}
	clk.Add(time.Millisecond)
	if !stoppedOrTicked() {
		t.Fatalf("the job still runs %s after the last renewal was sent (TTL − Margin), the lease expiring at %s by the server's clock: the term must stop it first",
			clk.Now().Sub(sent), lease.Expires.Sub(sent))
	}
	if now := clk.Now(); !now.Before(lease.Expires) {
		t.Errorf("the job stopped at %s, not before the lease's expiry %s", now.Sub(sent), lease.Expires.Sub(sent))
	}
	if err := <-done; !errors.Is(err, watch.ErrLeaseExpiring) {
		t.Errorf("Do = %v, want ErrLeaseExpiring (the term ended lost)", err)
	}
}

// refuseRenewals is a lease store whose renewals fail (the server is
// unreachable) while the rest passes through.
type refuseRenewals struct{ resume.LeaseStore }

func (r *refuseRenewals) Renew(context.Context, string, int64, time.Duration) (resume.Lease, bool, error) {
	return resume.Lease{}, false, errPartition
}

// lateRelease is a lease store whose Release the server handles late:
// the call times out at the client (an error), and the request is applied
// only when the test delivers it.
type lateRelease struct {
	resume.LeaseStore
	mu      sync.Mutex
	pending []func() error
}

func (r *lateRelease) Release(ctx context.Context, owner string, epoch int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, func() error { return r.LeaseStore.Release(context.Background(), owner, epoch) })
	return context.DeadlineExceeded
}

func (r *lateRelease) deliver(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pending) == 0 {
		t.Fatal("no Release in flight")
	}
	for _, f := range r.pending {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	r.pending = nil
}

// TestLeaderLateReleaseKeepsNextTerm: a process's Release of its first
// term reaches the server only after the same process (the same owner)
// acquired its next term. Release matches the owner at the epoch it
// ended, so the late request changes nothing: the next term's lease
// stays held and a standby is refused. Were the epoch not matched, the
// late Release would expire the live term's lease and the standby would
// take over while that term still passes its write guard: two writers.
func TestLeaderLateReleaseKeepsNextTerm(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a := newLeader(st, g, "a", clk)
	late := &lateRelease{LeaseStore: st}
	a.Leases = late
	if err := a.Do(ctx, idleJob); err != nil {
		t.Fatalf("a's first term: %v", err)
	}
	first, _, err := st.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(ldTTL) // the first term's lease expires unreleased
	var second resume.Lease
	err = a.Do(ctx, func(ctx context.Context, eng *watch.Engine) error {
		second, _, err = st.Current(ctx)
		if err != nil {
			return err
		}
		late.deliver(t) // the first term's Release lands now
		b := newLeader(st, g, "b", clk)
		if err := b.Do(ctx, idleJob); !errors.Is(err, watch.ErrLeaseHeld) {
			t.Errorf("standby b during a's second term, after a's late Release of epoch %d: Do = %v, want ErrLeaseHeld", first.Epoch, err)
		}
		if cur, _, _ := st.Current(ctx); cur != second {
			t.Errorf("lease %+v after a's late Release of epoch %d, want a's second term's %+v", cur, first.Epoch, second)
		}
		if _, err := eng.WriteGuard(ctx); err != nil {
			t.Fatalf("a's second term's guard: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a's second term: %v", err)
	}
	if second.Owner != first.Owner || second.Epoch <= first.Epoch {
		t.Fatalf("a's terms %+v then %+v, want one owner, a later epoch", first, second)
	}
}

// deadlineLog is a store that records the deadline each write carries.
type deadlineLog struct {
	*memstore.Store
	mu        sync.Mutex
	deadlines map[string][]time.Time // by write: Apply, RecordKeys, SaveCheckpoint
}

func (d *deadlineLog) record(write string, ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dl, _ := ctx.Deadline()
	d.deadlines[write] = append(d.deadlines[write], dl)
}

func (d *deadlineLog) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	d.record("Apply", ctx)
	return d.Store.Apply(ctx, w)
}

func (d *deadlineLog) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	d.record("RecordKeys", ctx)
	return d.Store.RecordKeys(ctx, keys)
}

func (d *deadlineLog) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	d.record("SaveCheckpoint", ctx)
	return d.Store.SaveCheckpoint(ctx, cp)
}

// TestLeaderWritesCarryGuardDeadline: every write a term's engine makes
// (the derived values, the key index, the fenced checkpoint) runs under
// the guard's deadline, TTL − Margin/2 after the acquisition was sent,
// whenever the write starts: a deadline computed from the guard's call
// time would let a write that starts late run past that bound, into the
// last Margin/2 before the lease can expire.
func TestLeaderWritesCarryGuardDeadline(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "alice", "submission", int32(4), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	log := &deadlineLog{Store: st, deadlines: map[string][]time.Time{}}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	sent := clk.Now()
	l := newLeader(st, &gatedLeases{LeaseStore: &refuseRenewals{LeaseStore: st}}, "a", clk)
	l.NewEngine = func(epoch int64) *watch.Engine {
		return &watch.Engine{Store: log, Feed: st, Checkpoints: log, Log: l.Log, Now: clk.Now,
			Config: watch.Config{Epoch: epoch}}
	}
	err := l.Do(ctx, func(ctx context.Context, eng *watch.Engine) error {
		clk.Add(ldTTL / 4) // the writes start after the acquisition, before TTL − Margin
		return eng.Drain(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := sent.Add(ldTTL - ldMargin/2)
	for _, w := range []string{"Apply", "SaveCheckpoint"} {
		if len(log.deadlines[w]) == 0 {
			t.Errorf("no %s: the term's engine wrote nothing of that kind", w)
		}
	}
	for w, dls := range log.deadlines {
		for _, dl := range dls {
			if dl.IsZero() {
				t.Errorf("%s without a deadline, want TTL − Margin/2 = %s after the acquisition was sent", w, ldTTL-ldMargin/2)
			} else if !dl.Equal(want) {
				t.Errorf("%s under deadline %s after the acquisition was sent, want TTL − Margin/2 = %s", w, dl.Sub(sent), ldTTL-ldMargin/2)
			}
		}
	}
}
