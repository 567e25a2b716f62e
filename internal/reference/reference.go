// Package reference is an independent, deliberately simple and slow
// derivation of Normal-OJ's derived data, written straight from
// docs/derivation-spec.md for use as a test oracle. It shares no code with
// package materialize: it decodes the stored BSON itself (through bson.D),
// orders submissions itself, and compares stored with derived values by
// value, not by BSON type. Only the penalty program is evaluated with
// materialize/penalty, whose evaluator is proven separately against
// CPython (materialize/penalty/testdata/penalty.jsonl).
//
// It is imported only by tests.
package reference

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize/penalty"
)

// DB holds whole source collections as stored documents.
type DB struct {
	Users, Problems, Homeworks, Submissions []bson.Raw
}

// User is the derived part of a user document.
type User struct {
	Submission   int64
	ACSubmission int64
	ACProblemIDs []int64
}

// Entry is a derived homework.studentStatus.<user>.<problemId> value.
// ProblemStatus nil is null; RawScore nil is "no rawScore key".
type Entry struct {
	Score         int64
	ProblemStatus *int64
	SubmissionIDs []string
	RawScore      *int64
}

// Result is the derivation of a whole database.
type Result struct {
	// Users holds every user document's derived fields, and those of
	// usernames with submissions but no document.
	Users map[string]User
	// Entries: homework _id (hex) → username → problem key → entry, for
	// every existing entry of every readable homework.
	Entries       map[string]map[string]map[string]Entry
	PenaltyErrors int
	// Malformed names the documents (or parts) skipped as unreadable.
	Malformed []string
}

type submission struct {
	id          string // 24 hex digits
	user        string
	problem     int64
	handwritten bool
	timestamp   int64 // ms
	status      int64
	score       int64
}

// judged: finished judging, or a rejudge in flight (status -1, score >= 0).
func (s submission) judged() bool {
	if s.status == -2 {
		return false
	}
	if s.status == -1 {
		return s.score >= 0
	}
	return true
}

type homework struct {
	id       string
	end      int64
	penalty  string
	students map[string]map[string]bool // user → problem key → has entry
}

type problem struct {
	id        int64
	homeworks []string
}

// defaultEnd is Duration.end's default, datetime(2111, 10, 10) UTC.
var defaultEnd = time.Date(2111, 10, 10, 0, 0, 0, 0, time.UTC).UnixMilli()

// field returns the value of key in d (the first occurrence) and whether
// it is present and not null.
func field(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, e.Value != nil
		}
	}
	return nil, false
}

// whole reads a number holding a whole value: int32, int64 or a double.
func whole(v any) (int64, bool) {
	switch n := v.(type) {
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && n >= -9.223372036854775808e18 && n < 9.223372036854775808e18 {
			return int64(n), true
		}
	}
	return 0, false
}

func unmarshal(raw bson.Raw) (bson.D, error) {
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	return d, nil
}

func decodeSubmission(raw bson.Raw) (submission, error) {
	var s submission
	d, err := unmarshal(raw)
	if err != nil {
		return s, err
	}
	v, ok := field(d, "_id")
	oid, isOID := v.(bson.ObjectID)
	if !ok || !isOID {
		return s, fmt.Errorf("submission _id %v", v)
	}
	s.id = oid.Hex()
	if v, ok = field(d, "user"); !ok {
		return s, fmt.Errorf("submission %s: no user", s.id)
	}
	if s.user, ok = v.(string); !ok {
		return s, fmt.Errorf("submission %s: user %T", s.id, v)
	}
	if v, ok = field(d, "problem"); !ok {
		return s, fmt.Errorf("submission %s: no problem", s.id)
	}
	if s.problem, ok = whole(v); !ok {
		return s, fmt.Errorf("submission %s: problem %v", s.id, v)
	}
	if v, ok = field(d, "timestamp"); !ok {
		return s, fmt.Errorf("submission %s: no timestamp", s.id)
	}
	ts, ok := v.(bson.DateTime)
	if !ok {
		return s, fmt.Errorf("submission %s: timestamp %T", s.id, v)
	}
	s.timestamp = int64(ts)
	opt := func(key string, def int64) (int64, error) {
		v, ok := field(d, key)
		if !ok {
			return def, nil
		}
		n, ok := whole(v)
		if !ok {
			return 0, fmt.Errorf("submission %s: %s %v", s.id, key, v)
		}
		return n, nil
	}
	lang, err := opt("languageType", 0)
	if err != nil {
		return s, err
	}
	s.handwritten = lang == 3
	if s.status, err = opt("status", -2); err != nil {
		return s, err
	}
	if s.score, err = opt("score", -1); err != nil {
		return s, err
	}
	return s, nil
}

