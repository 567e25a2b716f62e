package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// takes over after expiry does not race a live leader. The write guard
// starts no write TTL − Margin after the last renewal was sent and cuts
// every write off at TTL − Margin/2, whatever the store's own write
// timeout; that timeout also bounds each lease round trip, and
// CheckWriteTimeout states the rule it must meet.
// Checkpoints carry the lease epoch as a fencing token, so a deposed
// leader's late save is rejected (resume.ErrFenced).
type Leader struct {
	Leases resume.LeaseStore
	// Owner is the configured instance id. The lease is held under
	// resume.UniqueOwner(Owner), drawn once per Leader, so two processes
	// configured with the same id still have distinct identities.
	Owner  string
	TTL    time.Duration
	Margin time.Duration // safety margin before expiry (TTL/3 when zero)
	// NewEngine returns the engine to run for one term; epoch is the
	// lease epoch its checkpoints must carry.
	NewEngine func(epoch int64) *Engine
	// Pending, when set, runs beside each term's engine (Run only): the
	// lease holder alone reports pending submissions.
	Pending *PendingCheck
	Metrics *Metrics
	Log     zerolog.Logger
	// Now is the local clock, used only to measure time elapsed since a
	// renewal was sent (the write guard); expiry itself is the store's.
	Now func() time.Time

	id   string    // lease owner id of this process (see Owner)
	once sync.Once // defaults, once: ID may be called while Run runs
}

// ID returns the lease owner id of this process: Owner, "#", and a random
// suffix drawn the first time it is needed.
func (l *Leader) ID() string {
	l.defaults()
	return l.id
}

