package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/mongodb"
	"github.com/normal-oj/noj-materializer/watch"
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
	var src watch.Source
	var where string
	if isOffline {
		st, from, err := loadOfflineStore(ctx, env, *dumpDir, cfg.Database)
		if err != nil {
			return err
		}
		src, where = st, from
	} else {
		sayConnecting(env.stderr, cfg)
		cfg.allowStandalone = true // read-only: no change stream needed
		cfg.readOnly = true        // and no index build
		db, err := openMongo(ctx, cfg, zerolog.Nop())
		if err != nil {
			return err
		}
		defer closeMongo(db, zerolog.Nop())
		src, where = db, mongodb.Redact(cfg.MongoDBURI)+" database "+cfg.Database
	}
	ex, err := Explain(ctx, src, *user, problem)
	if err != nil {
		var unknown *unknownError
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
	ex.print(env.stdout)
	return nil
}

// unknownError says the user or the problem is unknown to the source.
type unknownError struct{ msg string }

func (e *unknownError) Error() string { return e.msg }

// Explanation is the derivation of one (user, problem) pair, as `explain
// --json` prints it. Its shape is stable (Format 1); fields are only ever
// added. Times are RFC 3339 in UTC with milliseconds; stored values are
// relaxed Extended JSON; derived entries have the stored shape
// {score, problemStatus, submissionIds[, rawScore]}.
type Explanation struct {
	Format  int    `json:"format"` // 1
	User    string `json:"user"`
	Problem int64  `json:"problem"`
	Source  string `json:"source"` // the redacted URI and database, or "dump DIR"
	// ProblemFound is false when no problem document exists: no homework
	// is then visited and every entry for the pair holds the start value.
	ProblemFound bool `json:"problemFound"`
	// ProblemHomeworks is problem.homeworks as stored, with what the
	// derivation does with each reference.
	ProblemHomeworks []ExplainRef `json:"problemHomeworks"`
	// Submissions are the user's submissions to the problem in (timestamp,
	// _id) order, the order the derivation replays them in.
	Submissions []ExplainSubmission `json:"submissions"`
	// Entries are the final studentStatus.<user>.<problem> entries, one
	// per homework holding one: listed homeworks in problem.homeworks
	// order, then the others by _id.
	Entries    []ExplainEntry `json:"entries"`
	UserCounts ExplainUser    `json:"userCounts"`
	// PenaltyErrors counts failed penalty evaluations of this pair.
	PenaltyErrors int `json:"penaltyErrors"`
	// Drift is true when any entry or the user's counts differ from what is
	// stored (the daemon or rebuild writes the derived values).
	Drift bool `json:"drift"`
	// Malformed lists unreadable source documents met (they are skipped).
	Malformed []string `json:"malformed"`
}

// ExplainRef is one reference of problem.homeworks.
type ExplainRef struct {
	Position int    `json:"position"` // index in problem.homeworks
	Homework string `json:"homework"` // ObjectId hex
	// Status is "visited" (the user has an entry: derived), "no entry"
	// (the user has no entry there: nothing derived), "repeated" (listed
	// before at FirstPosition: visited once) or "dangling" (no such
	// homework, or an unreadable one: skipped).
	Status        string `json:"status"`
	FirstPosition *int   `json:"firstPosition,omitempty"`
}

// ExplainSubmission is one submission and its steps.
type ExplainSubmission struct {
	ID          string `json:"id"`
	Timestamp   string `json:"timestamp"`
	Status      int64  `json:"status"`
	Score       int64  `json:"score"`
	Handwritten bool   `json:"handwritten"` // languageType 3
	// Judged: it counts on the user (submission, AC_submission); see
	// materialize.Submission.Judged (a rejudge in flight counts).
	Judged bool `json:"judged"`
	// CountsForEntries: it reached the pair's entries (judged, not
	// handwritten). False when no homework holds an entry for the pair.
	CountsForEntries bool          `json:"countsForEntries"`
	Note             string        `json:"note"`
	Steps            []ExplainStep `json:"steps"` // one per homework with an entry, in visiting order
}

// ExplainStep is one homework's entry updated by one submission.
type ExplainStep struct {
	Homework string `json:"homework"`
	// In is the score brought to this homework: the submission's score, or
	// the penalised score carried over from the previous homework.
	In             int64 `json:"in"`
	Late           bool  `json:"late"`
	LateDays       int64 `json:"lateDays"` // whole days late (the penalty's overtime); 0 on time
	RawScoreBefore int64 `json:"rawScoreBefore"`
	ScoreBefore    int64 `json:"scoreBefore"`
	// Penalty is set when the program ran: late and In > rawScoreBefore.
	Penalty          *ExplainPenalty `json:"penalty,omitempty"`
	Score            int64           `json:"score"`
	RawScore         int64           `json:"rawScore"`
	ProblemStatus    *int64          `json:"problemStatus"`
	SetProblemStatus bool            `json:"setProblemStatus"`
	Carried          int64           `json:"carried"` // the score the next homework sees
}

