package watch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestRebuildOnlineStandaloneWritesUnderTheGuard: a standalone online
// rebuild (no checkpoint to save) still writes under the lease's write
// guard. Here the lease is past its margin by the time the rebuild
// writes (the clock moves a TTL on after the acquisition): the guard
// refuses the first write, the rebuild fails with ErrLeaseExpiring and
// nothing is written, where an unguarded rebuild would write under a
// lease another instance may already have taken.
func TestRebuildOnlineStandaloneWritesUnderTheGuard(t *testing.T) {
	st, v := driftedStore(t)
	opts := onlineOpts()
	opts.Standalone = true
	opts.TTL = time.Hour // no renewal tick while the test runs, however slow
	base := time.Now()
	var mu sync.Mutex
	calls := 0
	opts.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return base // the acquisition's send time
		}
		return base.Add(opts.TTL)
	}
	before := len(mtest.DiffStored(v, st.Docs()))
	_, _, err := watch.RebuildOnline(context.Background(), noOplog{st}, opts)
	if !errors.Is(err, watch.ErrLeaseExpiring) {
		t.Fatalf("RebuildOnline: %v, want the write guard's ErrLeaseExpiring", err)
	}
	if after := len(mtest.DiffStored(v, st.Docs())); after != before {
		t.Errorf("%d differences left of %d: the rebuild wrote past the lease's margin", after, before)
	}
}
