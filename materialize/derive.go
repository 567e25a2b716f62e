package materialize

import (
	"encoding/hex"
	"math/big"
	"slices"

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
}

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
// (as returned by ResolveHomeworks for the problem). subs are the pair's
// submissions in any order (sorted in place); submissions of other pairs,
// unjudged and handwritten ones are ignored. It mirrors the studentStatus
// half of Submission.finish_judging and Homework.do_penalty
// (mongo/submission.py, mongo/homework.py) with the spec's deviations: a
// penalty error gains 0 and is counted, and so is a running score that would
// leave int64.
func (d *Deriver) Pair(user string, problem int64, subs []Submission, homeworks []*Homework) PairResult {
	var res PairResult
	type slot struct {
		hw *Homework
		e  Entry
	}
	slots := make([]slot, 0, len(homeworks))
	for _, h := range homeworks {
		if h.HasEntry(user, problem) {
			slots = append(slots, slot{hw: h})
		}
	}
	if len(slots) == 0 {
		return res
	}
	SortSubmissions(subs)
	counts := func(s *Submission) bool {
		return s.User == user && s.Problem == problem && s.Judged() && !s.Handwritten
	}
	// The ids of the counting submissions, hex-encoded into one string
	// (one allocation per pair, not one per submission), and each entry's
	// list allocated at its final size.
	n := 0
	for i := range subs {
		if counts(&subs[i]) {
			n++
		}
	}
	hexIDs := make([]byte, 0, 24*n)
	for i := range subs {
		if counts(&subs[i]) {
			hexIDs = hex.AppendEncode(hexIDs, subs[i].ID[:])
		}
	}
	allIDs := string(hexIDs)
	for j := range slots {
		slots[j].e.SubmissionIDs = make([]string, 0, n)
	}
	k := 0
	for i := range subs {
		s := &subs[i]
		if !counts(s) {
			continue
		}
		id := allIDs[24*k : 24*k+24]
		k++
		cur := s.Score
		for j := range slots {
			st := &slots[j].e
			h := slots[j].hw
			if !st.HasRaw {
				st.RawScore, st.HasRaw = 0, true
			}
			st.SubmissionIDs = append(st.SubmissionIDs, id)
			if s.Timestamp > h.End {
				if cur > st.RawScore { // delta = cur - rawScore > 0
					gained, ok := d.penalty(h, cur, st.RawScore, s.Timestamp)
					if ok {
						sum, overflow := addInt64(st.Score, gained)
						if overflow {
							ok = false
						} else {
							st.Score = sum
						}
					}
					if !ok {
						res.PenaltyErrors++
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
		}
	}
	res.Entries = make([]HomeworkEntry, len(slots))
	for i, sl := range slots {
		res.Entries[i] = HomeworkEntry{Homework: sl.hw.ID, Entry: sl.e}
	}
	return res
}

// penalty evaluates h's program for a late submission whose running score
// is cur against rawScore raw: penalty(score=cur-raw, overtime=whole days
// late). ok is false on any penalty error.
func (d *Deriver) penalty(h *Homework, cur, raw, ts int64) (int64, bool) {
	prog, err := d.program(h.Penalty)
	if err != nil {
		return 0, false
	}
	// ts > h.End, so the difference is positive and fits in a uint64.
	overtime := int64((uint64(ts) - uint64(h.End)) / msPerDay)
	delta, overflow := subInt64(cur, raw)
	var gained int64
	if overflow {
		gained, err = prog.EvalBig(new(big.Int).Sub(big.NewInt(cur), big.NewInt(raw)), big.NewInt(overtime))
	} else {
		gained, err = prog.Eval(delta, overtime)
	}
	return gained, err == nil
}

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
	n, ac   int64
	firstAC map[int64]Submission // problem → first AC submission by (timestamp, _id)
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
	if t.firstAC == nil {
		t.firstAC = make(map[int64]Submission)
	}
	if f, ok := t.firstAC[s.Problem]; !ok || s.Before(&f) {
		t.firstAC[s.Problem] = *s
	}
}

// Stats returns the derived user fields; AC_problem_ids is ordered by each
// problem's first AC submission.
func (t *UserTally) Stats() UserStats {
	st := UserStats{Submission: t.n, ACSubmission: t.ac, ACProblemIDs: make([]int64, 0, len(t.firstAC))}
	firsts := make([]Submission, 0, len(t.firstAC))
	for _, s := range t.firstAC {
		firsts = append(firsts, s)
	}
	slices.SortFunc(firsts, cmpSubmission)
	for _, s := range firsts {
		st.ACProblemIDs = append(st.ACProblemIDs, s.Problem)
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
