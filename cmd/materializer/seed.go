package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/mongodb"
	"github.com/normal-oj/noj-materializer/progress"
)

func cmdSeed(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "seed", "[--users N --problems N --homeworks N --submissions N --seed S] [--shape university|stress] [--course-size N] [--out DIR | --archive FILE] [--if-empty] [--quiet]",
		`Generate Normal-OJ-shaped demo data: users, problems, homeworks with
penalties, deadlines and studentStatus entries, and submissions with
realistic statuses and timestamps, with stale derived values as the old
Back-End code leaves them. The university shape (default) puts users in
courses of about --course-size students; a homework's studentStatus holds
its course's students and students submit to their course's problems. The
stress shape enrolls every user in every homework. With --out it writes a
mongodump-format directory, with --archive a mongodump --archive file of
MATERIALIZER_DATABASE (gzip-compressed when FILE ends in .gz), for 'verify
--dump', 'rebuild --dump' and mongorestore; otherwise it inserts into
MATERIALIZER_MONGODB_URI's database, which must hold no submissions yet
(--if-empty: a database that has some is left alone, exit 0). --out and
--archive are written like rebuild's (a hidden partial directory or file
moved into place at the end); SIGINT or SIGTERM removes it and exits 130
or 143. Progress goes to stderr every few seconds on long work (--quiet:
none).`)
	var p demo.Params
	fs.IntVar(&p.Users, "users", 50, "number of users")
	fs.IntVar(&p.Problems, "problems", 20, "number of problems")
	fs.IntVar(&p.Homeworks, "homeworks", 6, "number of homeworks")
	fs.IntVar(&p.Submissions, "submissions", 2000, "number of submissions")
	fs.Uint64Var(&p.Seed, "seed", 1, "random seed (same seed, same data)")
	fs.StringVar(&p.Shape, "shape", demo.ShapeUniversity, "university (users in courses) or stress (every user in every homework)")
	fs.IntVar(&p.CourseSize, "course-size", 80, "university shape: mean students per course")
	out := fs.String("out", "", "write a mongodump directory here instead of inserting into MongoDB")
	archive := fs.String("archive", "", "write a mongodump archive file here (gzip-compressed when it ends in .gz) instead of inserting into MongoDB")
	quiet := fs.Bool("quiet", false, "no progress reports on stderr")
	ifEmpty := fs.Bool("if-empty", false, "exit 0 without inserting when the database already has submissions (for repeated 'make up')")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := outFlag(fs, *out, "insert into MongoDB"); err != nil {
		return err
	}
	if flagGiven(fs, "archive") && *archive == "" {
		return &configError{"--archive is empty (an unset variable?); give a file, or leave --archive out to insert into MongoDB"}
	}
	switch {
	case *out != "" && *archive != "":
		return &configError{"--out and --archive both given: seed writes one output, a directory (--out) or an archive (--archive)"}
	case *archive == "-":
		return &configError{"--archive -: writing the archive to standard output is not supported; give a file"}
	case *out == "-":
		return &configError{"--out -: seed --out writes a dump directory, which cannot go to standard output; give a directory (or --archive FILE for an archive)"}
	case archiveName(*out):
		return &configError{fmt.Sprintf("--out %s names an archive, but --out writes a dump directory: give --archive %s for a mongodump archive, or a directory name to --out", *out, *out)}
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"users", p.Users}, {"problems", p.Problems}, {"homeworks", p.Homeworks}, {"submissions", p.Submissions}} {
		if f.n < 0 {
			return &configError{fmt.Sprintf("--%s must not be negative, got %d", f.name, f.n)}
		}
	}
	toFile := *out != "" || *archive != ""
	if err := seedSizesBounded(p, toFile); err != nil {
		return err
	}
	if p.Shape != demo.ShapeUniversity && p.Shape != demo.ShapeStress {
		return &configError{fmt.Sprintf("--shape must be %s or %s, got %q", demo.ShapeUniversity, demo.ShapeStress, p.Shape)}
	}
	if p.CourseSize <= 0 {
		return &configError{"--course-size must be positive"}
	}
	load := loadConfig
	if toFile {
		load = func(bool) (*Config, error) { return loadOfflineConfig() }
	}
	cfg, err := load(!toFile)
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // inserts only: no change stream needed
	if toFile {
		return seedFiles(ctx, env, p, *out, *archive, cfg.Database, *quiet)
	}
	docs := demo.Generate(p)
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
	sayConnecting(env.stderr, cfg)
	db, err := openMongo(ctx, cfg, zerolog.Nop())
	if err != nil {
		return err
	}
	defer closeMongo(db, log)
	n, err := db.Seed(ctx, docs)
	if *ifEmpty && errors.Is(err, mongodb.ErrNotEmpty) {
		fmt.Fprintf(env.stdout, "database %s already has data; nothing inserted\n", cfg.Database)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "inserted %d documents into %s\n", n, cfg.Database)
	return nil
}

