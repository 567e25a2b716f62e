package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/mongodb"
)

func cmdSeed(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "seed", "[--users N --problems N --homeworks N --submissions N --seed S] [--shape university|stress] [--course-size N] [--out DIR] [--if-empty]",
		`Generate Normal-OJ-shaped demo data: users, problems, homeworks with
penalties, deadlines and studentStatus entries, and submissions with
realistic statuses and timestamps, with stale derived values as the old
Back-End code leaves them. The university shape (default) puts users in
courses of about --course-size students; a homework's studentStatus holds
its course's students and students submit to their course's problems. The
stress shape enrolls every user in every homework. With --out it writes a mongodump-format directory
(for 'verify --dump' and 'rebuild --dump'); otherwise it inserts into
MATERIALIZER_MONGODB_URI's database, which must hold no submissions yet
(--if-empty: a database that has some is left alone, exit 0). --out is
written like rebuild's (a hidden partial directory moved into place at
the end); SIGINT or SIGTERM removes it and exits 130 or 143.`)
	var p demo.Params
	fs.IntVar(&p.Users, "users", 50, "number of users")
	fs.IntVar(&p.Problems, "problems", 20, "number of problems")
	fs.IntVar(&p.Homeworks, "homeworks", 6, "number of homeworks")
	fs.IntVar(&p.Submissions, "submissions", 2000, "number of submissions")
	fs.Uint64Var(&p.Seed, "seed", 1, "random seed (same seed, same data)")
	fs.StringVar(&p.Shape, "shape", demo.ShapeUniversity, "university (users in courses) or stress (every user in every homework)")
	fs.IntVar(&p.CourseSize, "course-size", 80, "university shape: mean students per course")
	out := fs.String("out", "", "write a mongodump directory here instead of inserting into MongoDB")
	ifEmpty := fs.Bool("if-empty", false, "exit 0 without inserting when the database already has submissions (for repeated 'make up')")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := outFlag(fs, *out, "insert into MongoDB"); err != nil {
		return err
	}
	switch {
	case *out == "-":
		return &configError{"--out -: seed --out writes a dump directory, which cannot go to standard output; give a directory (or --archive FILE for an archive)"}
	case archiveName(*out):
		return &configError{fmt.Sprintf("--out %s names an archive, but --out writes a dump directory: give --archive %s for a mongodump archive, or a directory name to --out", *out, *out)}
	}
	if p.Users < 0 || p.Problems < 0 || p.Homeworks < 0 || p.Submissions < 0 {
		return &configError{"sizes must not be negative"}
	}
	if p.Shape != demo.ShapeUniversity && p.Shape != demo.ShapeStress {
		return &configError{fmt.Sprintf("--shape must be %s or %s, got %q", demo.ShapeUniversity, demo.ShapeStress, p.Shape)}
	}
	if p.CourseSize <= 0 {
		return &configError{"--course-size must be positive"}
	}
	load := loadConfig
	if *out != "" {
		load = func(bool) (*Config, error) { return loadOfflineConfig() }
	}
	cfg, err := load(*out == "")
	if err != nil {
		return err
	}
	cfg.allowStandalone = true // inserts only: no change stream needed
	if *out != "" {
		return seedOut(ctx, env, p, *out)
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

// seedOut writes the generated data as a mongodump directory at out,
// through a dump.Output like rebuild's: an interrupted or failed seed
// leaves no output.
func seedOut(ctx context.Context, env *environment, p demo.Params, out string) error {
	if err := dump.CheckOutput(out); err != nil {
		return &configError{"--out: " + err.Error()}
	}
	o, err := dump.CreateOutput(out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer o.Remove() // nothing once committed
	counts := make(map[string]int)
	n := 0
	err = dump.WriteStream(o.Dir(), dump.Sources, func(emit func(string, bson.Raw) error) error {
		return demo.GenerateTo(p, func(coll string, doc bson.Raw) error {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			counts[coll]++
			return emit(coll, doc)
		})
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	if err := o.Commit(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(env.stdout, "wrote %d users, %d problems, %d homeworks, %d submissions to %s\n",
		counts["user"], counts["problem"], counts["homework"], counts["submission"], out)
	return nil
}
