package watch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/watch"
)

// pendingSource answers PendingSubmissions from a list of answers (the
// last repeats), records each cutoff and signals each call on calls.
type pendingSource struct {
	mu      sync.Mutex
	answers []pendingAnswer
	cutoffs []time.Time
	calls   chan struct{}
}

type pendingAnswer struct {
	subs []watch.PendingSubmission
	err  error
}

func newPendingSource(answers ...pendingAnswer) *pendingSource {
	return &pendingSource{answers: answers, calls: make(chan struct{}, 100)}
}

func (s *pendingSource) PendingSubmissions(_ context.Context, cutoff time.Time) ([]watch.PendingSubmission, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.answers[min(len(s.cutoffs), len(s.answers)-1)]
	s.cutoffs = append(s.cutoffs, cutoff)
	s.calls <- struct{}{}
	return a.subs, a.err
}

func (s *pendingSource) called() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cutoffs)
}

// waitCalls waits for n more calls of the source.
func (s *pendingSource) waitCalls(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-s.calls:
		case <-time.After(10 * time.Second):
			t.Fatal("the pending check did not query its source")
		}
	}
}

// TestPendingCheck: each check sets materializer_pending_submissions to
// the number of submissions pending since before now - Age (the cutoff
// it asks for) and materializer_pending_oldest_seconds to the first's
// age; a failed check is decided by the fault policy in phase
// pending_check (counted), keeps the gauges and checks again; a decision
// to exit ends Run with the Fault.
func TestPendingCheck(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	two := []watch.PendingSubmission{
		{ID: "65e100000000000000000001", User: "alice", Problem: 7, LastSend: now.Add(-2 * time.Hour)},
		{ID: "65e100000000000000000002", User: "bob", Problem: 8, LastSend: now.Add(-45 * time.Minute)},
	}
	errX := errors.New("x")
	tests := []struct {
		name       string
		answers    []pendingAnswer
		count, age float64 // gauges after the last answer
		decided    [3]string
		exits      bool
	}{
		{name: "none", answers: []pendingAnswer{{}}},
		{name: "two, oldest first", answers: []pendingAnswer{{subs: two}}, count: 2, age: 7200},
		{name: "transient error keeps the gauges", answers: []pendingAnswer{{subs: two}, {err: watch.WithClass(watch.Transient, errX)}},
			count: 2, age: 7200, decided: [3]string{"transient", "pending_check", "retry"}},
		{name: "unauthorized is skipped, not an exit", answers: []pendingAnswer{{err: watch.WithClass(watch.Unauthorized, errX)}},
			decided: [3]string{"unauthorized", "pending_check", "skip"}},
		{name: "an unknown class exits", answers: []pendingAnswer{{err: watch.WithClass(watch.Class(200), errX)}}, exits: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newPendingSource(tc.answers...)
			m := watch.NewMetrics(nil)
			p := &watch.PendingCheck{Source: src, Age: 30 * time.Minute, Every: time.Millisecond, Metrics: m, Log: zerolog.Nop(),
				Now: func() time.Time { return now }}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			if tc.exits {
				select {
				case err := <-done:
					var f *watch.Fault
					if !errors.As(err, &f) || f.Phase != watch.PhasePendingCheck || f.Action != watch.ActExit {
						t.Fatalf("Run = %v, want an exit Fault of phase pending_check", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Run did not return on an exit decision")
				}
				return
			}
			src.waitCalls(t, len(tc.answers)+1) // every answer, and one more: Run goes on after a failure
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
			if got := testutil.ToFloat64(m.PendingSubmissions); got != tc.count {
				t.Errorf("pending_submissions = %v, want %v", got, tc.count)
			}
			if got := testutil.ToFloat64(m.PendingOldestSeconds); got != tc.age {
				t.Errorf("pending_oldest_seconds = %v, want %v", got, tc.age)
			}
			if want := now.Add(-30 * time.Minute); !src.cutoffs[0].Equal(want) {
				t.Errorf("cutoff %s, want now - Age = %s", src.cutoffs[0], want)
			}
			if tc.decided[0] != "" {
				if got := testutil.ToFloat64(m.Decisions.WithLabelValues(tc.decided[:]...)); got < 1 {
					t.Errorf("fault_decisions_total%v = %v, want at least 1", tc.decided, got)
				}
			}
		})
	}
}

// TestLeaderRunsPendingCheckOnlyWhileHolding: with two instances, only
// the lease holder queries for pending submissions (one query a minute in
// all, one alert); when its term ends its gauges drop to 0 and the
// instance that takes over reports instead.
func TestLeaderRunsPendingCheckOnlyWhileHolding(t *testing.T) {
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	old := []watch.PendingSubmission{{ID: "65e100000000000000000001", User: "alice", Problem: 7, LastSend: clk.Now().Add(-time.Hour)}}
	leader := func(owner string) (*watch.Leader, *pendingSource) {
		l := newLeader(st, g, owner, clk)
		l.Metrics = watch.NewMetrics(nil)
		l.NewEngine = func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Now: clk.Now,
				Config: watch.Config{Epoch: epoch, Owner: owner, IdlePause: time.Millisecond}}
		}
		src := newPendingSource(pendingAnswer{subs: old})
		l.Pending = &watch.PendingCheck{Source: src, Age: 30 * time.Minute, Every: time.Millisecond, Metrics: l.Metrics, Log: zerolog.Nop(), Now: clk.Now}
		return l, src
	}
	run := func(l *watch.Leader) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		return cancel, done
	}
	a, srcA := leader("a")
	stopA, doneA := run(a)
	srcA.waitCalls(t, 1)
	b, srcB := leader("b")
	stopB, doneB := run(b)
	defer stopB()
	waitTicks(t, g, 6) // b campaigns and stands by, a renews
	srcA.waitCalls(t, 3)
	if n := srcB.called(); n != 0 {
		t.Fatalf("the standby queried %d times while a held the lease", n)
	}
	if got := testutil.ToFloat64(a.Metrics.PendingSubmissions); got != 1 {
		t.Errorf("holder's pending_submissions = %v, want 1", got)
	}
	if got := testutil.ToFloat64(b.Metrics.PendingSubmissions); got != 0 {
		t.Errorf("standby's pending_submissions = %v, want 0", got)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	if got := testutil.ToFloat64(a.Metrics.PendingSubmissions); got != 0 {
		t.Errorf("pending_submissions after a's term ended = %v, want 0", got)
	}
	if got := testutil.ToFloat64(a.Metrics.PendingOldestSeconds); got != 0 {
		t.Errorf("pending_oldest_seconds after a's term ended = %v, want 0", got)
	}
	srcB.waitCalls(t, 1)
	eventually(t, "b reporting", func() bool { return testutil.ToFloat64(b.Metrics.PendingSubmissions) == 1 })
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b's Run: %v", err)
	}
}

// TestLeaderRunEndsOnPendingCheckExit: a check whose error the policy
// decides to exit on ends the term and Run with it (the engine stopped,
// the lease released).
func TestLeaderRunEndsOnPendingCheckExit(t *testing.T) {
	st := memstore.New()
	g := &gatedLeases{LeaseStore: st}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := newLeader(st, g, "a", clk)
	l.Metrics = watch.NewMetrics(nil)
	l.NewEngine = func(epoch int64) *watch.Engine {
		return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Now: clk.Now,
			Config: watch.Config{Epoch: epoch, Owner: "a", IdlePause: time.Millisecond}}
	}
	errX := errors.New("no class the policy knows")
	l.Pending = &watch.PendingCheck{Source: newPendingSource(pendingAnswer{err: watch.WithClass(watch.Class(200), errX)}),
		Age: time.Hour, Metrics: l.Metrics, Log: zerolog.Nop()}
	done := make(chan error, 1)
	go func() { done <- l.Run(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, errX) {
			t.Fatalf("Run = %v, want the check's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end on the check's exit")
	}
	if cur, _, _ := st.Current(context.Background()); !cur.Expires.IsZero() {
		t.Errorf("lease after the exit: %+v, want released", cur)
	}
}