// Run campaigns for the lease and runs an engine for each term until ctx
// is cancelled (nil) or the fault policy decides an exit: an engine's
// error, or a lease round trip no retry can fix (Unauthorized,
// NotPrimary...). A lease error it retries is retried at the next
// campaign, TTL/3 later.
func (l *Leader) Run(ctx context.Context) error {
	l.defaults()
	every := renewEvery(l.TTL)
	for ctx.Err() == nil {
		sent := l.Now()
		lease, ok, err := l.Leases.Acquire(ctx, l.id, l.TTL)
		l.setUp(ctx, err)
		switch {
		case err != nil:
			f := l.fault(ctx, fmt.Errorf("acquire lease: %w", err))
			switch f.Action {
			case ActStop:
				return nil
			case ActExit:
				return f
			}
			l.Log.Warn().Err(f).Msg("lease: acquire failed; campaigning again")
		case !ok:
			l.Log.Debug().Str("holder", lease.Owner).Int64("epoch", lease.Epoch).Msg("lease held by another instance; standing by")
		default:
			job := func(ctx context.Context, e *Engine) error { return e.Run(ctx) }
			if l.Pending != nil {
				job = withPending(l.Pending, job)
			}
			lost, err := l.term(ctx, lease, sent, every, job)
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
	sent := l.Now()
	lease, ok, err := l.Leases.Acquire(ctx, l.id, l.TTL)
	l.setUp(ctx, err)
	if err != nil {
		return fmt.Errorf("acquire lease: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s holds epoch %d until %s", ErrLeaseHeld, lease.Owner, lease.Epoch, lease.Expires.Format(time.RFC3339))
	}
	lost, err := l.term(ctx, lease, sent, renewEvery(l.TTL), job) // releases the lease
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

// fault decides an error of a lease round trip (PhaseLease).
func (l *Leader) fault(ctx context.Context, err error) *Fault {
	return decider{decided: l.Metrics.countDecision}.fault(ctx, PhaseLease, err)
}

// renewEvery is how often a Leader renews its lease of duration ttl.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

// defaultMargin is Leader.Margin when unset.
func defaultMargin(ttl time.Duration) time.Duration { return ttl / 3 }

// CheckWriteTimeout is the one rule a store's write timeout must meet
// for a Leader of lease duration ttl (with the default Margin, ttl/3):
// positive and under ttl/2. The timeout bounds each lease round trip, and
// a renewal is sent ttl/3 after the last one; under ttl/2 it has returned
// (renewed, refused or timed out) before ttl − Margin/2 after the last
// renewal, the deadline the write guard gives every write, Margin/2
// before the lease can expire: the leader learns that a renewal failed
// while its lease still holds. Safety does not rest on the rule: the
// guard's deadline bounds every write whatever the timeout.
func CheckWriteTimeout(ttl, timeout time.Duration) error {
	// ttl − renewEvery − defaultMargin/2 = ttl − ttl/3 − ttl/6, computed
	// without the rounding of the thirds.
	limit := ttl / 2
	if timeout <= 0 || timeout >= limit {
		return fmt.Errorf("the write timeout (%s) must be positive and under half of the lease TTL (%s, so under %s): a lease renewal, sent a third of the TTL after the last and bounded by the write timeout, must return before the write guard cuts writes off", timeout, ttl, limit)
	}
	return nil
}

func (l *Leader) defaults() { l.once.Do(l.setDefaults) }

func (l *Leader) setDefaults() {
	if l.Now == nil {
		l.Now = time.Now
	}
	if l.Margin <= 0 {
		l.Margin = defaultMargin(l.TTL)
	}
	if l.Metrics == nil {
		l.Metrics = NewMetrics(nil)
	}
	if l.id == "" {
		l.id = resume.UniqueOwner(l.Owner)
	}
}

// term runs job on a new engine while the lease is held, renewing it.
// lost reports that the term ended because the lease was (or could be)
// lost rather than because job finished or ctx ended.
//
// Every way out of a term releases the lease (Release matches only this
// owner at this epoch, so releasing a lease already taken over changes
// nothing): a shutdown, a job that finished, a job that failed with a
// fatal error (the process then exits non-zero, and a standby takes over
// at once instead of after the TTL), and a lease about to expire
// unrenewed (the engine has stopped writing, so nothing is gained by
// holding it).
//
// acquired is the local time the acquisition was sent: the store set the
// expiry at its own later now, so the guard's windows, measured from
// acquired and then from each renewal's send time, end before it.
func (l *Leader) term(ctx context.Context, lease resume.Lease, acquired time.Time, every time.Duration, job func(context.Context, *Engine) error) (lost bool, err error) {
	l.Log.Info().Int64("epoch", lease.Epoch).Str("owner", l.id).Msg("lease acquired; streaming")
	l.Metrics.LeaseHeld.Set(1)
	l.Metrics.LeaseEpoch.Set(float64(lease.Epoch))
	defer l.Metrics.LeaseHeld.Set(0)
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer rcancel()
		if rerr := l.Leases.Release(rctx, l.id, lease.Epoch); rerr != nil {
			l.Log.Warn().Err(rerr).Int64("epoch", lease.Epoch).Msg("lease: release failed; a standby takes over when it expires")
		}
	}()

	engCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	// A time.Time, not UnixNano: it keeps the monotonic reading, so a step
	// of the wall clock does not stretch the window.
	var renewedAt atomic.Pointer[time.Time]
	renewedAt.Store(&acquired)
	eng := l.NewEngine(lease.Epoch)
	eng.Config.Owner = l.id // checkpoints name the process that saved them
	// No write may start once the lease could expire unrenewed, and none
	// may run past the point it could.
	eng.WriteGuard = func(context.Context) (time.Time, error) {
		renewed := *renewedAt.Load()
		if l.Now().Sub(renewed) >= l.TTL-l.Margin {
			return time.Time{}, ErrLeaseExpiring
		}
		// Cut any write off before the lease can expire.
		return renewed.Add(l.TTL - l.Margin/2), nil
	}
	go func() { done <- job(engCtx, eng) }()

	renewed := acquired
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil || ctx.Err() != nil {
				return false, nil // finished, or shutting down (the lease is released on the way out)
			}
			// The engine returns its errors decided (a *Fault); a job's
			// other error is classified here, the same way.
			var f *Fault
			if !errors.As(err, &f) {
				c := Classify(ctx, err)
				f = &Fault{Phase: PhaseLease, Class: c, Action: Decide(c, PhaseLease), Err: err}
			}
			if f.Action == ActStandBy {
				l.Log.Warn().Err(err).Int64("epoch", lease.Epoch).Msg("lease lost; standing by")
				return true, nil
			}
			return false, fmt.Errorf("lease epoch %d: %w", lease.Epoch, err)
		case <-tick.C:
			// start is taken before the request: the store sets the new
			// expiry at its own now, which is later, so measuring from
			// start on the local (monotonic) clock errs on the safe side.
			start := l.Now()
			cur, ok, err := l.Leases.Renew(ctx, l.id, lease.Epoch, l.TTL)
			l.setUp(ctx, err)
			switch {
			case err == nil && ok:
				renewed = start
				renewedAt.Store(&start)
			case err == nil:
				l.Log.Warn().Str("holder", cur.Owner).Int64("epoch", cur.Epoch).Msg("lease lost; stopping the engine")
				cancel()
				<-done
				return true, nil
			default:
				f := l.fault(ctx, fmt.Errorf("renew lease: %w", err))
				switch f.Action {
				case ActStop:
					cancel()
					<-done
					return false, nil
				case ActExit:
					cancel()
					<-done
					return false, fmt.Errorf("lease epoch %d: %w", lease.Epoch, f)
				}
				l.Log.Warn().Err(f).Msg("lease: renewal failed; retrying at the next renewal")
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