// ExplainPenalty is one evaluation of a homework's penalty program.
type ExplainPenalty struct {
	Score    json.Number `json:"score"` // the program's score: in - rawScoreBefore
	Overtime int64       `json:"overtime"`
	// Returned is the program's result, added to the entry's score; 0 on
	// an error (the error is counted, the Back-End would raise).
	Returned int64  `json:"returned"`
	Error    string `json:"error,omitempty"`
}

// ExplainEntry is one final entry next to the stored one.
type ExplainEntry struct {
	Homework string `json:"homework"`
	Deadline string `json:"deadline"` // duration.end
	Penalty  string `json:"penalty"`  // the program text
	// Position is the homework's first index in problem.homeworks; null
	// when the problem does not list it (its entry is reset to the start
	// value: no submission reaches it).
	Position *int            `json:"position"`
	Derived  json.RawMessage `json:"derived"`
	Stored   json.RawMessage `json:"stored"`
	Drift    bool            `json:"drift"`
}

// ExplainUser is the user's derived counts next to the stored ones.
type ExplainUser struct {
	// Document is false when no user document exists; the daemon never
	// creates one, so nothing is written.
	Document bool            `json:"document"`
	Derived  json.RawMessage `json:"derived"`
	Stored   json.RawMessage `json:"stored"` // null when absent or unreadable
	Drift    bool            `json:"drift"`
}

// Explain derives the pair (user, problem) from src and explains it. It
// runs the same code as a rebuild, materialize.Builder over a catalog of
// the problem and the homeworks that matter to the pair, fed every
// submission of the user, and takes the steps from the Deriver's trace. It
// returns an *unknownError when the user (no document, no submission, no
// entry for the problem) or the problem (no document, no entry, no
// submission of the user to it) is unknown to src. It writes nothing.
func Explain(ctx context.Context, src watch.Source, user string, problem int64) (*Explanation, error) {
	ex := &Explanation{Format: 1, User: user, Problem: problem,
		ProblemHomeworks: []ExplainRef{}, Submissions: []ExplainSubmission{}, Entries: []ExplainEntry{}, Malformed: []string{}}
	bad := func(ds []*materialize.DecodeError) {
		for _, d := range ds {
			ex.Malformed = append(ex.Malformed, d.Error())
		}
	}
	subs, b, err := src.Submissions(ctx, []string{user}, nil)
	if err != nil {
		return nil, fmt.Errorf("read submissions: %w", err)
	}
	bad(b)
	users, err := src.Users(ctx, []string{user})
	if err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	problems, b, err := src.Problems(ctx, []int64{problem})
	if err != nil {
		return nil, fmt.Errorf("read problems: %w", err)
	}
	bad(b)
	prob := problems[problem]
	holders, err := src.EntriesForProblems(ctx, []int64{problem})
	if err != nil {
		return nil, fmt.Errorf("read entries of problem: %w", err)
	}
	var ids []bson.ObjectID
	if prob != nil {
		ids = append(ids, prob.Homeworks...)
	}
	for _, hu := range holders[problem] {
		if hu.User == user {
			ids = append(ids, hu.Homework)
		}
	}
	slices.SortFunc(ids, func(a, b bson.ObjectID) int { return bytes.Compare(a[:], b[:]) })
	ids = slices.Compact(ids)
	hws := map[bson.ObjectID]*watch.HomeworkDoc{}
	if len(ids) > 0 {
		if hws, b, err = src.Homeworks(ctx, ids, []string{user}); err != nil {
			return nil, fmt.Errorf("read homeworks: %w", err)
		}
		bad(b)
		for _, h := range hws {
			bad(h.Skipped)
		}
	}

	var own, pairSubs []materialize.Submission
	for _, s := range subs {
		if s.User == user {
			own = append(own, s)
			if s.Problem == problem {
				pairSubs = append(pairSubs, s)
			}
		}
	}
	_, hasDoc := users[user]
	hasEntry := slices.ContainsFunc(holders[problem], func(hu materialize.HomeworkUser) bool { return hu.User == user })
	switch {
	case !hasDoc && len(own) == 0 && !hasEntry:
		return nil, &unknownError{fmt.Sprintf("unknown user %q: no user document, no submission and no studentStatus entry for problem %d", user, problem)}
	case prob == nil && len(holders[problem]) == 0 && len(pairSubs) == 0:
		return nil, &unknownError{fmt.Sprintf("unknown problem %d: no problem document, no studentStatus entry and no submission of %q to it", problem, user)}
	}
	ex.ProblemFound = prob != nil

	// The rebuild's derivation, restricted to what the pair reads.
	cat := materialize.NewCatalog()
	if prob != nil {
		cat.AddProblem(*prob)
	}
	for _, h := range hws {
		cat.AddHomework(h.Homework)
	}
	sink := &explainSink{user: user, key: materialize.ProblemKey(problem), entries: map[bson.ObjectID]materialize.Entry{}}
	d := materialize.NewDeriver()
	tr := &pairTrace{}
	builder := materialize.NewBuilder(d, cat, sink)
	materialize.SortGrouped(own)
	var gerr error
	materialize.ForEachGroup(own, func(u string, p int64, g []materialize.Submission) {
		if gerr != nil {
			return
		}
		d.Trace = nil
		if p == problem {
			d.Trace = tr
		}
		gerr = builder.Group(u, p, g)
	})
	d.Trace = nil
	if gerr != nil {
		return nil, gerr
	}
	if err := builder.Finish([]string{user}); err != nil {
		return nil, err
	}
	ex.PenaltyErrors = tr.penaltyErrors

	ex.explainRefs(prob, hws)
	ex.explainSubmissions(tr, pairSubs)
	ex.explainEntries(prob, hws, sink.entries)
	su, ok := users[user]
	ex.UserCounts = ExplainUser{Document: ok, Derived: userJSON(sink.stats), Stored: json.RawMessage("null")}
	if ok {
		if su.OK {
			ex.UserCounts.Stored = userJSON(su.Stats)
		}
		ex.UserCounts.Drift = !su.OK || !su.Stats.Equal(sink.stats)
		ex.Drift = ex.Drift || ex.UserCounts.Drift
	}
	return ex, nil
}

