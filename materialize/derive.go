package materialize

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize/penalty"
)

// msPerDay converts a lateness in milliseconds to whole days.
const msPerDay = 86_400_000

// Entry is one derived homework.studentStatus.<user>.<problemId> value.
// Its start value (no contributing submission) is
// {score: 0, problemStatus: null, submissionIds: []} with no rawScore key,
// as Back-End's Homework.default_problem_status writes it.
type Entry struct {
	Score         int64
	ProblemStatus int64 // meaningful when HasStatus
	HasStatus     bool  // false: problemStatus is null
	SubmissionIDs []string
	RawScore      int64 // meaningful when HasRaw
	HasRaw        bool  // false: no rawScore key
}

// StartEntry returns the start value of an entry.
func StartEntry() Entry { return Entry{SubmissionIDs: []string{}} }

// UserStats are the derived fields of a user document: submission,
// AC_submission and AC_problem_ids (User.add_submission in mongo/user.py).
type UserStats struct {
	Submission   int64
	ACSubmission int64
	ACProblemIDs []int64
}

// HomeworkEntry is a derived entry for one homework.
type HomeworkEntry struct {
	Homework bson.ObjectID
	Entry    Entry
}

// PairResult is the derivation of one (user, problem) pair: the entry of
// every visited homework of the problem that has one, in the order of
// problem.homeworks, and the number of penalty errors met.
type PairResult struct {
	Entries       []HomeworkEntry
	PenaltyErrors int
}

// Deriver derives pairs and users. It caches compiled penalty programs by
// their text, so one program is compiled once however many homeworks or
// batches use it. A Deriver is not safe for concurrent use.
type Deriver struct {
	programs map[string]compiled

	// Trace, when not nil, is told every step of every Pair call (the
	// explain command sets it for one pair). Nil on every normal path: the
	// derivation then only tests it; the step is assembled in step, not in
	// locals of the hot loop.
	Trace PairTracer
	step  PairStep

	// reuse: results borrow the buffers below (a BulkDeriver's; see
	// there). Never set on a Deriver of NewDeriver or a zero one.
	reuse   bool
	entries []HomeworkEntry
	lists   []string
	ids     []byte
}

// BulkDeriver derives as a Deriver does, for a full derivation that
// compares every entry and keeps the few that drifted (watch.Rebuild, the
// offline commands), where a million submissions would otherwise allocate
// three times per pair and write 24 MB of fresh memory: a result of Pair
// or PairIn borrows the BulkDeriver's buffers. The result, its Entries,
// their SubmissionIDs and the id strings in them are valid only until the
// next Pair or PairIn, which overwrites them (the strings too: they view a
// reused byte buffer); so are the PairStep.Entry values a Trace is given.
// A caller keeping an entry keeps Entry.Clone(). The incremental path,
// which keeps every result, uses a Deriver. A BulkDeriver is not safe for
// concurrent use.
type BulkDeriver struct{ d Deriver }

// NewBulkDeriver returns a BulkDeriver with an empty program cache.
func NewBulkDeriver() *BulkDeriver { return NewDeriver().Bulk() }

// Bulk returns a BulkDeriver sharing d's compiled penalty programs and its
// Trace, with buffers of its own: d's results stay the caller's. d and the
// BulkDeriver must not be used concurrently (they share the cache).
func (d *Deriver) Bulk() *BulkDeriver {
	if d.programs == nil {
		d.programs = make(map[string]compiled)
	}
	return &BulkDeriver{d: Deriver{programs: d.programs, Trace: d.Trace, reuse: true}}
}

// Pair is Deriver.Pair; the result borrows b's buffers (see BulkDeriver).
func (b *BulkDeriver) Pair(user string, problem int64, subs []Submission, homeworks []*Homework) PairResult {
	return b.d.Pair(user, problem, subs, homeworks)
}

// PairIn is Deriver.PairIn; the result borrows b's buffers (see
// BulkDeriver).
func (b *BulkDeriver) PairIn(user string, problem int64, subs []Submission, holding []*Homework) PairResult {
	return b.d.PairIn(user, problem, subs, holding)
}