// Bounds of seed's sizes: a typo (--users 99999999999) is refused at
// once rather than running out of memory. The generator holds every user
// name, homework and problem; inserting into MongoDB, every document
// (about 250 bytes a submission); written to files, the submissions are
// streamed. Each bound is far above a real site and the benchmarks.
const (
	maxSeedUsers         = 1_000_000
	maxSeedProblems      = 1_000_000
	maxSeedHomeworks     = 100_000
	maxSeedCourseSize    = 1_000_000
	maxSeedSubmissions   = 10_000_000  // into MongoDB
	maxSeedSubmissionsTo = 100_000_000 // --out or --archive
)

// seedSizesBounded refuses, as a usage error, a size above its bound.
func seedSizesBounded(p demo.Params, toFile bool) error {
	subs, where := maxSeedSubmissions, fmt.Sprintf(" into MongoDB (held in memory before the insert; --out or --archive stream up to %d)", maxSeedSubmissionsTo)
	if toFile {
		subs, where = maxSeedSubmissionsTo, ""
	}
	for _, b := range []struct {
		flag   string
		n, max int
		where  string
	}{
		{"users", p.Users, maxSeedUsers, ""},
		{"problems", p.Problems, maxSeedProblems, ""},
		{"homeworks", p.Homeworks, maxSeedHomeworks, ""},
		{"course-size", p.CourseSize, maxSeedCourseSize, ""},
		{"submissions", p.Submissions, subs, where},
	} {
		if b.n > b.max {
			return &configError{fmt.Sprintf("--%s %d: at most %d%s", b.flag, b.n, b.max, b.where)}
		}
	}
	return nil
}

// seedFiles writes the generated data as a mongodump directory at out,
// through a dump.Output like rebuild's, or as an archive of database at
// archive, through a dump.ArchiveFile: an interrupted or failed seed
// leaves no output. Progress counts the documents, whose total the sizes
// give.
func seedFiles(ctx context.Context, env *environment, p demo.Params, out, archive, database string, quiet bool) error {
	target := out
	if archive != "" {
		target = archive
	}
	env.output = target
	prog := progress.New(textProgress(env, "seed", quiet), nil, env.every(), int64(p.Users+p.Problems+p.Homeworks+p.Submissions))
	prog.Phase("writing " + target)
	counts := make(map[string]int)
	n := 0
	gen := func(emit func(string, bson.Raw) error) error {
		return demo.GenerateTo(p, func(coll string, doc bson.Raw) error {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			counts[coll]++
			prog.Add(1)
			return emit(coll, doc)
		})
	}
	var err error
	if archive != "" {
		err = seedArchive(ctx, archive, database, gen)
	} else {
		err = seedDir(ctx, out, gen)
	}
	if err != nil {
		return err
	}
	prog.Finish()
	what := ""
	if archive != "" {
		what = fmt.Sprintf(" (a mongodump archive of database %s)", database)
		if strings.HasSuffix(archive, ".gz") {
			what = fmt.Sprintf(" (a gzip-compressed mongodump archive of database %s)", database)
		}
	}
	fmt.Fprintf(env.stdout, "wrote %d users, %d problems, %d homeworks, %d submissions to %s%s\n",
		counts["user"], counts["problem"], counts["homework"], counts["submission"], target, what)
	return nil
}

// seedDir writes the documents gen emits as a dump directory at out.
func seedDir(ctx context.Context, out string, gen func(emit func(string, bson.Raw) error) error) error {
	if err := dump.CheckOutput(out); err != nil {
		return &configError{"--out: " + err.Error()}
	}
	o, err := dump.CreateOutput(out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer o.Remove() // nothing once committed
	err = dump.WriteStream(o.Dir(), dump.Sources, gen)
	if err == nil {
		err = ctx.Err() // an interrupt after the last document: as in seedArchive
	}
	if err != nil {
		return err
	}
	if err := o.Commit(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// seedArchive writes the documents gen emits as an archive of database
// at file, gzip-compressed when its name ends in .gz.
func seedArchive(ctx context.Context, file, database string, gen func(emit func(string, bson.Raw) error) error) error {
	af, err := dump.CreateArchiveFile(file)
	if err != nil {
		return &configError{"--archive: " + err.Error()}
	}
	defer af.Abort() // nothing once committed
	aw, err := dump.NewArchiveWriter(af, strings.HasSuffix(file, ".gz"), database, dump.Sources, nil)
	if err != nil {
		return err
	}
	err = gen(aw.Add)
	if err == nil {
		err = aw.Close()
	}
	if err == nil {
		// An interrupt after the last document, up to the commit: no
		// output, exit 130 or 143 (the generator checks ctx only every
		// few thousand documents).
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("--archive: %w", err)
	}
	return nil
}
