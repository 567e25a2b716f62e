package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/memstore"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

func cmdRebuild(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "rebuild", "[--dry-run] [--max-diffs N] [--dump DIR --out OUT]", `Recompute every user's counts and every studentStatus entry from the source
documents, write the values that differ, record each submission's (user,
problem) in the key index, and save a checkpoint at the cluster time read
before the scan, so a following 'run' misses nothing. Then exit 0.

Offline: --dump DIR reads a mongodump directory (DIR/<database>/ or DIR
itself) and --out OUT writes a corrected copy in the same layout; only the
derived fields change, every other byte is copied. Reads submissions once,
sorted by the index {user:1, problem:1, timestamp:1, _id:1}.`)
	dryRun := fs.Bool("dry-run", false, "report what would change; write nothing")
	dumpDir := fs.String("dump", "", "mongodump directory to read instead of MongoDB")
	out := fs.String("out", "", "with --dump: directory to write the corrected dump to (must be empty or absent)")
	maxDiffs := fs.Int("max-diffs", 10, "differences to print")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dumpDir == "" && *out != "" {
		return &configError{"--out needs --dump"}
	}
	if *dumpDir != "" && *out == "" && !*dryRun {
		return &configError{"--dump needs --out (or --dry-run)"}
	}
	if *out != "" {
		if err := emptyOrAbsent(*out); err != nil {
			return err
		}
	}
	cfg, err := loadConfig(*dumpDir == "")
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // it writes values there, saving no stream start
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
	opts := watch.RebuildOptions{DryRun: *dryRun, MaxDiffs: *maxDiffs}
	if *dumpDir != "" {
		return rebuildDump(ctx, env, cfg, *dumpDir, *out, opts)
	}
	cfg.readOnly = *dryRun // a dry run writes nothing, indexes included

	sayConnecting(env.stderr, cfg)
	db, err := openMongo(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeMongo(db, log)
	return rebuildOnline(ctx, env, db, db.Standalone(), cfg, log, opts)
}

// rebuildTarget is what an online rebuild needs of the database.
type rebuildTarget interface {
	watch.Store
	watch.Feed
	resume.Store
	resume.LeaseStore
}

