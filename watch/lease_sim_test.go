package watch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

const (
	simTTL    = 10 * time.Second
	simMargin = simTTL / 3
)

// instance is one materializer process in the two-instance simulation.
type instance struct {
	name     string
	restarts int
	owner    string
	epoch    int64 // lease epoch this process believes it holds; 0: none
	renewed  time.Time
	eng      *watch.Engine
	draining bool
}

// leaseSim runs two instances over one store with a shared clock.
type leaseSim struct {
	t     *testing.T
	w     *world
	now   time.Time
	inst  [2]*instance
	stall func() bool // decides, at a write, whether the writer stalls now
	crash func() bool // decides, at a store operation, whether to crash
	fired int
}

func (s *leaseSim) ownerOf(in *instance) string {
	return in.name + "-" + strconv.Itoa(in.restarts)
}

// engineFor builds the engine of one lease term. Its write guard is the
// Leader's (no write once TTL-Margin passed since the last renewal); the
// simulation may stall the writer right after the guard passed (a GC pause
// between the check and the write), letting the other instance run and the
// lease expire: the stale write then lands and must be corrected.
func (s *leaseSim) engineFor(in *instance) *watch.Engine {
	eng := &watch.Engine{Store: s.w.st, Feed: s.w.st, Checkpoints: s.w.st, Log: zerolog.Nop(),
		Now:    func() time.Time { return s.now },
		Config: watch.Config{BatchSize: 5, BatchMaxWait: time.Hour, Epoch: in.epoch, Owner: in.owner}}
	eng.WriteGuard = func(context.Context) (time.Time, error) {
		if s.now.Sub(in.renewed) >= simTTL-simMargin {
			return time.Time{}, watch.ErrLeaseExpiring
		}
		if s.stall != nil && s.stall() {
			other := s.inst[0]
			if other == in {
				other = s.inst[1]
			}
			s.now = s.now.Add(simTTL + time.Second) // the pause outlives the lease
			if !other.draining {
				s.act(other)
			}
		}
		return time.Time{}, nil // the simulated clock is not a real deadline
	}
	return eng
}

// act is one scheduling slot of an instance: campaign or renew, then drain.
func (s *leaseSim) act(in *instance) {
	ctx := context.Background()
	st := s.w.st
	if in.epoch == 0 {
		l, ok, err := st.Acquire(ctx, in.owner, simTTL)
		if err != nil || !ok {
			return
		}
		in.epoch, in.renewed = l.Epoch, s.now
		in.eng = s.engineFor(in)
	} else {
		_, ok, err := st.Renew(ctx, in.owner, in.epoch, simTTL)
		if err == nil && ok {
			in.renewed = s.now
		} else if err == nil {
			in.epoch, in.eng = 0, nil // deposed
			return
		}
	}
	if s.crash != nil && s.crash() {
		at := 1 + s.w.r.IntN(10)
		n := 0
		st.Fail = func(string) error {
			n++
			if n == at {
				return memstore.ErrInjected
			}
			return nil
		}
	}
	in.draining = true
	err := in.eng.Drain(ctx)
	in.draining = false
	st.Fail = nil
	switch {
	case err == nil:
	case errors.Is(err, memstore.ErrInjected):
		// The process died: a new one starts with a new owner id and must
		// campaign again.
		s.fired++
		in.restarts++
		in.owner = s.ownerOf(in)
		in.epoch, in.eng = 0, nil
	case errors.Is(err, resume.ErrFenced), errors.Is(err, watch.ErrLeaseExpiring):
		in.epoch, in.eng = 0, nil
	default:
		s.t.Fatalf("drain: %v", err)
	}
}

func leaseRuns() int {
	if v := os.Getenv("MATERIALIZER_LEASE_SIM_RUNS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return 200
}

// TestTwoInstances runs two daemons over the same in-memory store with a
// shared clock: random source operations, GC-like stalls between a write's
// lease check and the write (outliving the lease), crashes and lease
// expiries. Invariants: no checkpoint is ever saved by an instance that
// does not hold the lease at that moment (epoch and owner both match), and
// after the feed drains the stored derived state equals Derive of the final
// source, with a further idle drain writing nothing.
func TestTwoInstances(t *testing.T) {
	t.Parallel() // its own store and clock: runs beside the explorer
	runs := leaseRuns()
	stalls, crashes, takeovers := 0, 0, 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		s := &leaseSim{t: t, w: newWorld(1000 + seed), now: time.Unix(1_800_000_000, 0)}
		s.w.st.Clock = func() time.Time { return s.now } // the server's clock decides expiry
		for i := range s.inst {
			in := &instance{name: string(rune('a' + i))}
			in.owner = s.ownerOf(in)
			s.inst[i] = in
		}
		s.stall = func() bool {
			if s.w.r.IntN(12) == 0 {
				stalls++
				return true
			}
			return false
		}
		s.crash = func() bool { return s.w.r.IntN(6) == 0 }
		for step := 0; step < 40+s.w.r.IntN(40); step++ {
			switch s.w.r.IntN(4) {
			case 0, 1:
				s.w.step()
			case 2:
				s.now = s.now.Add(time.Duration(s.w.r.IntN(5000)) * time.Millisecond)
			case 3:
				s.act(s.inst[s.w.r.IntN(2)])
			}
		}
		crashes += s.fired
		// Quiesce: no more faults; let leases lapse; one instance drains.
		s.stall, s.crash = nil, nil
		s.now = s.now.Add(2 * simTTL)
		for i := 0; i < 3; i++ {
			s.act(s.inst[0])
			s.act(s.inst[1])
		}
		holder := s.inst[0]
		if holder.epoch == 0 {
			holder = s.inst[1]
		}
		if holder.epoch == 0 {
			t.Fatalf("seed %d: nobody holds the lease after quiescing", seed)
		}
		s.act(holder)
		checkConverged(t, s.w.st, fmt.Sprintf("two instances, seed %d", seed))
		before := s.w.st.Stats()
		s.act(holder)
		after := s.w.st.Stats()
		if after.UserWrites != before.UserWrites || after.EntryWrites != before.EntryWrites {
			t.Fatalf("seed %d: idle drain wrote", seed)
		}
		l, _, _ := s.w.st.Current(context.Background())
		takeovers += int(l.Epoch) - 1
		for _, rec := range s.w.st.Saves() {
			if rec.Epoch != rec.LeaseEpoch || rec.Owner != rec.LeaseOwner {
				t.Fatalf("seed %d: checkpoint saved by %s at epoch %d while %s held epoch %d",
					seed, rec.Owner, rec.Epoch, rec.LeaseOwner, rec.LeaseEpoch)
			}
		}
	}
	t.Logf("%d schedules: %d stalls past the lease, %d crashes, %d lease takeovers", runs, stalls, crashes, takeovers)
	fmt.Printf("two-instance simulation: %d schedules, %d stalls, %d crashes, %d takeovers, all converged\n", runs, stalls, crashes, takeovers)
}
