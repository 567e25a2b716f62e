package watch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestCheckWriteTimeout: a write timeout is accepted when positive and
// under half of the lease TTL (the defaults, 5s under 15s, included), and
// the refusal names the bound, not a configuration variable.
func TestCheckWriteTimeout(t *testing.T) {
	for _, c := range []struct {
		ttl, timeout time.Duration
		ok           bool
	}{
		{15 * time.Second, 5 * time.Second, true}, // the daemon's defaults
		{10 * time.Second, 4999 * time.Millisecond, true},
		{time.Second, 499 * time.Millisecond, true},
		{10 * time.Second, 5 * time.Second, false},
		{4 * time.Second, time.Minute, false},
		{10 * time.Second, 0, false},
		{10 * time.Second, -time.Second, false},
	} {
		err := watch.CheckWriteTimeout(c.ttl, c.timeout)
		if (err == nil) != c.ok {
			t.Errorf("CheckWriteTimeout(%s, %s) = %v, want ok %v", c.ttl, c.timeout, err, c.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), (c.ttl/2).String()) || strings.Contains(err.Error(), "MATERIALIZER")) {
			t.Errorf("CheckWriteTimeout(%s, %s) = %q: want the bound %s named, and no variable", c.ttl, c.timeout, err, c.ttl/2)
		}
	}
}
