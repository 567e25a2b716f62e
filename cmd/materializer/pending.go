package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/mongodb"
	"github.com/normal-oj/noj-materializer/watch"
)

// defaultPendingAge is pending's --older-than when MATERIALIZER_PENDING_AGE
// is 0 (the daemon's check off).
const defaultPendingAge = 30 * time.Minute

func cmdPending(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "pending", "[--older-than D] [--json]", `List the submissions pending (status -1) for longer than D: their judging
results never landed (the stock sandbox sends each result once; one sent
while 'web' was down is lost). Handwritten submissions, graded by a
teacher, are not listed. For each, the Back-End's rejudge call: GET
/submission/<id>/rejudge on its API root (the site's address; /api behind
the development Caddyfile), as an admin or the course's teacher or TA
(the piann cookie of a login, POST /auth/session). Without --json the
output is a shell script: set API and PIANN, review it, run it. Reads
only; exit 0 whether or not any is pending, 1 when the query fails.`)
	var olderThan durationValue
	fs.Var(&olderThan, "older-than", "list submissions pending longer than `D`, at least 5m (0: MATERIALIZER_PENDING_AGE, or 30m when that is 0)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the script")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkPendingAge("--older-than", time.Duration(olderThan), envPrefix+"_PENDING_AGE, or 30m when that is 0"); err != nil {
		return err
	}
	cfg, err := loadConfig(true)
	if err != nil {
		return err
	}
	age := pendingAge(time.Duration(olderThan), cfg.PendingAge)
	db, err := openReadOnly(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer closeMongo(db, zerolog.Nop())
	now := time.Now().UTC()
	subs, err := db.PendingSubmissions(ctx, now.Add(-age))
	if err != nil {
		return pendingError(err)
	}
	if *asJSON {
		return printPendingJSON(env.stdout, subs, age, now)
	}
	printPending(env.stdout, subs, age, now)
	return nil
}

// durationValue is a duration flag like flag.Duration's whose error says
// what is wrong with the value (time: missing unit in duration "30"), not
// only "parse error".
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// openReadOnly connects for a command that only reads (status,
// pending): a standalone is accepted (no change stream needed) and no
// index is built (a createIndexes is a write without a deadline).
func openReadOnly(ctx context.Context, env *environment, cfg *Config) (*mongodb.DB, error) {
	cfg.allowStandalone = true
	cfg.readOnly = true
	if _, err := newLogger(env, cfg); err != nil {
		return nil, err
	}
	sayConnecting(env.stderr, cfg)
	return openMongo(ctx, cfg, zerolog.Nop())
}

// pendingAge is --older-than, else the configured age, else the default.
func pendingAge(flag, configured time.Duration) time.Duration {
	switch {
	case flag > 0:
		return flag
	case configured > 0:
		return configured
	}
	return defaultPendingAge
}

// pendingError words a missing pending index with where it comes from.
func pendingError(err error) error {
	if errors.Is(err, mongodb.ErrPendingIndexMissing) {
		return fmt.Errorf("%w: 'materializer run' builds it at start-up (unless %s_CREATE_INDEXES=false: then create it by hand, docs/install.md#indexes)", err, envPrefix)
	}
	return err
}

// rejudgePath is the Back-End's rejudge route for submission id (GET,
// the same at 0a6e25c and dfbd76a: model/submission.py).
func rejudgePath(id string) string { return "/submission/" + id + "/rejudge" }

// rejudgeRefusedUntil returns when the Back-End starts accepting a
// rejudge of a submission pending since lastSend, or zero when it does
// now. It refuses while (now - lastSend).seconds < 300, and timedelta's
// seconds leave out whole days: 1 day and 2 minutes is refused too.
func rejudgeRefusedUntil(lastSend, now time.Time) time.Time {
	const day = 24 * time.Hour
	if in := now.Sub(lastSend) % day; in >= 0 && in < 5*time.Minute {
		return now.Add(5*time.Minute - in)
	}
	return time.Time{}
}