// Clone returns a deep copy of e: its SubmissionIDs and their strings
// share no memory with e's (see BulkDeriver).
func (e Entry) Clone() Entry {
	ids := make([]string, len(e.SubmissionIDs))
	n := 0
	for _, id := range e.SubmissionIDs {
		n += len(id)
	}
	// One string for all the ids: strings.Builder hands its buffer over.
	var all strings.Builder
	all.Grow(n)
	for _, id := range e.SubmissionIDs {
		all.WriteString(id)
	}
	s, off := all.String(), 0
	for i, id := range e.SubmissionIDs {
		ids[i] = s[off : off+len(id)]
		off += len(id)
	}
	e.SubmissionIDs = ids
	return e
}

// PairTracer observes Deriver.Pair step by step. Calls come in this order:
// PairStart once; then for each submission of the pair's input in
// (timestamp, _id) order, PairSubmission, followed (when it counts) by one
// PairStep per homework of PairStart, in that order. When no homework holds
// an entry for the pair, PairStart is the only call.
type PairTracer interface {
	// PairStart names the pair and the homeworks holding an entry for it,
	// in visiting order; each entry starts at StartEntry().
	PairStart(user string, problem int64, homeworks []*Homework)
	// PairSubmission reports one input submission; counts is false for a
	// submission of another pair, an unjudged one (see Judged) or a
	// handwritten one, which touch no entry.
	PairSubmission(s *Submission, counts bool)
	// PairStep reports one homework's entry after the last submission
	// reported reached it.
	PairStep(st PairStep)
}

// PairStep is one homework visited by one counting submission.
type PairStep struct {
	Homework *Homework
	// In is the score the submission brings to this homework: its stored
	// score, or the penalised score carried over from the previous
	// homework (a Back-End parity quirk).
	In int64
	// RawBefore is the entry's rawScore before the step (0 when the entry
	// had none).
	RawBefore int64
	// Late is timestamp > duration.end; LateDays is then
	// floor((timestamp - end) / 24h), the penalty's overtime.
	Late     bool
	LateDays int64
	// PenaltyRun says the penalty program was evaluated: late and In >
	// RawBefore. It was called with score = In - RawBefore and overtime =
	// LateDays and returned Gained, added to the entry's score; or it
	// failed with PenaltyErr (a program error, or a running score that
	// would leave int64), and gained 0.
	PenaltyRun bool
	Gained     int64
	PenaltyErr error
	// SetStatus says the submission set problemStatus (its score after the
	// step was >= the entry's score).
	SetStatus bool
	// Entry is the entry after the step. Its SubmissionIDs is a prefix of
	// the final one: later steps never change it, so it may be kept (with
	// a BulkDeriver, only until its next Pair or PairIn).
	Entry Entry
	// Out is the score carried to the next homework.
	Out int64
}

// ErrScoreOverflow is the penalty error of a running score that would
// leave int64 (the Back-End could not save it).
var ErrScoreOverflow = errors.New("running score would leave int64")

type compiled struct {
	prog *penalty.Program
	err  error
}

// NewDeriver returns a Deriver with an empty program cache.
func NewDeriver() *Deriver { return &Deriver{programs: make(map[string]compiled)} }

// program returns the compiled penalty program for src, compiling it once.
func (d *Deriver) program(src string) (*penalty.Program, error) {
	if c, ok := d.programs[src]; ok {
		return c.prog, c.err
	}
	if len(d.programs) >= 4096 { // bound the cache; programs are few in practice
		clear(d.programs)
	}
	p, err := penalty.Compile(src)
	d.programs[src] = compiled{p, err}
	return p, err
}