// rebuildOnline rebuilds db (dry run: reports only). It writes under the
// lease and saves the checkpoint a following run starts from, then prints
// the start that checkpoint holds (read back while the lease is held, so
// it is what was saved: 30 s before the cluster time read before the scan).
// On a standalone mongod (no oplog) it writes the values and saves no
// checkpoint, and says so.
func rebuildOnline(ctx context.Context, env *environment, db rebuildTarget, standalone bool, cfg *Config, log zerolog.Logger, opts watch.RebuildOptions) error {
	if opts.DryRun {
		rep, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), opts)
		if err != nil {
			return err
		}
		printReport(env.stdout, rep, "would change")
		return nil
	}
	// The rebuild moves the checkpoint, so it runs under the lease (renewed
	// while it runs, writes guarded): it must not race a running sidecar.
	leader := &watch.Leader{Leases: db, Owner: cfg.InstanceID, TTL: cfg.LeaseTTL, Log: log,
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: db, Feed: db, Checkpoints: db, Log: log,
				Config: watch.Config{Epoch: epoch, Owner: cfg.InstanceID}}
		}}
	var (
		rep   *watch.RebuildReport
		saved resume.Checkpoint
	)
	err := leader.Do(ctx, func(ctx context.Context, eng *watch.Engine) error {
		var err error
		if standalone {
			rep, err = watch.Rebuild(ctx, db, materialize.NewDeriver(), watch.RebuildOptions{Guard: eng.WriteGuard})
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
	if errors.Is(err, watch.ErrLeaseHeld) {
		return fmt.Errorf("%w; stop the running instance or wait, then retry", err)
	}
	if err != nil {
		return err
	}
	printReport(env.stdout, rep, "written")
	printRebuildCheckpoint(env.stdout, rep, saved, standalone)
	return nil
}

// printRebuildCheckpoint says where the next run starts: the start the
// saved checkpoint holds, or, on a standalone mongod, that none was saved.
func printRebuildCheckpoint(w io.Writer, rep *watch.RebuildReport, saved resume.Checkpoint, standalone bool) {
	if standalone {
		fmt.Fprintln(w, "checkpoint: none saved: the server is a standalone mongod, which has no oplog and no change stream to resume.")
		fmt.Fprintln(w, "  The values above are written; 'run' needs a replica set (docs/operations.md), and its first start there rebuilds again.")
		return
	}
	if len(saved.Token) > 0 || saved.StartAt.IsZero() {
		// Another writer moved the checkpoint between the save and the read:
		// cannot happen under the lease, but never print a start not saved.
		fmt.Fprintf(w, "checkpoint: saved; now %s\n", describeCheckpoint(saved))
		return
	}
	fmt.Fprintf(w, "checkpoint: the next 'run' streams from cluster time %d.%d (%s), %d s before the rebuild's snapshot at %d.%d, so writes in flight during the scan are seen again\n",
		saved.StartAt.T, saved.StartAt.I, time.Unix(int64(saved.StartAt.T), 0).UTC().Format(time.RFC3339),
		int64(rep.StartAt.T)-int64(saved.StartAt.T), rep.StartAt.T, rep.StartAt.I)
}

// describeCheckpoint is a one-line description of a saved checkpoint.
func describeCheckpoint(cp resume.Checkpoint) string {
	switch {
	case len(cp.Token) > 0:
		return fmt.Sprintf("resume token %s", cp.Token)
	case !cp.StartAt.IsZero():
		return fmt.Sprintf("start at cluster time %d.%d", cp.StartAt.T, cp.StartAt.I)
	}
	return "none"
}

// loadDump reads a mongodump directory into an in-memory store.
func loadDump(dir, database string) (dump.Dir, *memstore.Store, error) {
	d, err := dump.Resolve(dir, database)
	if err != nil {
		return d, nil, &configError{err.Error()}
	}
	st := memstore.New()
	for _, coll := range dump.Sources {
		docs, err := d.Read(coll)
		if err != nil {
			return d, nil, err
		}
		if err := st.Load(coll, docs...); err != nil {
			return d, nil, fmt.Errorf("load dump: %w", err)
		}
	}
	return d, st, nil
}

func rebuildDump(ctx context.Context, env *environment, cfg *Config, dir, out string, opts watch.RebuildOptions) error {
	d, st, err := loadDump(dir, cfg.Database)
	if err != nil {
		return err
	}
	rep, err := watch.Rebuild(ctx, st, materialize.NewDeriver(), opts)
	if err != nil {
		return err
	}
	if opts.DryRun {
		printReport(env.stdout, rep, "would change")
		return nil
	}
	docs := map[string][]bson.Raw{
		materialize.CollUser:     st.Collection(materialize.CollUser),
		materialize.CollHomework: st.Collection(materialize.CollHomework),
	}
	if err := d.Copy(out, docs); err != nil {
		return err
	}
	printReport(env.stdout, rep, "corrected")
	fmt.Fprintf(env.stdout, "wrote %s\n", out)
	return nil
}

func cmdVerify(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "verify", "[--dump DIR] [--max-diffs N]", `Recompute every derived value and compare it with what is stored. Prints the
number of drifted users and entries and the first differences. Writes
nothing. Exit status 1 when anything drifted, 0 when clean.`)
	dumpDir := fs.String("dump", "", "mongodump directory to check instead of MongoDB")
	maxDiffs := fs.Int("max-diffs", 10, "differences to print")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*dumpDir == "")
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // read-only: no change stream needed
	cfg.readOnly = true        // and no index build (a write without a deadline)
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
	opts := watch.RebuildOptions{DryRun: true, MaxDiffs: *maxDiffs}
	var rep *watch.RebuildReport
	if *dumpDir != "" {
		_, st, err := loadDump(*dumpDir, cfg.Database)
		if err != nil {
			return err
		}
		if rep, err = watch.Rebuild(ctx, st, materialize.NewDeriver(), opts); err != nil {
			return err
		}
	} else {
		sayConnecting(env.stderr, cfg)
		db, err := openMongo(ctx, cfg, zerolog.Nop())
		if err != nil {
			return err
		}
		defer closeMongo(db, log)
		if rep, err = watch.Rebuild(ctx, db, materialize.NewDeriver(), opts); err != nil {
			return err
		}
	}
	printReport(env.stdout, rep, "drifted")
	if rep.Drift() > 0 {
		return errDrift
	}
	return nil
}

