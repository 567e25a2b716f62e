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
