package watch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/resume"
)

// Leader runs an Engine only while this instance holds the lease, so that
// in a rolling deployment one instance streams and the others stand by.
//
// The lease is renewed every TTL/3. The engine is stopped when the lease
// is lost, and also when no renewal succeeded for TTL minus Margin: the
// instance stops writing before its lease can expire, so a standby that
// takes over after expiry does not race a live leader. Writes are bounded
// by the engine's write timeout, which must be shorter than Margin.
// Checkpoints carry the lease epoch as a fencing token, so a deposed
// leader's late save is rejected (resume.ErrFenced).
type Leader struct {
	Leases resume.LeaseStore
	Owner  string
	TTL    time.Duration
	Margin time.Duration // safety margin before expiry (TTL/3 when zero)
	// NewEngine returns the engine to run for one term; epoch is the
	// lease epoch its checkpoints must carry.
	NewEngine func(epoch int64) *Engine
	Metrics   *Metrics
	Log       zerolog.Logger
	Now       func() time.Time
}

// Run campaigns for the lease and runs an engine for each term until ctx
// is cancelled (nil) or an engine fails with a non-retryable error.
func (l *Leader) Run(ctx context.Context) error {
	l.defaults()
	every := l.TTL / 3
	for ctx.Err() == nil {
		lease, ok, err := l.Leases.Acquire(ctx, l.Owner, l.TTL, l.Now())
		l.setUp(ctx, err)
		switch {
		case err != nil:
			l.Log.Warn().Err(err).Msg("lease: acquire failed")
		case !ok:
			l.Log.Debug().Str("holder", lease.Owner).Int64("epoch", lease.Epoch).Msg("lease held by another instance; standing by")
		default:
			lost, err := l.term(ctx, lease, every, func(ctx context.Context, e *Engine) error { return e.Run(ctx) })
			if err != nil {
				return err
			}
			if !lost {
				return nil
			}
			continue
		}
		l.Metrics.LeaseHeld.Set(0)
		sleepCtx(ctx, every)
	}
	return nil
}

// ErrLeaseHeld is returned by Do when another instance holds the lease.
var ErrLeaseHeld = errors.New("lease held by another instance")

// Do runs one job (a rebuild, say) under the lease: it acquires the lease
// once (ErrLeaseHeld, naming the holder, when another instance has it),
// renews it while job runs, guards every write as Run does, and releases
// it afterwards. A lease lost mid-job cancels the job and returns
// ErrLeaseExpiring.
func (l *Leader) Do(ctx context.Context, job func(ctx context.Context, eng *Engine) error) error {
	l.defaults()
	lease, ok, err := l.Leases.Acquire(ctx, l.Owner, l.TTL, l.Now())
	l.setUp(ctx, err)
	if err != nil {
		return fmt.Errorf("acquire lease: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s holds epoch %d until %s", ErrLeaseHeld, lease.Owner, lease.Epoch, lease.Expires.Format(time.RFC3339))
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = l.Leases.Release(rctx, l.Owner, lease.Epoch)
		cancel()
	}()
	lost, err := l.term(ctx, lease, l.TTL/3, job)
	if err == nil && lost && ctx.Err() == nil {
		return ErrLeaseExpiring
	}
	return err
}

// setUp records whether a lease round trip reached MongoDB, for /readyz
// and the materializer_mongodb_up gauge. A round trip cut short by ctx
// (shutting down) says nothing about the server and is not recorded.
func (l *Leader) setUp(ctx context.Context, err error) {
	switch {
	case err == nil:
		l.Metrics.MongoDBUp.Set(1)
	case ctx.Err() == nil:
		l.Metrics.MongoDBUp.Set(0)
	}
}

func (l *Leader) defaults() {
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.Margin <= 0 {
		l.Margin = l.TTL / 3
	}
	if l.Metrics == nil {
		l.Metrics = NewMetrics(nil)
	}
}

// term runs job on a new engine while the lease is held, renewing it.
// lost reports that the term ended because the lease was (or could be)
// lost rather than because job finished or ctx ended.
func (l *Leader) term(ctx context.Context, lease resume.Lease, every time.Duration, job func(context.Context, *Engine) error) (lost bool, err error) {
	l.Log.Info().Int64("epoch", lease.Epoch).Msg("lease acquired; streaming")
	l.Metrics.LeaseHeld.Set(1)
	l.Metrics.LeaseEpoch.Set(float64(lease.Epoch))
	defer l.Metrics.LeaseHeld.Set(0)

	engCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	var renewedNanos atomic.Int64
	renewedNanos.Store(l.Now().UnixNano())
	eng := l.NewEngine(lease.Epoch)
	// No write may start once the lease could expire unrenewed, and none
	// may run past the point it could.
	eng.WriteGuard = func(context.Context) (time.Time, error) {
		renewed := time.Unix(0, renewedNanos.Load())
		if l.Now().Sub(renewed) >= l.TTL-l.Margin {
			return time.Time{}, ErrLeaseExpiring
		}
		// Cut any write off before the lease can expire.
		return renewed.Add(l.TTL - l.Margin/2), nil
	}
	go func() { done <- job(engCtx, eng) }()

	renewed := l.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				// Shutting down: give the lease up so a standby takes
				// over at once instead of after expiry.
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				_ = l.Leases.Release(rctx, l.Owner, lease.Epoch)
				rcancel()
				return false, nil
			}
			if errors.Is(err, resume.ErrFenced) || errors.Is(err, ErrLeaseExpiring) {
				l.Log.Warn().Err(err).Int64("epoch", lease.Epoch).Msg("lease lost; standing by")
				return true, nil
			}
			if err == nil {
				return false, nil
			}
			return false, fmt.Errorf("lease epoch %d: %w", lease.Epoch, err)
		case <-tick.C:
			start := l.Now()
			cur, ok, err := l.Leases.Acquire(ctx, l.Owner, l.TTL, start)
			l.setUp(ctx, err)
			switch {
			case err == nil && ok && cur.Epoch == lease.Epoch:
				renewed = start
				renewedNanos.Store(start.UnixNano())
			case err == nil:
				l.Log.Warn().Str("holder", cur.Owner).Int64("epoch", cur.Epoch).Msg("lease lost; stopping the engine")
				cancel()
				<-done
				return true, nil
			default:
				l.Log.Warn().Err(err).Msg("lease: renewal failed")
			}
			if l.Now().Sub(renewed) >= l.TTL-l.Margin {
				l.Log.Warn().Dur("since_renewal", l.Now().Sub(renewed)).Msg("lease about to expire unrenewed; stopping the engine")
				cancel()
				<-done
				return true, nil
			}
		}
	}
}
