package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/explain"
	"github.com/normal-oj/noj-materializer/mongodb"
)

func cmdExplain(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "explain", "--user U --problem P [--json] [--dump DIR]", `Show how one student's derived values for one problem come about, step by
step: each of the user's submissions to the problem in (timestamp, _id)
order and whether it counts; for each homework of the problem, on time or
late (whole days), the penalty program and what it returned, the running
score and rawScore, and whether problemStatus was set; the final entry of
each homework next to the stored one, and the user's counts next to the
stored ones, drift marked. Read-only: writes nothing, creates no index, and
works on any topology (a standalone too). --dump DIR reads a mongodump
directory instead (or an archive file; - for standard input). Exit status
0 (also when drift is shown), 1 on an error, 2 on a usage error such as an
unknown user or problem, 130 or 143 when interrupted by SIGINT or SIGTERM.`)
	user := fs.String("user", "", "the username (user._id, submission.user) (required)")
	problemArg := fs.String("problem", "", "the problemId (problem._id, submission.problem) (required)")
	asJSON := fs.Bool("json", false, "print the explanation as JSON (shape documented in docs/explain.md)")
	dumpDir := fs.String("dump", "", "mongodump directory or archive file (- for standard input) to read instead of MongoDB")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *user == "" || *problemArg == "" {
		return &configError{"explain needs --user U and --problem P"}
	}
	problem, err := strconv.ParseInt(*problemArg, 10, 64)
	if err != nil {
		return &configError{fmt.Sprintf("--problem %q is not a problemId (an integer)", *problemArg)}
	}
	isOffline, err := dumpFlag(fs, *dumpDir)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(!isOffline)
	if err != nil {
		return err
	}
	if _, err := newLogger(env, cfg); err != nil {
		return err
	}
	var in *explain.Input
	var where string
	if isOffline {
		if in, where, err = readOfflineInput(ctx, env, *dumpDir, cfg.Database, *user, problem); err != nil {
			return err
		}
	} else {
		sayConnecting(env.stderr, cfg)
		cfg.allowStandalone = true // read-only: no change stream needed
		cfg.readOnly = true        // and no index build
		db, err := openMongo(ctx, cfg, zerolog.Nop())
		if err != nil {
			return err
		}
		defer closeMongo(db, zerolog.Nop())
		if in, err = explain.Read(ctx, db, *user, problem); err != nil {
			return err
		}
		where = mongodb.Redact(cfg.MongoDBURI) + " database " + cfg.Database
	}
	ex, err := explain.Explain(in)
	if err != nil {
		var unknown *explain.UnknownError
		if errors.As(err, &unknown) {
			return &configError{err.Error()}
		}
		return err
	}
	ex.Source = where
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // penalty programs hold < and >
		return enc.Encode(ex)
	}
	printExplanation(env.stdout, ex)
	return nil
}