// printPending prints the pending submissions as a shell script of
// rejudge calls, with comments saying what they are.
func printPending(w io.Writer, subs []watch.PendingSubmission, age time.Duration, now time.Time) {
	if len(subs) == 0 {
		fmt.Fprintf(w, "# no submission pending (status -1) for over %s\n", age)
		return
	}
	fmt.Fprintf(w, "# %d submissions pending (status -1) for over %s, oldest first: their results never landed.\n", len(subs), age)
	fmt.Fprintln(w, "# Rejudge each as an admin or the course's teacher or TA. API: the Back-End's root (https://SITE;")
	fmt.Fprintln(w, "# .../api behind the development Caddyfile); PIANN: the piann cookie of a login (POST $API/auth/session).")
	for _, s := range subs {
		note := ""
		if until := rejudgeRefusedUntil(s.LastSend, now); !until.IsZero() {
			note = fmt.Sprintf("; refused (403) until %s: the Back-End's 5-minute check ignores whole days", until.Format(time.RFC3339))
		}
		fmt.Fprintf(w, "curl -fsS -b \"piann=$PIANN\" \"$API%s\"  # %s problem %d, lastSend %s, pending %s%s\n",
			rejudgePath(s.ID), s.User, s.Problem, s.LastSend.Format(time.RFC3339), now.Sub(s.LastSend).Round(time.Second), note)
	}
}

// pendingJSON is pending --json's output.
type pendingJSON struct {
	OlderThan   string             `json:"olderThan"`
	CheckedAt   time.Time          `json:"checkedAt"`
	Count       int                `json:"count"`
	Submissions []pendingJSONEntry `json:"submissions"`
}

type pendingJSONEntry struct {
	ID             string      `json:"id"`
	User           string      `json:"user"`
	Problem        int64       `json:"problem"`
	LastSend       time.Time   `json:"lastSend"`
	PendingSeconds int64       `json:"pendingSeconds"`
	Rejudge        rejudgeCall `json:"rejudge"`
}

type rejudgeCall struct {
	Method       string     `json:"method"`
	Path         string     `json:"path"`
	RefusedUntil *time.Time `json:"refusedUntil,omitempty"`
}

func printPendingJSON(w io.Writer, subs []watch.PendingSubmission, age time.Duration, now time.Time) error {
	out := pendingJSON{OlderThan: age.String(), CheckedAt: now, Count: len(subs), Submissions: []pendingJSONEntry{}}
	for _, s := range subs {
		e := pendingJSONEntry{ID: s.ID, User: s.User, Problem: s.Problem, LastSend: s.LastSend,
			PendingSeconds: int64(now.Sub(s.LastSend) / time.Second), Rejudge: rejudgeCall{Method: "GET", Path: rejudgePath(s.ID)}}
		if until := rejudgeRefusedUntil(s.LastSend, now); !until.IsZero() {
			e.Rejudge.RefusedUntil = &until
		}
		out.Submissions = append(out.Submissions, e)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// statusPending is status's pending line: how many submissions have been
// pending past the configured age (a missing index is said, not failed:
// before the first 'run' it is not built yet).
func statusPending(ctx context.Context, w io.Writer, db *mongodb.DB, age time.Duration, now time.Time) error {
	if age <= 0 {
		fmt.Fprintf(w, "pending: not checked (%s_PENDING_AGE=0)\n", envPrefix)
		return nil
	}
	subs, err := db.PendingSubmissions(ctx, now.Add(-age))
	switch {
	case errors.Is(err, mongodb.ErrPendingIndexMissing):
		fmt.Fprintf(w, "pending: not checked: %v (the next 'run' builds it)\n", mongodb.ErrPendingIndexMissing)
		return nil
	case err != nil:
		return fmt.Errorf("find pending submissions: %w", err)
	}
	printStatusPending(w, subs, age, now)
	return nil
}

func printStatusPending(w io.Writer, subs []watch.PendingSubmission, age time.Duration, now time.Time) {
	if len(subs) == 0 {
		fmt.Fprintf(w, "pending: none over %s\n", age)
		return
	}
	fmt.Fprintf(w, "pending: %d submissions (status -1) over %s, oldest %s: results that never landed; 'materializer pending' lists their rejudge calls\n",
		len(subs), age, now.Sub(subs[0].LastSend).Round(time.Second))
}
