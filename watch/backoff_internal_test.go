package watch

import (
	"testing"
	"time"
)

// TestBackoff: retry n waits a duration in [d/2, d] with d = min·2^(n-1)
// capped at max, for durations down to a nanosecond.
func TestBackoff(t *testing.T) {
	for _, c := range []struct{ minD, maxD time.Duration }{
		{100 * time.Millisecond, 30 * time.Second},
		{time.Millisecond, 4 * time.Millisecond},
		{3 * time.Millisecond, 10 * time.Millisecond}, // a cap that is no power-of-two multiple
		{time.Nanosecond, time.Nanosecond},
		{time.Nanosecond, 8 * time.Nanosecond},
	} {
		for n := 1; n <= 12; n++ {
			d := c.minD
			for i := 1; i < n; i++ {
				d *= 2
			}
			d = min(d, c.maxD)
			lo, hi := d, time.Duration(0)
			for i := 0; i < 2000; i++ {
				got := backoff(c.minD, c.maxD, n)
				if got < d/2 || got > d {
					t.Fatalf("backoff(%s, %s, %d) = %s, want in [%s, %s]", c.minD, c.maxD, n, got, d/2, d)
				}
				lo, hi = min(lo, got), max(hi, got)
			}
			// The jitter covers its range: both ends are reached for the
			// small durations, and the spread is wide for the large ones.
			if top := d/2 + d/2; d <= 8 && (lo != d/2 || hi != top) { // d/2 + [0, d/2]
				t.Errorf("backoff(%s, %s, %d) ranged over [%s, %s], want [%s, %s]", c.minD, c.maxD, n, lo, hi, d/2, top)
			}
			if d > 8 && hi-lo < d/4 {
				t.Errorf("backoff(%s, %s, %d) ranged over [%s, %s], want a spread over [%s, %s]", c.minD, c.maxD, n, lo, hi, d/2, d)
			}
		}
	}
}
