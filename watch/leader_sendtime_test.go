package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// slowLeases is a lease store whose round trips take simulated time: half
// of took passes on the shared clock before the server handles a request
// (the server then sets the expiry at its own, later, now) and half after.
// Its first renewal waits for release; every later one blocks until the
// Leader's context ends, so the guard's window stays the one the first
// slow round trip opened. The second renewal is sent once the Leader has
// handled the first's reply: it reports the first's send time then.
type slowLeases struct {
	resume.LeaseStore
	clk                    *fakeClock
	acquireTook, renewTook time.Duration
	release                chan struct{}
	renewed                chan time.Time // the send time of the first renewal, once the Leader handled it
	renewals               int
	firstSent              time.Time
}

func (s *slowLeases) slow(took time.Duration, call func()) time.Time {
	sent := s.clk.Now()
	s.clk.Add(took / 2)
	call()
	s.clk.Add(took - took/2)
	return sent
}

func (s *slowLeases) Acquire(ctx context.Context, owner string, ttl time.Duration) (l resume.Lease, ok bool, err error) {
	s.slow(s.acquireTook, func() { l, ok, err = s.LeaseStore.Acquire(ctx, owner, ttl) })
	return l, ok, err
}

// Renew is called from the Leader's one renewal goroutine only.
func (s *slowLeases) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (l resume.Lease, ok bool, err error) {
	s.renewals++
	if s.renewals > 1 {
		if s.renewals == 2 {
			s.renewed <- s.firstSent
		}
		<-ctx.Done()
		return resume.Lease{}, false, ctx.Err()
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return resume.Lease{}, false, ctx.Err()
	}
	s.firstSent = s.slow(s.renewTook, func() { l, ok, err = s.LeaseStore.Renew(ctx, owner, epoch, ttl) })
	return l, ok, err
}

// TestLeaderGuardWindowFromSendTime: the guard's window after a lease
// round trip that takes time counts from when the request was sent, not
// from when the reply came: the server set the expiry at its own now,
// somewhere between the two, so only the send time is a bound the local
// clock can keep. A slow Acquire or Renew shortens the window; measured
// from the reply it would let a write run past the margin the guard
// promises before the server's expiry.
func TestLeaderGuardWindowFromSendTime(t *testing.T) {
	// 18ms of a 60ms TTL: under CheckWriteTimeout's TTL/2, and more than
	// Margin/2, so a window measured from the reply passes the expiry.
	const took = 18 * time.Millisecond
	for _, c := range []struct {
		name                   string
		acquireTook, renewTook time.Duration
		renew                  bool
	}{
		{name: "slow acquire", acquireTook: took},
		{name: "slow renew", renewTook: took, renew: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := memstore.New()
			clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			sl := &slowLeases{LeaseStore: st, clk: clk, acquireTook: c.acquireTook, renewTook: c.renewTook,
				release: make(chan struct{}), renewed: make(chan time.Time, 1)}
			l := newLeader(st, nil, "a", clk)
			l.Leases = sl
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sent := clk.Now()
			tm, err := startTerm(t, ctx, l)
			if err != nil {
				t.Fatal(err)
			}
			if c.renew {
				clk.Add(10 * time.Millisecond) // the renewal is sent after the acquisition
				close(sl.release)
				select {
				case sent = <-sl.renewed:
				case <-time.After(hang):
					t.Fatal("no renewal")
				}
			}
			lease, _, err := st.Current(ctx)
			if err != nil {
				t.Fatal(err)
			}
			deadline, err := tm.eng.WriteGuard(ctx)
			if err != nil {
				t.Fatalf("guard %s after the round trip was sent: %v", clk.Now().Sub(sent), err)
			}
			// The documented bound: every write cut off Margin/2 before the
			// server's expiry, whatever the round trip took.
			if limit := lease.Expires.Add(-ldMargin / 2); deadline.After(limit) {
				t.Errorf("write deadline only %s before the server's expiry, want at least Margin/2 = %s: the window counts from the reply, not the send",
					lease.Expires.Sub(deadline), ldMargin/2)
			}
			if want := sent.Add(ldTTL - ldMargin/2); !deadline.Equal(want) {
				t.Errorf("write deadline %s after the send, want TTL - Margin/2 = %s", deadline.Sub(sent), ldTTL-ldMargin/2)
			}
			// New writes stop TTL - Margin after the send.
			clk.Add(sent.Add(ldTTL - ldMargin - time.Millisecond).Sub(clk.Now()))
			if _, err := tm.eng.WriteGuard(ctx); err != nil {
				t.Errorf("guard TTL - Margin - 1ms after the send: %v", err)
			}
			clk.Add(time.Millisecond)
			if _, err := tm.eng.WriteGuard(ctx); !errors.Is(err, watch.ErrLeaseExpiring) {
				t.Errorf("guard TTL - Margin after the send: %v, want ErrLeaseExpiring", err)
			}
			cancel()
			if err := <-tm.done; err != nil {
				t.Errorf("Do after the context ended: %v", err)
			}
		})
	}
}