// ResolveHomeworks returns the homeworks a submission of problem p visits:
// p.Homeworks in stored order, a homework listed twice visited once (at its
// first position), one that no longer exists skipped. get returns nil for a
// missing homework.
func ResolveHomeworks(p *Problem, get func(bson.ObjectID) *Homework) []*Homework {
	if p == nil {
		return nil
	}
	out := make([]*Homework, 0, len(p.Homeworks))
	var seen map[bson.ObjectID]struct{}
	if len(p.Homeworks) > 8 {
		seen = make(map[bson.ObjectID]struct{}, len(p.Homeworks))
	}
	for i, id := range p.Homeworks {
		if seen != nil {
			if _, dup := seen[id]; dup {
				continue
			}
			seen[id] = struct{}{}
		} else if slices.Contains(p.Homeworks[:i], id) { // short lists: no map
			continue
		}
		if h := get(id); h != nil {
			out = append(out, h)
		}
	}
	return out
}

// SortSubmissions sorts subs in place by (timestamp, _id) ascending.
func SortSubmissions(subs []Submission) {
	if slices.IsSortedFunc(subs, cmpSubmission) {
		return
	}
	slices.SortFunc(subs, cmpSubmission)
}

func cmpSubmission(a, b Submission) int {
	switch {
	case a.Before(&b):
		return -1
	case b.Before(&a):
		return 1
	}
	return 0
}

// Pair derives the studentStatus entries of (user, problem) in homeworks
// (as returned by ResolveHomeworks for the problem): PairIn over those of
// them that hold an entry for the pair (Homework.HasEntry).
func (d *Deriver) Pair(user string, problem int64, subs []Submission, homeworks []*Homework) PairResult {
	// A problem is in a few homeworks: the list stays on the stack, and
	// the problem key is formatted once rather than per homework.
	var buf [4]*Homework
	holding := buf[:0]
	var pkBuf [20]byte
	pk := strconv.AppendInt(pkBuf[:0], problem, 10)
	for _, h := range homeworks {
		if _, ok := h.Students[user][string(pk)]; ok { // h.HasEntry(user, problem)
			holding = append(holding, h)
		}
	}
	return d.PairIn(user, problem, subs, holding)
}

