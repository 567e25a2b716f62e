package watch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestCheckpointOnExitUnderTheGuard: the save on the way out of a stream
// whose batch was stopped by the write guard saves at most the batches
// processed whole before it, and only if the guard lets it: refused for
// good (a lease about to expire), nothing is saved after the stream's
// first batch; refused once (the stopped batch's write only), the save
// covers the batch before and not the stopped one.
func TestCheckpointOnExitUnderTheGuard(t *testing.T) {
	for _, c := range []struct {
		name      string
		refusals  int64 // guard calls refused once refusing starts (-1: all)
		wantSaves int
	}{
		{"refused for good", -1, 1},
		{"refused once", 1, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			cps := &lockedCheckpoints{Store: f.st}
			var refusing atomic.Bool
			var refused atomic.Int64
			feed := newIdleFeed(f.st)
			eng := &watch.Engine{Store: f.st, Feed: feed, Checkpoints: cps, Log: zerolog.Nop(), Now: clk.Now,
				Sleep: feed.sleep, Config: watch.Config{IdlePause: time.Millisecond}}
			eng.WriteGuard = func(context.Context) (time.Time, error) {
				if refusing.Load() && (c.refusals < 0 || refused.Load() < c.refusals) {
					refused.Add(1)
					return time.Time{}, watch.ErrLeaseExpiring
				}
				return time.Time{}, nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- eng.Run(ctx) }()
			judged := func(n int64) func() bool { return func() bool { return f.user(t).Submission == n } }

			a := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, a, 0, 100)
			eventually(t, "the first landing written", judged(1))
			eventually(t, "the first batch saved", func() bool { return len(cps.list()) >= 1 })
			b := f.submit(t, f.end.Add(-2*time.Hour))
			f.land(t, b, 1, 40)
			eventually(t, "the second landing written", judged(2)) // within the spacing: not saved
			feed.waitIdle(t, "the second landing's echoes processed")
			if n := len(cps.list()); n != 1 {
				t.Fatalf("%d checkpoints before the refusal, want 1", n)
			}

			refusing.Store(true)
			x := f.submit(t, f.end.Add(-3*time.Hour))
			f.land(t, x, 0, 100)
			var err error
			select {
			case err = <-done:
			case <-time.After(hang):
				t.Fatal("Run did not stop after the write guard refused")
			}
			var fault *watch.Fault
			if !errors.As(err, &fault) || fault.Action != watch.ActStandBy {
				t.Fatalf("Run: %v, want a stand-by fault", err)
			}
			saved := cps.list()
			if len(saved) != c.wantSaves {
				t.Fatalf("%d checkpoints saved, want %d", len(saved), c.wantSaves)
			}
			if f.user(t).Submission != 2 {
				t.Fatalf("the refused batch wrote: user submission count %d, want 2", f.user(t).Submission)
			}
			// The refused batch's events are after the checkpoint: a
			// restart recomputes them.
			cp, _, _ := f.st.LoadCheckpoint(context.Background())
			if n := leftAfter(t, f.st, cp.Token); n == 0 {
				t.Error("no event after the checkpoint writes anything: the checkpoint covers the refused batch")
			}
		})
	}
}
