package watch

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
)

// PendingSubmission is a submission left waiting for its judging result
// (status -1, not handwritten): the Back-End set it pending at LastSend
// and sent it to a sandbox, whose result never landed.
type PendingSubmission struct {
	ID       string // the submission's _id, hex
	User     string
	Problem  int64
	LastSend time.Time // lastSend as stored: the Back-End's datetime.now()
}

// PendingSource finds pending submissions.
type PendingSource interface {
	// PendingSubmissions returns the submissions pending since before
	// cutoff, the oldest first.
	PendingSubmissions(ctx context.Context, cutoff time.Time) ([]PendingSubmission, error)
}

// PendingEvery is how often PendingCheck looks.
const PendingEvery = time.Minute

// PendingCheck reports, while this instance holds the lease, the
// submissions left pending longer than Age: the stock sandbox sends each
// result once, so a result sent while the Back-End was down never lands
// and the submission stays pending until someone rejudges it. It sets
// Metrics.PendingSubmissions and Metrics.PendingOldestSeconds every Every
// (PendingEvery when zero). Only the lease holder checks (Leader runs it
// in each term and zeroes the gauges after), so N instances cost one
// query a minute and one alert.
type PendingCheck struct {
	Source  PendingSource
	Age     time.Duration // positive
	Every   time.Duration
	Metrics *Metrics // required
	Log     zerolog.Logger
	Now     func() time.Time // time.Now when nil
}

// Run checks at once and then every Every until ctx ends (nil). A failed
// check is decided by the fault policy (PhasePendingCheck): a retry or a
// skip waits for the next check, the gauges keeping their values; an
// exit or stand-by is returned.
func (p *PendingCheck) Run(ctx context.Context) error {
	every := p.Every
	if every <= 0 {
		every = PendingEvery
	}
	now := p.Now
	if now == nil {
		now = time.Now
	}
	d := decider{decided: p.Metrics.countDecision}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := p.check(ctx, now()); err != nil {
			f := d.fault(ctx, PhasePendingCheck, err)
			switch f.Action {
			case ActStop:
				return nil
			case ActRetry, ActSkip:
				p.Log.Warn().Err(f).Msg("pending submissions: check failed; checking again in a minute")
			default:
				return f
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check sets the gauges from one query.
func (p *PendingCheck) check(ctx context.Context, now time.Time) error {
	subs, err := p.Source.PendingSubmissions(ctx, now.Add(-p.Age))
	if err != nil {
		return err
	}
	p.Metrics.PendingSubmissions.Set(float64(len(subs)))
	oldest := 0.0
	if len(subs) > 0 {
		oldest = max(now.Sub(subs[0].LastSend).Seconds(), 0)
		p.Log.Warn().Int("count", len(subs)).Str("oldest", subs[0].ID).Dur("older_than", p.Age).
			Msg("submissions pending (status -1) too long: their results never landed; rejudge them")
	}
	p.Metrics.PendingOldestSeconds.Set(oldest)
	return nil
}

// withPending runs job and check together for one lease term: job's
// result is the term's; an error check returns (an exit or stand-by the
// policy decided) ends job too. The gauges are zeroed when the term ends:
// a standby reports nothing.
func withPending(check *PendingCheck, job func(context.Context, *Engine) error) func(context.Context, *Engine) error {
	return func(ctx context.Context, e *Engine) error {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := check.Run(ctx); err != nil {
				cancel(err)
			}
		}()
		err := job(ctx, e)
		cancel(nil)
		<-done
		check.Metrics.PendingSubmissions.Set(0)
		check.Metrics.PendingOldestSeconds.Set(0)
		var f *Fault
		if cause := context.Cause(ctx); cause != nil && errors.As(cause, &f) {
			return f // the check's decision ended the term (job stopped on its cancel)
		}
		return err
	}
}