// PairIn derives the studentStatus entries of (user, problem) in holding:
// the homeworks the problem's submissions visit (ResolveHomeworks) that
// hold an entry for the pair, in visiting order; the caller has resolved
// which do (Pair asks Homework.Students, the offline path its own index).
// The result has one entry per homework of holding, in its order. subs
// are the pair's submissions in any order (sorted in place); submissions
// of other pairs, unjudged and handwritten ones are ignored. It mirrors
// the studentStatus half of Submission.finish_judging and
// Homework.do_penalty (mongo/submission.py, mongo/homework.py) with the
// spec's deviations: a penalty error gains 0 and is counted, and so is a
// running score that would leave int64.
func (d *Deriver) PairIn(user string, problem int64, subs []Submission, holding []*Homework) PairResult {
	var res PairResult
	if d.Trace != nil {
		d.Trace.PairStart(user, problem, slices.Clone(holding))
	}
	if len(holding) == 0 {
		return res
	}
	SortSubmissions(subs)
	counts := func(s *Submission) bool {
		return s.User == user && s.Problem == problem && s.Judged() && !s.Handwritten
	}
	n := 0
	for i := range subs {
		if counts(&subs[i]) {
			n++
		}
	}
	// Three allocations per pair, whatever its size (none when reusing):
	// the entries; the ids of the counting submissions, hex-encoded into
	// one string (strings.Builder hands its buffer over as the string: no
	// copy); and one backing array for every entry's submissionIds, each
	// entry's slice capped at its end so an append by a holder copies.
	var allIDs string
	var lists []string
	if d.reuse {
		res.Entries = slices.Grow(d.entries[:0], len(holding))[:len(holding)]
		clear(res.Entries)
		d.entries = res.Entries
		d.ids = slices.Grow(d.ids[:0], 24*n)
		for i := range subs {
			if counts(&subs[i]) {
				d.ids = hex.AppendEncode(d.ids, subs[i].ID[:])
			}
		}
		if n > 0 {
			// Overwritten by the next call: BulkDeriver's documented contract.
			allIDs = unsafe.String(&d.ids[0], len(d.ids))
		}
		lists = slices.Grow(d.lists[:0], n*len(holding))[:n*len(holding)]
		if lists == nil {
			lists = []string{} // submissionIds: [], never null
		}
		d.lists = lists
	} else {
		res.Entries = make([]HomeworkEntry, len(holding))
		var ids strings.Builder
		ids.Grow(24 * n)
		var hexID [24]byte
		for i := range subs {
			if counts(&subs[i]) {
				hex.Encode(hexID[:], subs[i].ID[:])
				ids.Write(hexID[:])
			}
		}
		allIDs = ids.String()
		lists = make([]string, n*len(holding))
	}
	for j, h := range holding {
		res.Entries[j].Homework = h.ID
		res.Entries[j].Entry.SubmissionIDs = lists[j*n : j*n : (j+1)*n]
	}
	k := 0
	for i := range subs {
		s := &subs[i]
		if !counts(s) {
			if d.Trace != nil {
				d.Trace.PairSubmission(s, false)
			}
			continue
		}
		if d.Trace != nil {
			d.Trace.PairSubmission(s, true)
		}
		id := allIDs[24*k : 24*k+24]
		k++
		cur := s.Score
		for j, h := range holding {
			st := &res.Entries[j].Entry
			if !st.HasRaw {
				st.RawScore, st.HasRaw = 0, true
			}
			if d.Trace != nil {
				d.step = PairStep{Homework: h, In: cur, RawBefore: st.RawScore}
			}
			st.SubmissionIDs = append(st.SubmissionIDs, id)
			if s.Timestamp > h.End {
				if cur > st.RawScore { // delta = cur - rawScore > 0
					gained, err := d.penalty(h, cur, st.RawScore, s.Timestamp)
					if err == nil {
						sum, overflow := addInt64(st.Score, gained)
						if overflow {
							err = ErrScoreOverflow
						} else {
							st.Score = sum
						}
					}
					if err != nil {
						res.PenaltyErrors++
					}
					if d.Trace != nil {
						d.tracePenalty(gained, err)
					}
					st.RawScore = cur
				}
				cur = st.Score
			} else if cur > st.RawScore {
				st.RawScore = cur
			}
			if cur >= st.Score {
				st.Score = cur
				st.ProblemStatus, st.HasStatus = s.Status, true
			}
			if d.Trace != nil {
				d.traceStep(s, st, cur)
			}
		}
	}
	return res
}

// tracePenalty records the penalty evaluation of the step being traced.
func (d *Deriver) tracePenalty(gained int64, err error) {
	if err != nil {
		gained = 0
	}
	d.step.PenaltyRun, d.step.Gained, d.step.PenaltyErr = true, gained, err
}

// traceStep completes the step being traced with its outcome and reports
// it. After a step the entry's score equals cur exactly when the
// submission set problemStatus (otherwise the score stayed above cur).
func (d *Deriver) traceStep(s *Submission, st *Entry, cur int64) {
	if s.Timestamp > d.step.Homework.End {
		d.step.Late, d.step.LateDays = true, lateDays(s.Timestamp, d.step.Homework.End)
	}
	d.step.SetStatus = st.Score == cur
	d.step.Entry, d.step.Out = *st, cur
	d.Trace.PairStep(d.step)
	d.step = PairStep{}
}

// penalty evaluates h's program for a late submission whose running score
// is cur against rawScore raw: penalty(score=cur-raw, overtime=whole days
// late). The error is the program's compile or evaluation error.
func (d *Deriver) penalty(h *Homework, cur, raw, ts int64) (int64, error) {
	prog, err := d.program(h.Penalty)
	if err != nil {
		return 0, err
	}
	overtime := lateDays(ts, h.End)
	delta, overflow := subInt64(cur, raw)
	if overflow {
		return prog.EvalBig(new(big.Int).Sub(big.NewInt(cur), big.NewInt(raw)), big.NewInt(overtime))
	}
	return prog.Eval(delta, overtime)
}

