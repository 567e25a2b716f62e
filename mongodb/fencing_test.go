package mongodb

import (
	"errors"
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/resume"
)

// TestFencingWrites runs the lease's Release and the fenced checkpoint
// save through the evaluator, from a state where owner "A" held epoch 1,
// let it expire and holds epoch 2 now: only a request naming the live
// lease's owner and epoch changes anything. A Release of A's ended
// term that the server handles late must leave A's live term alone
// (else a standby takes over while that term still writes), and only a
// save at the live epoch lands.
func TestFencingWrites(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl = 10 * time.Second
	live := func(t *testing.T) *leaseSim {
		s := &leaseSim{}
		s.c.now = t0
		if l, ok := s.acquire("A", ttl); !ok || l.Epoch != 1 {
			t.Fatalf("A's first acquire: %+v %v", l, ok)
		}
		s.c.now = t0.Add(ttl)
		if l, ok := s.acquire("A", ttl); !ok || l.Epoch != 2 {
			t.Fatalf("A's second acquire: %+v %v", l, ok)
		}
		s.c.now = t0.Add(ttl + time.Second)
		return s
	}
	// standbyTakes reports whether B can take the lease now.
	standbyTakes := func(s *leaseSim) bool {
		_, ok := s.acquire("B", ttl)
		return ok
	}
	for _, c := range []struct {
		name     string
		owner    string
		epoch    int64
		released bool
	}{
		{"the live term's own", "A", 2, true},
		{"the same owner's ended term, late", "A", 1, false},
		{"another owner at the live epoch", "B", 2, false},
		{"a later epoch", "A", 3, false},
	} {
		t.Run("release/"+c.name, func(t *testing.T) {
			s := live(t)
			s.release(c.owner, c.epoch)
			if got := standbyTakes(s); got != c.released {
				t.Errorf("Release(%s, %d) of A's epoch 2: a standby takes over = %v, want %v", c.owner, c.epoch, got, c.released)
			}
		})
	}
	for _, c := range []struct {
		name  string
		epoch int64
		lands bool
	}{
		{"the live epoch", 2, true},
		{"the ended epoch", 1, false},
		{"a later epoch", 3, false},
		{"no epoch (no lease)", 0, false},
	} {
		t.Run("save/"+c.name, func(t *testing.T) {
			s := live(t)
			cp := resume.Checkpoint{Epoch: c.epoch, Owner: "A", SavedAt: s.c.now}
			err := s.save(cp)
			if c.lands {
				if err != nil {
					t.Fatalf("save at epoch %d under A's epoch 2: %v", c.epoch, err)
				}
				if got := s.checkpoint(); got.Epoch != c.epoch || !got.SavedAt.Equal(cp.SavedAt) {
					t.Errorf("checkpoint %+v, want the save's", got)
				}
				return
			}
			if !errors.Is(err, resume.ErrFenced) {
				t.Errorf("save at epoch %d under A's epoch 2: %v, want ErrFenced", c.epoch, err)
			}
			if got := s.checkpoint(); got.Epoch != 0 || !got.SavedAt.IsZero() {
				t.Errorf("a fenced save changed the checkpoint: %+v", got)
			}
		})
	}
}