// explainSink keeps what the builder derives for the explained user and
// problem key, and drops the rest (the user's other problems).
type explainSink struct {
	user, key string
	stats     materialize.UserStats
	entries   map[bson.ObjectID]materialize.Entry
}

func (s *explainSink) User(name string, st materialize.UserStats) error {
	if name == s.user {
		s.stats = st
	}
	return nil
}

func (s *explainSink) Entry(h bson.ObjectID, user, pk string, e materialize.Entry) error {
	if user == s.user && pk == s.key {
		s.entries[h] = e
	}
	return nil
}

// pairTrace records the Deriver's trace of the explained pair.
type pairTrace struct {
	homeworks     []*materialize.Homework
	subs          []tracedSub
	penaltyErrors int
}

type tracedSub struct {
	s      materialize.Submission
	counts bool
	steps  []materialize.PairStep
}

func (t *pairTrace) PairStart(_ string, _ int64, hs []*materialize.Homework) {
	t.homeworks = hs
}

func (t *pairTrace) PairSubmission(s *materialize.Submission, counts bool) {
	t.subs = append(t.subs, tracedSub{s: *s, counts: counts})
}

func (t *pairTrace) PairStep(st materialize.PairStep) {
	last := &t.subs[len(t.subs)-1]
	last.steps = append(last.steps, st)
	if st.PenaltyErr != nil {
		t.penaltyErrors++
	}
}

func (ex *Explanation) explainRefs(prob *materialize.Problem, hws map[bson.ObjectID]*watch.HomeworkDoc) {
	if prob == nil {
		return
	}
	first := map[bson.ObjectID]int{}
	for i, id := range prob.Homeworks {
		r := ExplainRef{Position: i, Homework: id.Hex()}
		h, exists := hws[id]
		j, seen := first[id]
		switch {
		case seen:
			r.Status, r.FirstPosition = "repeated", &j
		case !exists:
			r.Status = "dangling"
		case h.HasEntry(ex.User, ex.Problem):
			r.Status = "visited"
		default:
			r.Status = "no entry"
		}
		if !seen {
			first[id] = i
		}
		ex.ProblemHomeworks = append(ex.ProblemHomeworks, r)
	}
}

