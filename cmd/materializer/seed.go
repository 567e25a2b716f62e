package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/demo"
	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/mongodb"
)

func cmdSeed(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "seed", "[--users N --problems N --homeworks N --submissions N --seed S] [--out DIR]",
		`Generate Normal-OJ-shaped demo data: users, problems, homeworks with
penalties, deadlines and studentStatus entries, and submissions with
realistic statuses and timestamps, with stale derived values as the old
Back-End code leaves them. With --out it writes a mongodump-format directory
(for 'verify --dump' and 'rebuild --dump'); otherwise it inserts into
MATERIALIZER_MONGODB_URI's database, which must hold no Back-End data yet.`)
	var p demo.Params
	fs.IntVar(&p.Users, "users", 50, "number of users")
	fs.IntVar(&p.Problems, "problems", 20, "number of problems")
	fs.IntVar(&p.Homeworks, "homeworks", 6, "number of homeworks")
	fs.IntVar(&p.Submissions, "submissions", 2000, "number of submissions")
	fs.Uint64Var(&p.Seed, "seed", 1, "random seed (same seed, same data)")
	out := fs.String("out", "", "write a mongodump directory here instead of inserting into MongoDB")
	ifEmpty := fs.Bool("if-empty", false, "exit 0 without inserting when the database already has submissions (for repeated 'make up')")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if p.Users < 0 || p.Problems < 0 || p.Homeworks < 0 || p.Submissions < 0 {
		return &configError{"sizes must not be negative"}
	}
	load := loadConfig
	if *out != "" {
		load = func(bool) (*Config, error) { return loadOfflineConfig() }
	}
	cfg, err := load(*out == "")
	if err != nil {
		return err
	}
	if *out != "" {
		if err := emptyOrAbsent(*out); err != nil {
			return err
		}
	}
	docs := demo.Generate(p)
	if *out != "" {
		if err := dump.Write(*out, docs); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "wrote %d users, %d problems, %d homeworks, %d submissions to %s\n",
			len(docs["user"]), len(docs["problem"]), len(docs["homework"]), len(docs["submission"]), *out)
		return nil
	}
	log, err := newLogger(env, cfg)
	if err != nil {
		return err
	}
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