func decodeHomework(raw bson.Raw) (homework, error) {
	h := homework{end: defaultEnd, penalty: "score = 0", students: map[string]map[string]bool{}}
	d, err := unmarshal(raw)
	if err != nil {
		return h, err
	}
	v, _ := field(d, "_id")
	oid, ok := v.(bson.ObjectID)
	if !ok {
		return h, fmt.Errorf("homework _id %v", v)
	}
	h.id = oid.Hex()
	if v, ok := field(d, "duration"); ok {
		dur, isDoc := v.(bson.D)
		if !isDoc {
			return h, fmt.Errorf("homework %s: duration %T", h.id, v)
		}
		if e, ok := field(dur, "end"); ok {
			end, isDate := e.(bson.DateTime)
			if !isDate {
				return h, fmt.Errorf("homework %s: duration.end %T", h.id, e)
			}
			h.end = int64(end)
		}
	}
	if v, ok := field(d, "penalty"); ok {
		if h.penalty, ok = v.(string); !ok {
			return h, fmt.Errorf("homework %s: penalty %T", h.id, v)
		}
	}
	if v, ok := field(d, "studentStatus"); ok {
		ss, isDoc := v.(bson.D)
		if !isDoc {
			return h, fmt.Errorf("homework %s: studentStatus %T", h.id, v)
		}
		for _, ue := range ss {
			ud, isDoc := ue.Value.(bson.D)
			if !isDoc {
				continue // a user's value that is not a document holds no entries
			}
			set := map[string]bool{}
			for _, pe := range ud {
				set[pe.Key] = true
			}
			h.students[ue.Key] = set
		}
	}
	return h, nil
}

func decodeProblem(raw bson.Raw) (problem, error) {
	var p problem
	d, err := unmarshal(raw)
	if err != nil {
		return p, err
	}
	v, _ := field(d, "_id")
	id, ok := whole(v)
	if !ok {
		return p, fmt.Errorf("problem _id %v", v)
	}
	p.id = id
	if v, ok := field(d, "homeworks"); ok {
		arr, isArr := v.(bson.A)
		if !isArr {
			return p, fmt.Errorf("problem %d: homeworks %T", id, v)
		}
		for _, x := range arr {
			oid, isOID := x.(bson.ObjectID)
			if !isOID {
				return p, fmt.Errorf("problem %d: homeworks element %T", id, x)
			}
			p.homeworks = append(p.homeworks, oid.Hex())
		}
	}
	return p, nil
}