// printReport prints a rebuild or verify report.
func printReport(w io.Writer, rep *watch.RebuildReport, verb string) {
	fmt.Fprintf(w, "submissions read: %d\n", rep.Submissions)
	fmt.Fprintf(w, "users: %d compared, %d %s\n", rep.Users, rep.DriftedUsers, verb)
	fmt.Fprintf(w, "entries: %d compared, %d %s\n", rep.Entries, rep.DriftedEntries, verb)
	fmt.Fprintf(w, "penalty errors: %d\n", rep.PenaltyErrors)
	fmt.Fprintf(w, "malformed documents skipped: %d\n", len(rep.Malformed))
	for i, m := range rep.Malformed {
		if i == 10 {
			fmt.Fprintf(w, "  ... %d more\n", len(rep.Malformed)-i)
			break
		}
		fmt.Fprintf(w, "  %v\n", m)
	}
	if len(rep.Diffs) > 0 {
		fmt.Fprintf(w, "first differences:\n")
		for _, d := range rep.Diffs {
			fmt.Fprintf(w, "  %s %s %s\n    stored:  %s\n    derived: %s\n", d.Collection, d.ID, d.Path, orNone(d.Stored), d.Derived)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(absent or unreadable)"
	}
	return s
}

func cmdStatus(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "status", "", `Show the saved checkpoint (resume token or start time), the cluster time of
the last processed event, the lag behind the cluster's current time, and the
lease holder and epoch.`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(true)
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // read-only: no change stream needed
	cfg.readOnly = true        // and no index build (a write without a deadline)
	if _, err := newLogger(env, cfg); err != nil {
		return err
	}
	sayConnecting(env.stderr, cfg)
	db, err := openMongo(ctx, cfg, zerolog.Nop())
	if err != nil {
		return err
	}
	defer closeMongo(db, zerolog.Nop())
	cp, ok, err := db.LoadCheckpoint(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	now, err := db.ClusterTime(ctx)
	if err != nil {
		return fmt.Errorf("read cluster time: %w", err)
	}
	if db.Standalone() {
		fmt.Fprintln(env.stdout, "server: a standalone mongod: no oplog, no change stream and no cluster time; 'run' needs a replica set (docs/operations.md)")
	}
	printStatus(env.stdout, cp, ok, now)
	l, ok, err := db.Current(ctx)
	if err != nil {
		return fmt.Errorf("read lease: %w", err)
	}
	if !ok {
		fmt.Fprintln(env.stdout, "lease: none")
	} else {
		state := "held"
		if time.Now().After(l.Expires) {
			state = "expired"
		}
		fmt.Fprintf(env.stdout, "lease: %s by %s, epoch %d, until %s\n", state, l.Owner, l.Epoch, l.Expires.Format(time.RFC3339))
	}
	return nil
}

func printStatus(w io.Writer, cp resume.Checkpoint, ok bool, now bson.Timestamp) {
	if !ok || cp.Empty() {
		fmt.Fprintln(w, "checkpoint: none (the next 'run' rebuilds first)")
		return
	}
	if len(cp.Token) > 0 {
		fmt.Fprintf(w, "checkpoint: resume token %s\n", cp.Token)
	} else {
		fmt.Fprintf(w, "checkpoint: start at cluster time %d.%d (after a rebuild)\n", cp.StartAt.T, cp.StartAt.I)
	}
	fmt.Fprintf(w, "saved: %s by %s (epoch %d)\n", cp.SavedAt.Format(time.RFC3339), orNone(cp.Owner), cp.Epoch)
	if !cp.RebuiltAt.IsZero() {
		fmt.Fprintf(w, "last rebuild: %s\n", cp.RebuiltAt.Format(time.RFC3339))
	}
	if !cp.CaughtUpAt.IsZero() {
		fmt.Fprintf(w, "lag: none at %s (the stream was caught up; the token is its postBatchResumeToken)\n", cp.CaughtUpAt.Format(time.RFC3339))
		if !cp.ClusterTime.IsZero() {
			fmt.Fprintf(w, "last event cluster time: %d.%d\n", cp.ClusterTime.T, cp.ClusterTime.I)
		}
		return
	}
	if !cp.ClusterTime.IsZero() && !now.IsZero() { // now is zero on a standalone mongod
		lag := int64(now.T) - int64(cp.ClusterTime.T)
		fmt.Fprintf(w, "last event cluster time: %d.%d (%s)\n", cp.ClusterTime.T, cp.ClusterTime.I,
			time.Unix(int64(cp.ClusterTime.T), 0).UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "lag: %ds behind cluster time %d.%d\n", max(lag, 0), now.T, now.I)
	}
}

// emptyOrAbsent refuses an output directory that holds anything (a usage
// error: nothing is overwritten).
func emptyOrAbsent(dir string) error {
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) > 0 {
		return &configError{fmt.Sprintf("--out %s is not empty (refusing to overwrite)", dir)}
	}
	return nil
}
