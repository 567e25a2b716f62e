package resume_test

import (
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/resume"
)

// TestLeaseBSON: the lease encodes to the fields the MongoDB adapter's
// conditional updates name (lease.owner, lease.epoch, lease.expires), with
// the types they compare: expires a date, so that $lte against $$NOW
// compares times (BSON orders values of different types by type, never by
// value), and epoch a 64-bit integer, as the $add of the next epoch keeps
// it.
func TestLeaseBSON(t *testing.T) {
	for _, c := range []struct {
		name string
		l    resume.Lease
	}{
		{"held", resume.Lease{Owner: "materializer-0#0123456789abcdef", Epoch: 3, Expires: at(100)}},
		{"released (expires the zero time)", resume.Lease{Owner: "a#fedcba9876543210", Epoch: 1 << 40}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := bson.Marshal(c.l)
			if err != nil {
				t.Fatal(err)
			}
			want := []field{{"owner", bson.TypeString}, {"epoch", bson.TypeInt64}, {"expires", bson.TypeDateTime}}
			if got := fieldsOf(t, b); !slices.Equal(got, want) {
				t.Errorf("stored fields %v, want %v", got, want)
			}
			var back resume.Lease
			if err := bson.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Owner != c.l.Owner || back.Epoch != c.l.Epoch || !back.Expires.Equal(c.l.Expires) {
				t.Errorf("decoded %+v, want %+v", back, c.l)
			}
		})
	}
}

// TestUniqueOwner: every call draws a new identity, the configured id,
// "#" and 16 lowercase hex digits, so two processes sharing one configured
// id never share a lease owner.
func TestUniqueOwner(t *testing.T) {
	for _, instance := range []string{"materializer-0", "", "host#1"} {
		t.Run(instance, func(t *testing.T) {
			seen := map[string]bool{}
			for range 1000 {
				id := resume.UniqueOwner(instance)
				suffix, ok := strings.CutPrefix(id, instance+"#")
				if !ok {
					t.Fatalf("UniqueOwner(%q) = %q, want the id and # first", instance, id)
				}
				if b, err := hex.DecodeString(suffix); err != nil || len(b) != 8 || suffix != strings.ToLower(suffix) {
					t.Fatalf("UniqueOwner(%q) = %q: suffix %q is not 16 lowercase hex digits", instance, id, suffix)
				}
				if seen[id] {
					t.Fatalf("UniqueOwner(%q) drew %q twice in %d calls", instance, id, len(seen)+1)
				}
				seen[id] = true
			}
		})
	}
}
