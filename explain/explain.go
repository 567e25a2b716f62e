// Package explain shows how one student's derived values for one problem
// come about: the derivation of one (user, problem) pair, step by step, as
// `materializer explain` prints it. Explain runs the rebuild's own code
// (materialize.Builder) on an Input, what one pair reads, and takes the
// steps from the Deriver's trace. Read gathers an Input from a database
// (any Source, such as mongodb.DB); ReadDump from a mongodump directory,
// streaming it with memory bounded by the user's submissions.
//
// Explanation and the types it holds are the stable JSON contract of
// `explain --json` ("format 1", documented with explain's output in the
// docs): fields are only ever added. They live in a package of their own,
// public, so that a program reading that JSON can decode it with the
// types that define it.
package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// UnknownError says the user or the problem is unknown to the source.
type UnknownError struct{ msg string }

func (e *UnknownError) Error() string { return e.msg }

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
	ProblemHomeworks []Ref `json:"problemHomeworks"`
	// Submissions are the user's submissions to the problem in (timestamp,
	// _id) order, the order the derivation replays them in.
	Submissions []Submission `json:"submissions"`
	// Entries are the final studentStatus.<user>.<problem> entries, one
	// per homework holding one: listed homeworks in problem.homeworks
	// order, then the others by _id.
	Entries    []Entry `json:"entries"`
	UserCounts Counts  `json:"userCounts"`
	// PenaltyErrors counts failed penalty evaluations of this pair.
	PenaltyErrors int `json:"penaltyErrors"`
	// Drift is true when any entry or the user's counts differ from what is
	// stored (the daemon or rebuild writes the derived values).
	Drift bool `json:"drift"`
	// Malformed lists unreadable source documents met (they are skipped).
	Malformed []string `json:"malformed"`
}

// Ref is one reference of problem.homeworks.
type Ref struct {
	Position int    `json:"position"` // index in problem.homeworks
	Homework string `json:"homework"` // ObjectId hex
	// Status is "visited" (the user has an entry: derived), "no entry"
	// (the user has no entry there: nothing derived), "repeated" (listed
	// before at FirstPosition: visited once) or "dangling" (no such
	// homework, or an unreadable one: skipped).
	Status        string `json:"status"`
	FirstPosition *int   `json:"firstPosition,omitempty"`
}

// Submission is one submission and its steps.
type Submission struct {
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
	CountsForEntries bool   `json:"countsForEntries"`
	Note             string `json:"note"`
	Steps            []Step `json:"steps"` // one per homework with an entry, in visiting order
}

// Step is one homework's entry updated by one submission.
type Step struct {
	Homework string `json:"homework"`
	// In is the score brought to this homework: the submission's score, or
	// the penalised score carried over from the previous homework.
	In             int64 `json:"in"`
	Late           bool  `json:"late"`
	LateDays       int64 `json:"lateDays"` // whole days late (the penalty's overtime); 0 on time
	RawScoreBefore int64 `json:"rawScoreBefore"`
	ScoreBefore    int64 `json:"scoreBefore"`
	// Penalty is set when the program ran: late and In > rawScoreBefore.
	Penalty          *Penalty `json:"penalty,omitempty"`
	Score            int64    `json:"score"`
	RawScore         int64    `json:"rawScore"`
	ProblemStatus    *int64   `json:"problemStatus"`
	SetProblemStatus bool     `json:"setProblemStatus"`
	Carried          int64    `json:"carried"` // the score the next homework sees
}

// Penalty is one evaluation of a homework's penalty program.
type Penalty struct {
	Score    json.Number `json:"score"` // the program's score: in - rawScoreBefore
	Overtime int64       `json:"overtime"`
	// Returned is the program's result, added to the entry's score; 0 on
	// an error (the error is counted, the Back-End would raise).
	Returned int64  `json:"returned"`
	Error    string `json:"error,omitempty"`
}

// Entry is one final entry next to the stored one.
type Entry struct {
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

// Counts is the user's derived counts next to the stored ones.
type Counts struct {
	// Document is false when no user document exists; the daemon never
	// creates one, so nothing is written.
	Document bool            `json:"document"`
	Derived  json.RawMessage `json:"derived"`
	Stored   json.RawMessage `json:"stored"` // null when absent or unreadable
	Drift    bool            `json:"drift"`
}

// Explain derives the pair in holds and explains it. It runs the same code
// as a rebuild, materialize.Builder over a catalog of the problem and the
// homeworks that matter to the pair, fed every submission of the user,
// and takes the steps from the Deriver's trace. It returns an
// *UnknownError when the user (no document, no submission, no entry for
// the problem) or the problem (no document, no entry, no submission of the
// user to it) is unknown to the source in was read from. Explanation.Source
// is left for the caller to fill in.
func Explain(in *Input) (*Explanation, error) {
	user, problem, prob, hws := in.User, in.Problem, in.ProblemDoc, in.Homeworks
	ex := &Explanation{Format: 1, User: user, Problem: problem,
		ProblemHomeworks: []Ref{}, Submissions: []Submission{}, Entries: []Entry{}, Malformed: []string{}}
	for _, d := range in.Malformed {
		ex.Malformed = append(ex.Malformed, d.Error())
	}
	var own, pairSubs []materialize.Submission
	for _, s := range in.Submissions {
		if s.User == user {
			own = append(own, s)
			if s.Problem == problem {
				pairSubs = append(pairSubs, s)
			}
		}
	}
	switch {
	case !in.HasUser && len(own) == 0 && !in.HasEntry:
		return nil, &UnknownError{fmt.Sprintf("unknown user %q: no user document, no submission and no studentStatus entry for problem %d", user, problem)}
	case prob == nil && !in.Held && len(pairSubs) == 0:
		return nil, &UnknownError{fmt.Sprintf("unknown problem %d: no problem document, no studentStatus entry and no submission of %q to it", problem, user)}
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
	ex.UserCounts = Counts{Document: in.HasUser, Derived: userJSON(sink.stats), Stored: json.RawMessage("null")}
	if in.HasUser {
		su := in.StoredUser
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
		r := Ref{Position: i, Homework: id.Hex()}
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
		es := Submission{ID: s.ID.Hex(), Timestamp: fmtMillis(s.Timestamp), Status: s.Status, Score: s.Score,
			Handwritten: s.Handwritten, Judged: s.Judged(), CountsForEntries: t.counts, Steps: []Step{}}
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
			x := Step{Homework: st.Homework.ID.Hex(), In: st.In, Late: st.Late, LateDays: st.LateDays,
				RawScoreBefore: st.RawBefore, ScoreBefore: before.Score, Score: st.Entry.Score, RawScore: st.Entry.RawScore,
				SetProblemStatus: st.SetStatus, Carried: st.Out}
			if st.Entry.HasStatus {
				v := st.Entry.ProblemStatus
				x.ProblemStatus = &v
			}
			if st.PenaltyRun {
				p := &Penalty{Score: json.Number(new(big.Int).Sub(big.NewInt(st.In), big.NewInt(st.RawBefore)).String()),
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
		ee := Entry{Homework: id.Hex(), Deadline: fmtMillis(h.End), Penalty: h.Penalty,
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
