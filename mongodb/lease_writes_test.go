package mongodb

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestLeaseEpochStoredAsLong: the lease's epoch (the fencing token every
// checkpoint save is filtered on) is stored as a 64-bit integer by the
// first acquisition, by a takeover and by a renewal, as resume.Lease
// declares it: an epoch that is an int32 after one write and a long after
// the next would change type under the filters that compare it.
func TestLeaseEpochStoredAsLong(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := 10 * time.Second
	var s leaseSim
	epochType := func(step string) {
		t.Helper()
		v := rawOf(s.c.docs[0]).Lookup(fieldLease, "epoch")
		if v.Type != bson.TypeInt64 {
			t.Errorf("%s: lease.epoch is BSON %s (%v), want a long", step, v.Type, v)
		}
	}
	s.c.now = t0
	if _, ok := s.acquire("A", ttl); !ok {
		t.Fatal("A does not acquire the first lease")
	}
	epochType("first acquisition")
	s.c.now = t0.Add(ttl / 2)
	if _, ok := s.renew("A", 1, ttl); !ok {
		t.Fatal("A does not renew")
	}
	epochType("renewal")
	s.c.now = t0.Add(2 * ttl)
	if l, ok := s.acquire("B", ttl); !ok || l.Epoch != 2 {
		t.Fatalf("B's takeover: %+v ok=%v, want epoch 2", l, ok)
	}
	epochType("takeover")
}

// TestReleaseMatchesEpoch: Release expires the lease only while the
// releasing owner holds it at the epoch released. A process keeps its
// owner id across its terms, so a late Release of its previous term
// (epoch 1) arriving after it acquired again (epoch 2) must leave the new
// term's lease alone: expiring it would let a standby take over while
// this process still writes under epoch 2.
func TestReleaseMatchesEpoch(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ttl := 10 * time.Second
	var s leaseSim
	release := func(owner string, epoch int64) {
		f, u := releaseWrite(owner, epoch)
		s.c.updateOne(f, u, false)
	}
	s.c.now = t0
	if l, ok := s.acquire("A#1", ttl); !ok || l.Epoch != 1 {
		t.Fatalf("first acquire: %+v ok=%v", l, ok)
	}
	s.c.now = t0.Add(ttl + time.Second) // the term lapsed unrenewed
	if l, ok := s.acquire("A#1", ttl); !ok || l.Epoch != 2 {
		t.Fatalf("A acquires again: %+v ok=%v, want epoch 2", l, ok)
	}
	release("A#1", 1) // the previous term's Release, late
	if l, ok := s.acquire("B#1", ttl); ok {
		t.Fatalf("B took over after a late Release of epoch 1: %+v; A's epoch 2 was expired", l)
	}
	if l := s.current(); l.Owner != "A#1" || l.Epoch != 2 || !l.Expires.Equal(s.c.now.Add(ttl)) {
		t.Errorf("lease after a late Release: %+v, want A#1 at epoch 2 until %v", l, s.c.now.Add(ttl))
	}
	release("B#1", 2) // another owner's Release: nothing
	if _, ok := s.acquire("B#1", ttl); ok {
		t.Fatal("B took over after releasing a lease it never held")
	}
	release("A#1", 2)
	if l, ok := s.acquire("B#1", ttl); !ok || l.Epoch != 3 {
		t.Errorf("B after A released epoch 2: %+v ok=%v, want epoch 3", l, ok)
	}
}