// printExplanation writes the explanation for a person.
func printExplanation(w io.Writer, ex *explain.Explanation) {
	fmt.Fprintf(w, "explain: user %q, problem %d  (%s)\n", ex.User, ex.Problem, ex.Source)
	if !ex.ProblemFound {
		fmt.Fprintf(w, "\nproblem %d: no problem document: no homework is visited\n", ex.Problem)
	} else {
		fmt.Fprintf(w, "\nproblem %d lists %d homework(s) (problem.homeworks, in order):\n", ex.Problem, len(ex.ProblemHomeworks))
		for _, r := range ex.ProblemHomeworks {
			what := map[string]string{
				"visited":  "visited: " + ex.User + " has an entry",
				"no entry": "no entry for " + ex.User + ": nothing derived",
				"dangling": "dangling: no such homework (or unreadable): skipped",
			}[r.Status]
			if r.Status == "repeated" {
				what = fmt.Sprintf("repeated: listed at [%d] already, visited once", *r.FirstPosition)
			}
			fmt.Fprintf(w, "  [%d] %s  %s\n", r.Position, r.Homework, what)
		}
	}
	for _, e := range ex.Entries {
		if e.Position == nil {
			fmt.Fprintf(w, "  homework %s is not listed by the problem but holds an entry: no submission reaches it, it holds the start value\n", e.Homework)
		}
	}
	for _, e := range ex.Entries {
		fmt.Fprintf(w, "  homework %s: deadline %s, penalty %q\n", e.Homework, e.Deadline, e.Penalty)
	}

	fmt.Fprintf(w, "\nsubmissions of %s to problem %d, in (timestamp, _id) order: %d\n", ex.User, ex.Problem, len(ex.Submissions))
	for i, s := range ex.Submissions {
		hand := ""
		if s.Handwritten {
			hand = "  handwritten"
		}
		fmt.Fprintf(w, "  #%d %s  %s  status %d  score %d%s\n", i+1, s.ID, s.Timestamp, s.Status, s.Score, hand)
		fmt.Fprintf(w, "     %s\n", s.Note)
		for _, st := range s.Steps {
			var b strings.Builder
			fmt.Fprintf(&b, "     homework %s: ", st.Homework)
			if st.Late {
				fmt.Fprintf(&b, "late %d day(s); ", st.LateDays)
			} else {
				b.WriteString("on time; ")
			}
			fmt.Fprintf(&b, "brings %d", st.In)
			if st.Penalty != nil {
				if st.Penalty.Error != "" {
					fmt.Fprintf(&b, "; penalty(score=%s, overtime=%d) FAILED (%s): gains 0", st.Penalty.Score, st.Penalty.Overtime, st.Penalty.Error)
				} else {
					fmt.Fprintf(&b, "; penalty(score=%s, overtime=%d) returned %d", st.Penalty.Score, st.Penalty.Overtime, st.Penalty.Returned)
				}
			} else if st.Late {
				fmt.Fprintf(&b, "; not above rawScore %d: penalty not run", st.RawScoreBefore)
			}
			fmt.Fprintf(&b, "; score %d -> %d, rawScore %d -> %d", st.ScoreBefore, st.Score, st.RawScoreBefore, st.RawScore)
			if st.SetProblemStatus {
				fmt.Fprintf(&b, "; sets problemStatus %d", *st.ProblemStatus)
			}
			if st.Late {
				fmt.Fprintf(&b, "; carries %d", st.Carried)
			}
			fmt.Fprintln(w, b.String())
		}
	}

	fmt.Fprintf(w, "\nfinal entries studentStatus.%s.%d (derived vs stored):\n", ex.User, ex.Problem)
	if len(ex.Entries) == 0 {
		fmt.Fprintln(w, "  none: no homework holds an entry for this pair (the daemon never adds one)")
	}
	for _, e := range ex.Entries {
		fmt.Fprintf(w, "  homework %s  %s\n    derived: %s\n    stored:  %s\n", e.Homework, driftMark(e.Drift), e.Derived, e.Stored)
	}
	fmt.Fprintf(w, "\nuser %s counts  %s\n", ex.User, driftMark(ex.UserCounts.Drift))
	if !ex.UserCounts.Document {
		fmt.Fprintln(w, "  no user document: the daemon never creates one, nothing is written")
	}
	fmt.Fprintf(w, "    derived: %s\n    stored:  %s\n", ex.UserCounts.Derived, ex.UserCounts.Stored)
	fmt.Fprintf(w, "\npenalty errors: %d\n", ex.PenaltyErrors)
	if len(ex.Malformed) > 0 {
		fmt.Fprintf(w, "malformed documents skipped: %d\n", len(ex.Malformed))
		for _, m := range ex.Malformed {
			fmt.Fprintf(w, "  %s\n", m)
		}
	}
	if ex.Drift {
		fmt.Fprintln(w, "drift: yes (the running daemon, or 'rebuild', writes the derived values)")
	} else {
		fmt.Fprintln(w, "drift: none")
	}
}

func driftMark(drift bool) string {
	if drift {
		return "DRIFT"
	}
	return "same"
}