// lateDays is the whole days from end to ts, for ts > end:
// floor((ts - end) / 24h). The difference is positive and fits in a uint64.
func lateDays(ts, end int64) int64 { return int64((uint64(ts) - uint64(end)) / msPerDay) }

func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0)
}

func subInt64(a, b int64) (int64, bool) {
	s := a - b
	return s, (a >= 0) != (b >= 0) && (s >= 0) != (a >= 0)
}

// UserTally accumulates one user's submissions into UserStats, in any
// order. It mirrors User.add_submission: every judged submission counts,
// whatever its language or problem; score == 100 counts as AC.
type UserTally struct {
	n, ac int64
	// firstAC holds each AC problem's first AC submission by (timestamp,
	// _id), sorted by problem: a user has tens of AC problems, which a
	// slice searches faster than a map of whole Submissions grows, and
	// groups fed in problem order only append.
	firstAC []firstAC
}

// firstAC is what UserTally keeps of a problem's first AC submission.
type firstAC struct {
	problem, timestamp int64
	id                 bson.ObjectID
}

// before is Submission.Before on the kept fields.
func (f *firstAC) before(g *firstAC) bool {
	if f.timestamp != g.timestamp {
		return f.timestamp < g.timestamp
	}
	return bytes.Compare(f.id[:], g.id[:]) < 0
}

// Add counts s if it is judged.
func (t *UserTally) Add(s *Submission) {
	if !s.Judged() {
		return
	}
	t.n++
	if s.Score != 100 {
		return
	}
	t.ac++
	t.addFirst(firstAC{problem: s.Problem, timestamp: s.Timestamp, id: s.ID})
}

// AddCounted adds n judged submissions, ac of them with score 100,
// counted elsewhere (a server-side aggregation); their first AC submission
// of each problem is added with AddFirstAC.
func (t *UserTally) AddCounted(n, ac int64) {
	t.n += n
	t.ac += ac
}

// AddFirstAC records the AC submission (timestamp, id) of problem; the
// earliest by (timestamp, _id) of each problem orders AC_problem_ids. It
// counts nothing.
func (t *UserTally) AddFirstAC(problem, timestamp int64, id bson.ObjectID) {
	t.addFirst(firstAC{problem: problem, timestamp: timestamp, id: id})
}

func (t *UserTally) addFirst(f firstAC) {
	n := len(t.firstAC)
	var i int
	var found bool
	switch {
	case n == 0 || t.firstAC[n-1].problem < f.problem:
		i = n
	case t.firstAC[n-1].problem == f.problem:
		i, found = n-1, true
	default:
		i, found = slices.BinarySearchFunc(t.firstAC, f.problem, func(a firstAC, p int64) int { return cmp.Compare(a.problem, p) })
	}
	if !found {
		t.firstAC = slices.Insert(t.firstAC, i, f)
	} else if f.before(&t.firstAC[i]) {
		t.firstAC[i] = f
	}
}

// reset empties t, keeping its memory for the next user.
func (t *UserTally) reset() {
	t.n, t.ac, t.firstAC = 0, 0, t.firstAC[:0]
}

// Stats returns the derived user fields; AC_problem_ids is ordered by each
// problem's first AC submission.
func (t *UserTally) Stats() UserStats {
	firsts := slices.Clone(t.firstAC)
	slices.SortFunc(firsts, func(a, b firstAC) int {
		switch {
		case a.before(&b):
			return -1
		case b.before(&a):
			return 1
		}
		return 0
	})
	st := UserStats{Submission: t.n, ACSubmission: t.ac, ACProblemIDs: make([]int64, 0, len(firsts))}
	for _, f := range firsts {
		st.ACProblemIDs = append(st.ACProblemIDs, f.problem)
	}
	return st
}

// DeriveUser returns the derived fields of a user from all its submissions.
func DeriveUser(subs []Submission) UserStats {
	var t UserTally
	for i := range subs {
		t.Add(&subs[i])
	}
	return t.Stats()
}