// Derive computes every derived value of db.
func Derive(db DB) *Result {
	res := &Result{Users: map[string]User{}, Entries: map[string]map[string]map[string]Entry{}}
	var subs []submission
	for _, raw := range db.Submissions {
		s, err := decodeSubmission(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.Error())
			continue
		}
		subs = append(subs, s)
	}
	// (timestamp, _id) ascending; the hex of an ObjectId orders like its
	// bytes.
	sort.SliceStable(subs, func(i, j int) bool {
		if subs[i].timestamp != subs[j].timestamp {
			return subs[i].timestamp < subs[j].timestamp
		}
		return subs[i].id < subs[j].id
	})
	hws := map[string]homework{}
	for _, raw := range db.Homeworks {
		h, err := decodeHomework(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.Error())
			continue
		}
		hws[h.id] = h
	}
	probs := map[int64]problem{}
	for _, raw := range db.Problems {
		p, err := decodeProblem(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.Error())
			continue
		}
		probs[p.id] = p
	}

	// Users: every document, and every username with submissions.
	for _, raw := range db.Users {
		d, err := unmarshal(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.Error())
			continue
		}
		v, _ := field(d, "_id")
		name, ok := v.(string)
		if !ok {
			res.Malformed = append(res.Malformed, fmt.Sprintf("user _id %v", v))
			continue
		}
		res.Users[name] = User{ACProblemIDs: []int64{}}
	}
	for _, s := range subs {
		if _, ok := res.Users[s.user]; !ok {
			res.Users[s.user] = User{ACProblemIDs: []int64{}}
		}
	}
	for name := range res.Users {
		u := User{ACProblemIDs: []int64{}}
		for _, s := range subs { // in (timestamp, _id) order
			if s.user != name || !s.judged() {
				continue
			}
			u.Submission++
			if s.score == 100 {
				u.ACSubmission++
				seen := false
				for _, p := range u.ACProblemIDs {
					seen = seen || p == s.problem
				}
				if !seen {
					u.ACProblemIDs = append(u.ACProblemIDs, s.problem)
				}
			}
		}
		res.Users[name] = u
	}

	// Entries: every existing one starts at the start value; then every
	// pair (user, problem) replays its submissions over the problem's
	// visited homeworks.
	for id, h := range hws {
		m := map[string]map[string]Entry{}
		for u, set := range h.students {
			m[u] = map[string]Entry{}
			for pk := range set {
				m[u][pk] = Entry{SubmissionIDs: []string{}}
			}
		}
		res.Entries[id] = m
	}
	type pair struct {
		user    string
		problem int64
	}
	done := map[pair]bool{}
	for _, h := range hws {
		for u, set := range h.students {
			for pk := range set {
				p, err := strconv.ParseInt(pk, 10, 64)
				if err != nil || strconv.FormatInt(p, 10) != pk {
					continue // no problem id renders to this key
				}
				if done[pair{u, p}] {
					continue
				}
				done[pair{u, p}] = true
				res.PenaltyErrors += replay(res, u, p, probs, hws, subs)
			}
		}
	}
	return res
}

// replay derives the entries of (user, p) in every visited homework of
// problem p and stores them in res; it returns the penalty errors met.
func replay(res *Result, user string, p int64, probs map[int64]problem, hws map[string]homework, subs []submission) int {
	prob, ok := probs[p]
	if !ok {
		return 0
	}
	pk := strconv.FormatInt(p, 10)
	// Visited homeworks: stored order, first occurrence, existing only;
	// of those, the ones with an entry for (user, p).
	var visit []homework
	seen := map[string]bool{}
	for _, id := range prob.homeworks {
		if seen[id] {
			continue
		}
		seen[id] = true
		h, ok := hws[id]
		if ok && h.students[user][pk] {
			visit = append(visit, h)
		}
	}
	if len(visit) == 0 {
		return 0
	}
	entries := make([]Entry, len(visit))
	for i := range entries {
		entries[i] = Entry{SubmissionIDs: []string{}}
	}
	errs := 0
	for _, s := range subs {
		if s.user != user || s.problem != p || !s.judged() || s.handwritten {
			continue
		}
		cur := s.score
		for i, h := range visit {
			e := &entries[i]
			if e.RawScore == nil {
				zero := int64(0)
				e.RawScore = &zero
			}
			e.SubmissionIDs = append(e.SubmissionIDs, s.id)
			if s.timestamp > h.end {
				delta := new(big.Int).Sub(big.NewInt(cur), big.NewInt(*e.RawScore))
				if delta.Sign() > 0 {
					overtime := (s.timestamp - h.end) / 86_400_000
					gained, ok := evalPenalty(h.penalty, delta, overtime)
					if ok {
						sum := new(big.Int).Add(big.NewInt(e.Score), big.NewInt(gained))
						if sum.IsInt64() {
							e.Score = sum.Int64()
						} else {
							ok = false
						}
					}
					if !ok {
						errs++
					}
					raw := cur
					e.RawScore = &raw
				}
				cur = e.Score
			} else if cur > *e.RawScore {
				raw := cur
				e.RawScore = &raw
			}
			if cur >= e.Score {
				e.Score = cur
				st := s.status
				e.ProblemStatus = &st
			}
		}
	}
	for i, h := range visit {
		res.Entries[h.id][user][pk] = entries[i]
	}
	return errs
}

// evalPenalty runs program with score = delta and overtime = days; ok is
// false on any penalty error.
func evalPenalty(program string, delta *big.Int, overtime int64) (int64, bool) {
	prog, err := penalty.Compile(program)
	if err != nil {
		return 0, false
	}
	n, err := prog.EvalBig(delta, big.NewInt(overtime))
	return n, err == nil
}
