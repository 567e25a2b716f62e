package watch_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// flakyLeases fails every Acquire and Renew while down is set, as a lease
// store whose server cannot be reached does.
type flakyLeases struct {
	*memstore.Store
	down atomic.Bool
}

func (f *flakyLeases) Acquire(ctx context.Context, owner string, ttl time.Duration) (resume.Lease, bool, error) {
	if f.down.Load() {
		return resume.Lease{}, false, errors.New("server selection timeout")
	}
	return f.Store.Acquire(ctx, owner, ttl)
}

func (f *flakyLeases) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	if f.down.Load() {
		return resume.Lease{}, false, errors.New("server selection timeout")
	}
	return f.Store.Renew(ctx, owner, epoch, ttl)
}

// waitGauge polls get until it returns want or a second passed.
func waitGauge(t *testing.T, what string, get func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", what, get(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestLeaderReportsMongoDBUp: the lease round trips drive
// materializer_mongodb_up, on a standby (Run, another owner holds the
// lease) and on the holder (renewals during a term), so /readyz can tell a
// standby from an instance that cannot reach MongoDB.
func TestLeaderReportsMongoDBUp(t *testing.T) {
	const ttl = 60 * time.Millisecond
	tests := []struct {
		name string
		run  func(ctx context.Context, l *watch.Leader) error
	}{
		{"standby", func(ctx context.Context, l *watch.Leader) error {
			// Another instance holds the lease for the whole test.
			if _, ok, err := l.Leases.Acquire(ctx, "other", time.Hour); err != nil || !ok {
				t.Fatalf("other instance: acquire = %v, %v", ok, err)
			}
			return l.Run(ctx)
		}},
		{"holder", func(ctx context.Context, l *watch.Leader) error {
			err := l.Do(ctx, func(ctx context.Context, _ *watch.Engine) error {
				<-ctx.Done()
				return nil
			})
			if errors.Is(err, watch.ErrLeaseExpiring) {
				return nil // renewals failed long enough: the term ended, as it should
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leases := &flakyLeases{Store: memstore.New()}
			m := watch.NewMetrics(nil)
			l := &watch.Leader{Leases: leases, Owner: "me", TTL: ttl, Metrics: m, Log: zerolog.Nop(),
				NewEngine: func(int64) *watch.Engine { return &watch.Engine{} }}
			up := func() float64 { return testutil.ToFloat64(m.MongoDBUp) }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- tc.run(ctx, l) }()

			waitGauge(t, "mongodb_up after a successful round trip", up, 1)
			leases.down.Store(true)
			waitGauge(t, "mongodb_up after a failed round trip", up, 0)
			if tc.name == "standby" {
				leases.down.Store(false)
				waitGauge(t, "mongodb_up once the server is back", up, 1)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("leader: %v", err)
			}
		})
	}
}
