package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
	"github.com/normal-oj/noj-materializer/resume"
)

// RebuildTarget is what a rebuild of a live database needs of it: the
// source and writes, the change feed the engine reads its start from, the
// checkpoint and the lease.
type RebuildTarget interface {
	Store
	Feed
	resume.Store
	resume.LeaseStore
}

// OnlineRebuildOptions control RebuildOnline.
type OnlineRebuildOptions struct {
	// DryRun reads and reports only (MaxDiffs differences), writing
	// nothing and taking no lease.
	DryRun   bool
	MaxDiffs int
	// Standalone says the server has no oplog (a standalone mongod): the
	// values are written under the lease, and no checkpoint is saved.
	Standalone bool
	// Owner and TTL are the lease's (Leader.Owner, Leader.TTL).
	Owner string
	TTL   time.Duration
	Log   zerolog.Logger
	// Progress receives progress reports every ProgressEvery.
	Progress      progress.Sink
	ProgressEvery time.Duration
	// Now is the local clock the lease's write guard measures time with
	// (Leader.Now; time.Now when nil).
	Now func() time.Time
	// Metrics are the leader's and the engine's (nil: unregistered ones
	// of their own).
	Metrics *Metrics
}

// RebuildOnline rebuilds db once (a dry run: reports only). It writes
// under the lease, renewed while it runs and guarding every write, so it
// cannot race a running engine (ErrLeaseHeld when another instance holds
// the lease), and saves the checkpoint a following Run starts from
// (Engine.RebuildAndCheckpoint: startMargin before the cluster time read
// before the scan). It returns the report and that checkpoint, read back
// while the lease is still held, so it is what was saved; on a standalone
// server no checkpoint is saved and the zero one is returned.
func RebuildOnline(ctx context.Context, db RebuildTarget, opts OnlineRebuildOptions) (*drift.Report, resume.Checkpoint, error) {
	if opts.DryRun {
		rep, err := Rebuild(ctx, db, materialize.NewDeriver(), RebuildOptions{DryRun: true, MaxDiffs: opts.MaxDiffs,
			Progress: progress.New(opts.Progress, nil, opts.ProgressEvery, 0)})
		return rep, resume.Checkpoint{}, err
	}
	leader := &Leader{Leases: db, Owner: opts.Owner, TTL: opts.TTL, Log: opts.Log, Now: opts.Now, Metrics: opts.Metrics,
		NewEngine: func(epoch int64) *Engine {
			return &Engine{Store: db, Feed: db, Checkpoints: db, Log: opts.Log, Progress: opts.Progress, Now: opts.Now, Metrics: opts.Metrics,
				Config: Config{Epoch: epoch, Owner: opts.Owner}}
		}}
	var (
		rep   *drift.Report
		saved resume.Checkpoint
	)
	err := leader.Do(ctx, func(ctx context.Context, eng *Engine) error {
		var err error
		if opts.Standalone {
			rep, err = Rebuild(ctx, db, materialize.NewDeriver(), RebuildOptions{Guard: eng.WriteGuard,
				Progress: progress.New(opts.Progress, nil, opts.ProgressEvery, 0)})
			return err
		}
		if rep, err = eng.RebuildAndCheckpoint(ctx); err != nil {
			return err
		}
		saved, _, err = db.LoadCheckpoint(ctx)
		if err != nil {
			return fmt.Errorf("read back the saved checkpoint: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, resume.Checkpoint{}, err
	}
	return rep, saved, nil
}
