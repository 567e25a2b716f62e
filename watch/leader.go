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
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.Margin <= 0 {
		l.Margin = l.TTL / 3
	}
	if l.Metrics == nil {
		l.Metrics = NewMetrics(nil)
	}
	every := l.TTL / 3
	for ctx.Err() == nil {
		lease, ok, err := l.Leases.Acquire(ctx, l.Owner, l.TTL, l.Now())
		switch {
		case err != nil:
			l.Log.Warn().Err(err).Msg("lease: acquire failed")
		case !ok:
			l.Log.Debug().Str("holder", lease.Owner).Int64("epoch", lease.Epoch).Msg("lease held by another instance; standing by")
		default:
			if err := l.term(ctx, lease, every); err != nil {
				return err
			}
			continue
		}
		l.Metrics.LeaseHeld.Set(0)
		sleepCtx(ctx, every)
	}
	return nil
}

// term runs the engine while the lease is held.
func (l *Leader) term(ctx context.Context, lease resume.Lease, every time.Duration) error {
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
	// No write may start once the lease could expire unrenewed; writes in
	// flight are bounded by the write timeout, shorter than Margin.
	eng.WriteGuard = func(context.Context) error {
		if l.Now().Sub(time.Unix(0, renewedNanos.Load())) >= l.TTL-l.Margin {
			return ErrLeaseExpiring
		}
		return nil
	}
	go func() { done <- eng.Run(engCtx) }()

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
				return nil
			}
			if errors.Is(err, resume.ErrFenced) || errors.Is(err, ErrLeaseExpiring) {
				l.Log.Warn().Err(err).Int64("epoch", lease.Epoch).Msg("lease lost; standing by")
				return nil
			}
			if err == nil {
				return nil
			}
			return fmt.Errorf("engine (lease epoch %d): %w", lease.Epoch, err)
		case <-tick.C:
			start := l.Now()
			cur, ok, err := l.Leases.Acquire(ctx, l.Owner, l.TTL, start)
			switch {
			case err == nil && ok && cur.Epoch == lease.Epoch:
				renewed = start
				renewedNanos.Store(start.UnixNano())
			case err == nil:
				l.Log.Warn().Str("holder", cur.Owner).Int64("epoch", cur.Epoch).Msg("lease lost; stopping the engine")
				cancel()
				<-done
				return nil
			default:
				l.Log.Warn().Err(err).Msg("lease: renewal failed")
			}
			if l.Now().Sub(renewed) >= l.TTL-l.Margin {
				l.Log.Warn().Dur("since_renewal", l.Now().Sub(renewed)).Msg("lease about to expire unrenewed; stopping the engine")
				cancel()
				<-done
				return nil
			}
		}
	}
}
