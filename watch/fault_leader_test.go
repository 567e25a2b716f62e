package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// deniedLeases refuses lease round trips with 13 Unauthorized as the
// adapter marks it: every Acquire, or every Renew once a lease is held.
type deniedLeases struct {
	resume.LeaseStore
	acquire, renew bool
}

var errLeaseDenied = watch.WithClass(watch.Unauthorized,
	errors.New(`(Unauthorized) not authorized on normal-oj to execute command { findAndModify: "materializer_checkpoints" }: grant action "update" on normal-oj.materializer_checkpoints`))

func (d deniedLeases) Acquire(ctx context.Context, owner string, ttl time.Duration) (resume.Lease, bool, error) {
	if d.acquire {
		return resume.Lease{}, false, errLeaseDenied
	}
	return d.LeaseStore.Acquire(ctx, owner, ttl)
}

func (d deniedLeases) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	if d.renew {
		return resume.Lease{}, false, errLeaseDenied
	}
	return d.LeaseStore.Renew(ctx, owner, epoch, ttl)
}

// TestLeaderUnauthorizedExits: a lease round trip refused for a missing
// privilege (in the lease phase) was logged and retried every
// TTL/3 forever. Run now returns the error, naming the privilege, and
// releases a lease it holds.
func TestLeaderUnauthorizedExits(t *testing.T) {
	for _, c := range []struct {
		name           string
		acquire, renew bool
	}{{"acquire", true, false}, {"renew", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			st := memstore.New()
			l := &watch.Leader{Leases: deniedLeases{st, c.acquire, c.renew}, Owner: "a", TTL: 30 * time.Millisecond, Log: zerolog.Nop(),
				NewEngine: func(epoch int64) *watch.Engine {
					return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(),
						Config: watch.Config{Epoch: epoch, Owner: "a", IdlePause: time.Millisecond}}
				}}
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			err := l.Run(ctx)
			if ctx.Err() != nil || !errors.Is(err, errLeaseDenied) {
				t.Fatalf("Run = %v (context: %v), want the Unauthorized error before the test's deadline", err, ctx.Err())
			}
			if lease, ok, _ := st.Current(context.Background()); ok && !lease.Expires.IsZero() {
				t.Errorf("lease %+v still held after the exit", lease)
			}
		})
	}
}
