package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/offline"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

func cmdRebuild(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "rebuild", "[--dry-run] [--max-diffs N] [--quiet] [--dump DIR --out OUT]", `Recompute every user's counts and every studentStatus entry from the source
documents, write the values that differ, record each submission's (user,
problem) in the key index, and save a checkpoint at the cluster time read
before the scan, so a following 'run' misses nothing. Exit 1 when the
server refused some writes for good (naming them), else 0.

Offline: --dump DIR reads a mongodump directory (DIR/<database>/ or DIR
itself; all four collections must be there) and --out OUT writes a
corrected copy in the same layout; only the derived fields change, every
other byte is copied. OUT must be absent or empty and outside DIR (a volume
or mount point will do): the copy is written on OUT's filesystem in a
hidden partial directory and moved into place at the end; an existing OUT
keeps its owner and mode. A corrected homework over MongoDB's 16 MiB limit
fails the command (exit 1).
--dump FILE (- for standard input) reads a mongodump --archive, gzipped or
not (unpacked into $TMPDIR first); --out OUT then writes the corrected
archive to the file OUT (absent), every other namespace and all metadata
unchanged, gzipped as OUT's name says (.gz: gzip, .archive: not; another
name: as the input). A failed rebuild prints no report on stdout.
Progress goes to stderr every few seconds on long work (--quiet: none).
SIGINT or SIGTERM stops it in any phase, removes the partial output and
exits 130 or 143 (a second signal exits at once).`)
	dryRun := fs.Bool("dry-run", false, "report what would change; write nothing")
	dumpDir := fs.String("dump", "", "mongodump directory or archive file (- for standard input) to read instead of MongoDB")
	out := fs.String("out", "", "with --dump: directory to write the corrected dump to (must be empty or absent, outside --dump); a file for an archive")
	maxDiffs := fs.Int("max-diffs", 10, "differences to print")
	quiet := fs.Bool("quiet", false, "no progress reports on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	isOffline, err := dumpFlag(fs, *dumpDir)
	if err != nil {
		return err
	}
	if err := outFlag(fs, *out, "write to MongoDB (without --dump)"); err != nil {
		return err
	}
	if !isOffline && *out != "" {
		return &configError{"--out needs --dump"}
	}
	if *dryRun && *out != "" {
		return &configError{"--out with --dry-run: a dry run writes nothing; leave out --dry-run to write the corrected copy, or --out to only report"}
	}
	if err := maxDiffsFlag(*maxDiffs); err != nil {
		return err
	}
	if isOffline && *out == "" && !*dryRun {
		return &configError{"--dump needs --out (or --dry-run)"}
	}
	opts := watch.RebuildOptions{DryRun: *dryRun, MaxDiffs: *maxDiffs}
	if isOffline {
		cfg, err := loadOfflineConfig()
		if err != nil {
			return err
		}
		if _, err := newLogger(env, cfg); err != nil {
			return err
		}
		return runOffline(ctx, env, cfg, *dumpDir, *out, *maxDiffs, *quiet, "rebuild")
	}
	cfg, err := loadConfig(true)
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // it writes values there, saving no stream start
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
	cfg.readOnly = *dryRun // a dry run writes nothing, indexes included

	sayConnecting(env.stderr, cfg)
	db, err := openMongo(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeMongo(db, log)
	return rebuildOnline(ctx, env, db, db.Standalone(), cfg, log, opts, textProgress(env, "rebuild", *quiet))
}

// rebuildOnline rebuilds db (watch.RebuildOnline; dry run: reports only)
// and prints the report and the start the saved checkpoint holds (30 s
// before the cluster time read before the scan), or, on a standalone
// mongod (no oplog), that none was saved. progressSink receives progress
// reports. It fails when the server refused some writes for good.
func rebuildOnline(ctx context.Context, env *environment, db watch.RebuildTarget, standalone bool, cfg *Config, log zerolog.Logger, opts watch.RebuildOptions, progressSink progress.Sink) error {
	rep, saved, err := watch.RebuildOnline(ctx, db, watch.OnlineRebuildOptions{DryRun: opts.DryRun, MaxDiffs: opts.MaxDiffs,
		Standalone: standalone, Owner: cfg.InstanceID, TTL: cfg.LeaseTTL, Log: log, Progress: progressSink, ProgressEvery: env.every()})
	if errors.Is(err, watch.ErrLeaseHeld) {
		return fmt.Errorf("%w; stop the running instance or wait, then retry", err)
	}
	if err != nil {
		return err
	}
	if opts.DryRun {
		printReport(env.stdout, rep, "would change")
		return nil
	}
	printReport(env.stdout, rep, "written")
	printRebuildCheckpoint(env.stdout, rep, saved, standalone)
	return rejectedWrites(rep)
}

// printRebuildCheckpoint says where the next run starts: the start the
// saved checkpoint holds, or, on a standalone mongod, that none was saved.
func printRebuildCheckpoint(w io.Writer, rep *drift.Report, saved resume.Checkpoint, standalone bool) {
	if standalone {
		fmt.Fprintln(w, "checkpoint: none saved: the server is a standalone mongod, which has no oplog and no change stream to resume.")
		fmt.Fprintln(w, "  The values above are written; 'run' needs a replica set (docs/install.md), and its first start there rebuilds again.")
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

// openDump opens the dump --dump names, for every offline command
// (dump.Open): database's directory in it (MATERIALIZER_DATABASE),
// holding all four source collections, each once (not both X.bson and
// X.bson.gz). Its errors are usage errors (exit 2).
func openDump(dir, database string) (dump.Dir, error) {
	d, err := dump.Open(dir, database)
	if err != nil {
		return d, dumpError(err, database)
	}
	return d, nil
}

// dumpError words an error opening a dump or an archive as a usage error,
// telling to set MATERIALIZER_DATABASE when the dump holds another
// database's collections.
func dumpError(err error, database string) error {
	var nf *dump.NotFoundError
	var ie *dump.IncompleteError
	switch {
	case errors.As(err, &nf) && len(nf.Others) > 0, errors.As(err, &ie) && ie.NoneFound:
		return &configError{fmt.Sprintf("%v: set %s_DATABASE to the dumped database's name (now %q)", err, envPrefix, database)}
	case errors.As(err, &nf):
		return &configError{fmt.Sprintf("%v (%s_DATABASE is %q)", err, envPrefix, database)}
	}
	return &configError{err.Error()}
}

// progressEvery is how often rebuild and verify report progress.
const progressEvery = 5 * time.Second

func (env *environment) every() time.Duration {
	if env.progressEvery > 0 {
		return env.progressEvery
	}
	return progressEvery
}

// textProgress returns the progress sink of a command: lines on stderr,
// or nothing with --quiet.
func textProgress(env *environment, what string, quiet bool) progress.Sink {
	if quiet {
		return func(progress.Status) {}
	}
	return progress.Text(env.stderr, what)
}

// rejectedWrites fails a rebuild some of whose writes the server refused
// for good (a homework grown past 16 MiB, a validator): the values were
// counted and logged, but the database is not repaired.
func rejectedWrites(rep *drift.Report) error {
	if rep.Rejected == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d bulk writes refused by the server; the database is not fully repaired", rep.Rejected)
	for _, r := range rep.RejectedErrors {
		msg += "\n  " + r
	}
	return errors.New(msg)
}

// dumpFlag reports whether --dump was given, refusing an empty value (an
// unset shell variable must not turn an offline command into an online one).
func dumpFlag(fs *flag.FlagSet, dir string) (bool, error) {
	set := flagGiven(fs, "dump")
	if set && dir == "" {
		return false, &configError{"--dump is empty (an unset variable?); give a mongodump directory, or leave --dump out to use MongoDB"}
	}
	if set && dir != "-" {
		// Said here, before it is taken for a directory or an archive.
		if _, err := os.Stat(dir); err != nil {
			return false, &configError{fmt.Sprintf("--dump: %v", err)}
		}
	}
	return set, nil
}

// maxDiffsFlag refuses a negative --max-diffs (it would print none, as 0
// does, without saying so).
func maxDiffsFlag(n int) error {
	if n < 0 {
		return &configError{fmt.Sprintf("--max-diffs %d: give 0 or more differences to print", n)}
	}
	return nil
}

// flagGiven reports whether flag name was on the command line (even with
// an empty value).
func flagGiven(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// outFlag refuses an --out given with an empty value: an unset shell
// variable must not turn a command that writes files into one that writes
// to MongoDB.
func outFlag(fs *flag.FlagSet, out, instead string) error {
	if flagGiven(fs, "out") && out == "" {
		return &configError{"--out is empty (an unset variable?); give a directory, or leave --out out to " + instead}
	}
	return nil
}

// runOffline verifies a dump (out empty) or writes its corrected copy: a
// directory, or an archive in the same format (gzip or not).
func runOffline(ctx context.Context, env *environment, cfg *Config, dir, out string, maxDiffs int, quiet bool, what string) error {
	env.output = out
	if isArchive(dir) {
		s, err := openArchive(ctx, env, dir, cfg.Database, out, quiet, what)
		if err != nil {
			return err
		}
		defer s.close()
		var write func(context.Context, map[string]dump.Rewrite, *progress.Reporter) error
		if out != "" {
			write = s.write
		}
		return runOfflineDump(ctx, env, s.a.Dir(), write, out, maxDiffs, quiet, what)
	}
	if out == "-" {
		return &configError{"--out -: the corrected copy of a dump directory is a directory, which cannot go to standard output; give a directory"}
	}
	if archiveName(out) {
		return &configError{fmt.Sprintf("--out %s: the corrected copy of a dump directory is a directory (only an archive's is an archive); give a directory", out)}
	}
	d, err := openDump(dir, cfg.Database)
	if err != nil {
		return err
	}
	if out != "" {
		if err := offline.CheckOut(d, out); err != nil {
			return &configError{withPathFlag(err).Error()}
		}
	}
	return runOfflineDump(ctx, env, d, nil, out, maxDiffs, quiet, what)
}

// runOfflineDump runs offline on d and prints the report; write, when
// set, writes the corrected copy (offline.Options.Write), reporting to
// the progress it is given.
func runOfflineDump(ctx context.Context, env *environment, d dump.Dir, write func(context.Context, map[string]dump.Rewrite, *progress.Reporter) error, out string, maxDiffs int, quiet bool, what string) error {
	prog := progress.New(textProgress(env, what, quiet), nil, env.every(), 0)
	opts := offline.Options{Out: out, MaxDiffs: maxDiffs, Progress: prog}
	if write != nil {
		opts.Write = func(ctx context.Context, rewrite map[string]dump.Rewrite) error { return write(ctx, rewrite, prog) }
	}
	rep, err := offline.Run(ctx, d, opts)
	err = withPathFlag(err)
	if ctx.Err() != nil && err != nil {
		return err // interrupted: no report
	}
	prog.Finish()
	verb := "drifted"
	switch {
	case what == "rebuild" && out == "":
		verb = "would change"
	case what == "rebuild":
		verb = "corrected"
	}
	if out != "" && err != nil {
		// The output was not committed: no report on stdout, which a cron
		// mail of it would read as a rebuild done.
		return fmt.Errorf("%w; nothing written to %s", err, out)
	}
	if rep != nil {
		printReport(env.stdout, rep, verb)
		warnNoSubmissions(env.stderr, rep)
	}
	if err != nil {
		return err
	}
	if out != "" {
		fmt.Fprintf(env.stdout, "wrote %s\n", out)
	}
	if what == "verify" {
		return verifyVerdict(rep)
	}
	return nil
}

// verifyVerdict is verify's error for its report: errDrift when anything
// drifted, else errUnchecked when documents were skipped as malformed
// (their values were not checked) or nothing at all was compared (another
// app's database, an empty export), else nil: clean.
func verifyVerdict(rep *drift.Report) error {
	switch {
	case rep.Drift() > 0:
		return errDrift
	case len(rep.Malformed) > 0:
		docs := "documents"
		if len(rep.Malformed) == 1 {
			docs = "document"
		}
		return fmt.Errorf("no drift, but %w: %d malformed %s skipped (listed above)", errUnchecked, len(rep.Malformed), docs)
	case rep.Users == 0 && rep.Entries == 0:
		return fmt.Errorf("no drift, but %w: nothing compared (no user and no studentStatus entry; is this Normal-OJ's database?)", errUnchecked)
	}
	return nil
}

// withPathFlag words an offline.PathError with the flag that gave its
// path (--dump or --out); other errors are returned as they are.
func withPathFlag(err error) error {
	var pe *offline.PathError
	if !errors.As(err, &pe) {
		return err
	}
	flag := "--out"
	if pe.Input {
		flag = "--dump"
	}
	return fmt.Errorf("%s: %w", flag, err)
}

func cmdVerify(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "verify", "[--dump DIR] [--max-diffs N] [--quiet]", `Recompute every derived value and compare it with what is stored. Prints the
number of drifted users and entries and the first differences. Writes
nothing. Exit status 1 when anything drifted (or, with --dump, when a
corrected homework would exceed MongoDB's 16 MiB limit), 3 when nothing
drifted but malformed documents were skipped or nothing was compared,
0 when clean, 130 or 143 when interrupted by SIGINT or SIGTERM (no report).
Progress goes to stderr every few seconds on long work (--quiet: none).`)
	dumpDir := fs.String("dump", "", "mongodump directory or archive file (- for standard input) to check instead of MongoDB")
	maxDiffs := fs.Int("max-diffs", 10, "differences to print")
	quiet := fs.Bool("quiet", false, "no progress reports on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	isOffline, err := dumpFlag(fs, *dumpDir)
	if err != nil {
		return err
	}
	if err := maxDiffsFlag(*maxDiffs); err != nil {
		return err
	}
	if isOffline {
		cfg, err := loadOfflineConfig()
		if err != nil {
			return err
		}
		if _, err := newLogger(env, cfg); err != nil {
			return err
		}
		return runOffline(ctx, env, cfg, *dumpDir, "", *maxDiffs, *quiet, "verify")
	}
	cfg, err := loadConfig(true)
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // read-only: no change stream needed
	cfg.readOnly = true        // and no index build (a write without a deadline)
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
	opts := watch.RebuildOptions{DryRun: true, MaxDiffs: *maxDiffs,
		Progress: progress.New(textProgress(env, "verify", *quiet), nil, env.every(), 0)}
	sayConnecting(env.stderr, cfg)
	db, err := openMongo(ctx, cfg, zerolog.Nop())
	if err != nil {
		return err
	}
	defer closeMongo(db, log)
	rep, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), opts)
	if err != nil {
		return err
	}
	printReport(env.stdout, rep, "drifted")
	return verifyVerdict(rep)
}

// printReport prints a rebuild or verify report.
func printReport(w io.Writer, rep *drift.Report, verb string) {
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
			stored, derived, ids := shortenIDs(d.Stored, d.Derived)
			fmt.Fprintf(w, "  %s %s %s\n    stored:  %s\n    derived: %s\n", d.Collection, d.ID, d.Path, orNone(stored), derived)
			for _, l := range ids {
				fmt.Fprintf(w, "    %s\n", l)
			}
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
the last processed event, the lag behind the cluster's current time, the
lease holder and epoch, and how many submissions have been pending longer
than MATERIALIZER_PENDING_AGE ('materializer pending' lists them).`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(true)
	if err != nil {
		return err
	}
	db, err := openReadOnly(ctx, env, cfg)
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
		fmt.Fprintln(env.stdout, "server: a standalone mongod: no oplog, no change stream and no cluster time; 'run' needs a replica set (docs/install.md)")
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
	return statusPending(ctx, env.stdout, db, cfg.PendingAge, time.Now().UTC())
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

// warnNoSubmissions warns when a dump holds no submission although users
// have stored counts (they drifted to 0): right for a site whose
// submissions were all deleted, but a truncated or emptied submission
// file looks the same, and a rebuild writes the zeros.
func warnNoSubmissions(w io.Writer, rep *drift.Report) {
	if rep.Submissions == 0 && rep.DriftedUsers > 0 {
		fmt.Fprintf(w, "warning: the dump holds no submission, yet %d users have stored counts above 0, derived as 0: check that submission.bson is complete (a truncated or empty file looks the same)\n", rep.DriftedUsers)
	}
}

// maxListedIDs is how many submission ids a difference prints in full.
const maxListedIDs = 5

// shortenIDs shortens the submissionIds arrays of a stored and a derived
// entry (relaxed Extended JSON) when either holds more than maxListedIDs:
// each prints as its count, and the lines returned name the ids only one
// side holds (the first maxListedIDs of each, and how many more). An
// entry of hundreds of ids would otherwise print as one line of kilobytes.
func shortenIDs(stored, derived string) (string, string, []string) {
	sa, si, sok := submissionIDs(stored)
	da, di, dok := submissionIDs(derived)
	if (!sok || len(sa) <= maxListedIDs) && (!dok || len(da) <= maxListedIDs) {
		return stored, derived, nil
	}
	// An empty list stays [], as it prints beside a short list and in
	// explain.
	if sok && len(sa) > 0 {
		stored = stored[:si[0]] + fmt.Sprintf("[%d ids]", len(sa)) + stored[si[1]:]
	}
	if dok && len(da) > 0 {
		derived = derived[:di[0]] + fmt.Sprintf("[%d ids]", len(da)) + derived[di[1]:]
	}
	onlyIn := func(a, b []string) []string {
		in := make(map[string]bool, len(b))
		for _, x := range b {
			in[x] = true
		}
		var out []string
		for _, x := range a {
			if !in[x] {
				out = append(out, x)
			}
		}
		return out
	}
	list := func(what string, ids []string) string {
		line := fmt.Sprintf("submissionIds only %s: %d", what, len(ids))
		if len(ids) > 0 {
			line += " (" + strings.Join(ids[:min(len(ids), maxListedIDs)], ", ")
			if len(ids) > maxListedIDs {
				line += fmt.Sprintf(", %d more", len(ids)-maxListedIDs)
			}
			line += ")"
		}
		return line
	}
	return stored, derived, []string{list("stored", onlyIn(sa, da)), list("derived", onlyIn(da, sa))}
}

// submissionIDs finds the submissionIds array of an entry in relaxed
// Extended JSON: its ids (an ObjectId as its hex, another value as
// printed) and the array's bounds in s.
func submissionIDs(s string) ([]string, [2]int, bool) {
	const key = `"submissionIds":[`
	i := strings.Index(s, key)
	if i < 0 {
		return nil, [2]int{}, false
	}
	start := i + len(key) - 1
	// The ids are documents or scalars: no nested arrays, so the first
	// ']' closes the array.
	end := strings.IndexByte(s[start:], ']')
	if end < 0 {
		return nil, [2]int{}, false
	}
	end += start + 1
	var ids []string
	var vals []json.RawMessage
	if err := json.Unmarshal([]byte(s[start:end]), &vals); err != nil {
		return nil, [2]int{}, false
	}
	for _, v := range vals {
		var oid struct {
			OID string `json:"$oid"`
		}
		if json.Unmarshal(v, &oid) == nil && oid.OID != "" {
			ids = append(ids, oid.OID)
		} else {
			ids = append(ids, string(v))
		}
	}
	return ids, [2]int{start, end}, true
}