func (ex *Explanation) explainSubmissions(tr *pairTrace, pairSubs []materialize.Submission) {
	traced := tr.subs
	if len(tr.homeworks) == 0 {
		// No homework holds an entry: Pair stopped before the submissions.
		materialize.SortSubmissions(pairSubs)
		traced = make([]tracedSub, len(pairSubs))
		for i, s := range pairSubs {
			traced[i] = tracedSub{s: s}
		}
	}
	prev := map[bson.ObjectID]materialize.Entry{} // each homework's entry before the step
	for _, t := range traced {
		s := t.s
		es := ExplainSubmission{ID: s.ID.Hex(), Timestamp: fmtMillis(s.Timestamp), Status: s.Status, Score: s.Score,
			Handwritten: s.Handwritten, Judged: s.Judged(), CountsForEntries: t.counts, Steps: []ExplainStep{}}
		switch {
		case s.Status == materialize.StatusCreated:
			es.Note = "not judged (status -2: created): counts nowhere"
		case !es.Judged:
			es.Note = "not judged (status -1: pending, no score yet): counts nowhere"
		case s.Status == materialize.StatusPending:
			es.Note = "rejudge in flight (status -1 with its stored score): counts with that score and status -1"
		default:
			es.Note = "judged"
		}
		switch {
		case es.Judged && s.Handwritten:
			es.Note += "; handwritten (languageType 3): counts on the user, never touches studentStatus"
		case es.Judged && len(tr.homeworks) == 0:
			es.Note += "; no homework holds an entry for the pair: counts on the user only"
		}
		for _, st := range t.steps {
			before, ok := prev[st.Homework.ID]
			if !ok {
				before = materialize.StartEntry()
			}
			prev[st.Homework.ID] = st.Entry
			x := ExplainStep{Homework: st.Homework.ID.Hex(), In: st.In, Late: st.Late, LateDays: st.LateDays,
				RawScoreBefore: st.RawBefore, ScoreBefore: before.Score, Score: st.Entry.Score, RawScore: st.Entry.RawScore,
				SetProblemStatus: st.SetStatus, Carried: st.Out}
			if st.Entry.HasStatus {
				v := st.Entry.ProblemStatus
				x.ProblemStatus = &v
			}
			if st.PenaltyRun {
				p := &ExplainPenalty{Score: json.Number(new(big.Int).Sub(big.NewInt(st.In), big.NewInt(st.RawBefore)).String()),
					Overtime: st.LateDays, Returned: st.Gained}
				if st.PenaltyErr != nil {
					p.Error = st.PenaltyErr.Error()
				}
				x.Penalty = p
			}
			es.Steps = append(es.Steps, x)
		}
		ex.Submissions = append(ex.Submissions, es)
	}
}

func (ex *Explanation) explainEntries(prob *materialize.Problem, hws map[bson.ObjectID]*watch.HomeworkDoc, derived map[bson.ObjectID]materialize.Entry) {
	pos := map[bson.ObjectID]int{}
	if prob != nil {
		for i, id := range prob.Homeworks {
			if _, ok := pos[id]; !ok {
				pos[id] = i
			}
		}
	}
	ids := make([]bson.ObjectID, 0, len(derived))
	for id := range derived {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b bson.ObjectID) int {
		pa, la := pos[a]
		pb, lb := pos[b]
		switch {
		case la && lb:
			return pa - pb
		case la != lb:
			if la {
				return -1
			}
			return 1
		}
		return bytes.Compare(a[:], b[:])
	})
	key := materialize.ProblemKey(ex.Problem)
	for _, id := range ids {
		h := hws[id]
		e := derived[id]
		ee := ExplainEntry{Homework: id.Hex(), Deadline: fmtMillis(h.End), Penalty: h.Penalty,
			Derived: extJSON(e.Doc()), Stored: json.RawMessage("null"), Drift: true}
		if p, ok := pos[id]; ok {
			ee.Position = &p
		}
		if v, ok := h.Stored[ex.User][key]; ok {
			ee.Stored = rawValueJSON(v)
			ee.Drift = !e.MatchesStored(v)
		}
		ex.Drift = ex.Drift || ee.Drift
		ex.Entries = append(ex.Entries, ee)
	}
}

func userJSON(st materialize.UserStats) json.RawMessage { return extJSON(st.Fields()) }

// extJSON renders a document as relaxed Extended JSON.
func extJSON(d bson.D) json.RawMessage {
	b, err := bson.MarshalExtJSON(d, false, false)
	if err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return b
}

// rawValueJSON renders a stored value of any BSON type as relaxed
// Extended JSON.
func rawValueJSON(v bson.RawValue) json.RawMessage {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	if err != nil {
		return json.RawMessage(strconv.Quote(v.String()))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return json.RawMessage(strconv.Quote(v.String()))
	}
	return m["v"]
}

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// print writes the explanation for a person.
func (ex *Explanation) print(w io.Writer) {
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
