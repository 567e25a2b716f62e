package watch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// A class rejudged at once: the problem every submission of which a
// teacher rejudges, and a control problem nobody touches.
const (
	rejudgedProblem = 7
	controlProblem  = 8
	classSize       = 200
)

// rejudgeWorld is a class of classSize students, the rejudged problem in a
// homework that ended (with a penalty) and in one still open, and the
// control problem in the open one. Every student has an entry for each
// (homework, problem) pair.
type rejudgeWorld struct {
	r       *rand.Rand
	base    int64 // ms
	hwLate  bson.ObjectID
	hwOpen  bson.ObjectID
	users   []bson.Raw
	hws     []bson.Raw
	probs   []bson.Raw
	subs    []bson.Raw // initial state
	rejudge []bson.ObjectID
}

// results a sandbox may send: (status, score).
var sandboxResults = [][2]int32{{0, 100}, {1, 40}, {1, 60}, {1, 0}, {2, 0}, {3, 30}}

func newRejudgeWorld(seed uint64) *rejudgeWorld {
	w := &rejudgeWorld{
		r:      rand.New(rand.NewPCG(seed, seed^0x51ed270b)),
		base:   time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC).UnixMilli(),
		hwLate: bson.NewObjectIDFromTimestamp(time.Unix(1_800_000_001, 0)),
		hwOpen: bson.NewObjectIDFromTimestamp(time.Unix(1_800_000_002, 0)),
	}
	late, open := bson.D{}, bson.D{}
	for i := 0; i < classSize; i++ {
		u := fmt.Sprintf("s%03d", i)
		w.users = append(w.users, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{}))
		start := func() bson.D { return mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}) }
		late = append(late, bson.E{Key: u, Value: bson.D{{Key: strconv.Itoa(rejudgedProblem), Value: start()}}})
		open = append(open, bson.E{Key: u, Value: bson.D{
			{Key: strconv.Itoa(rejudgedProblem), Value: start()},
			{Key: strconv.Itoa(controlProblem), Value: start()},
		}})
	}
	w.hws = []bson.Raw{
		mtest.Raw("_id", w.hwLate, "homeworkName", "late",
			"duration", mtest.D("start", bson.DateTime(w.base), "end", bson.DateTime(w.base+2*86_400_000)),
			"penalty", "score = score * 8 // 10 if overtime < 2 else score // 2", "studentStatus", late),
		mtest.Raw("_id", w.hwOpen, "homeworkName", "open",
			"duration", mtest.D("start", bson.DateTime(w.base), "end", bson.DateTime(w.base+30*86_400_000)),
			"studentStatus", open),
	}
	w.probs = []bson.Raw{
		mtest.Raw("_id", int32(rejudgedProblem), "homeworks", bson.A{w.hwLate, w.hwOpen}),
		mtest.Raw("_id", int32(controlProblem), "homeworks", bson.A{w.hwOpen}),
	}
	n := 0
	add := func(user string, problem int32, status, score int32) bson.ObjectID {
		ts := w.base + int64(w.r.IntN(5*86_400_000))
		id := bson.NewObjectIDFromTimestamp(time.UnixMilli(ts))
		id[10], id[11] = byte(n>>8), byte(n)
		n++
		w.subs = append(w.subs, mtest.Raw("_id", id, "user", user, "problem", problem, "languageType", int32(w.r.IntN(3)),
			"timestamp", bson.DateTime(ts), "status", status, "score", score, "tasks", bson.A{mtest.D("status", status)}))
		return id
	}
	for i := 0; i < classSize; i++ {
		u := fmt.Sprintf("s%03d", i)
		for k := 1 + w.r.IntN(3); k > 0; k-- {
			res := sandboxResults[w.r.IntN(len(sandboxResults))]
			w.rejudge = append(w.rejudge, add(u, rejudgedProblem, res[0], res[1]))
		}
		if w.r.IntN(10) == 0 { // queued, never judged: a rejudge leaves it so
			w.rejudge = append(w.rejudge, add(u, rejudgedProblem, materialize.StatusPending, -1))
		}
		if w.r.IntN(2) == 0 {
			res := sandboxResults[w.r.IntN(len(sandboxResults))]
			add(u, controlProblem, res[0], res[1])
		}
	}
	w.r.Shuffle(len(w.rejudge), func(i, j int) { w.rejudge[i], w.rejudge[j] = w.rejudge[j], w.rejudge[i] })
	return w
}

// store loads the world into a fresh store, with subs as the submissions.
func (w *rejudgeWorld) store(subs []bson.Raw) *memstore.Store {
	st := memstore.New()
	must(st.Load(materialize.CollUser, w.users...))
	must(st.Load(materialize.CollHomework, w.hws...))
	must(st.Load(materialize.CollProblem, w.probs...))
	must(st.Load(materialize.CollSubmission, subs...))
	return st
}

// drainWithCrash drains the feed, maybe crashing once at a random store
// operation and restarting, as TestSimulation does.
func drainWithCrash(t *testing.T, r *rand.Rand, st *memstore.Store) {
	t.Helper()
	ctx := context.Background()
	if r.IntN(3) == 0 {
		failAt, count := 1+r.IntN(10), 0
		st.Fail = func(string) error {
			count++
			if count == failAt {
				return memstore.ErrInjected
			}
			return nil
		}
		err := newEngine(st).Drain(ctx)
		st.Fail = nil
		if err != nil && !errors.Is(err, memstore.ErrInjected) {
			t.Fatalf("drain: %v", err)
		}
	}
	if err := newEngine(st).Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

func stored(t *testing.T, st *memstore.Store) *materialize.Result {
	t.Helper()
	res, err := mtest.Stored(st.Docs())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// countsFromSubmissions computes user counts from the stored submissions
// by the rule of the derivation spec, independently of the derivation code:
// judged = status not -2, and not -1 unless score >= 0 (rejudge in flight).
func countsFromSubmissions(st *memstore.Store) map[string]materialize.UserStats {
	type sub struct {
		ts      int64
		id      bson.ObjectID
		problem int64
		score   int64
	}
	byUser := map[string][]sub{}
	for _, d := range st.Collection(materialize.CollSubmission) {
		status, score := d.Lookup("status").AsInt64(), d.Lookup("score").AsInt64()
		if status == materialize.StatusCreated || (status == materialize.StatusPending && score < 0) {
			continue
		}
		u := d.Lookup("user").StringValue()
		byUser[u] = append(byUser[u], sub{d.Lookup("timestamp").DateTime(), d.Lookup("_id").ObjectID(), d.Lookup("problem").AsInt64(), score})
	}
	out := map[string]materialize.UserStats{}
	for u, subs := range byUser {
		slices.SortFunc(subs, func(a, b sub) int {
			if a.ts != b.ts {
				return int(a.ts - b.ts)
			}
			return bytes.Compare(a.id[:], b.id[:])
		})
		st := materialize.UserStats{ACProblemIDs: []int64{}}
		for _, s := range subs {
			st.Submission++
			if s.score == 100 {
				st.ACSubmission++
				if !slices.Contains(st.ACProblemIDs, s.problem) {
					st.ACProblemIDs = append(st.ACProblemIDs, s.problem)
				}
			}
		}
		out[u] = st
	}
	return out
}

func sameUser(a, b materialize.UserStats) bool {
	return a.Submission == b.Submission && a.ACSubmission == b.ACSubmission && slices.Equal(a.ACProblemIDs, b.ACProblemIDs)
}

// checkOnlyStatusMoved asserts that, for the users in scope, every user
// count and every entry equals before's, except an entry of the rejudged
// problem whose problemStatus may have become -1 (a rejudge in flight).
// It returns the number of entries showing -1.
func checkOnlyStatusMoved(t *testing.T, before, now *materialize.Result, scope func(user string) bool) int {
	t.Helper()
	for u, b := range before.Users {
		if scope(u) && !sameUser(b, now.Users[u]) {
			t.Fatalf("user %s moved during the rejudge: %+v -> %+v", u, b, now.Users[u])
		}
	}
	pending := 0
	for hw, users := range before.Entries {
		for u, entries := range users {
			if !scope(u) {
				continue
			}
			for pk, b := range entries {
				n := now.Entries[hw][u][pk]
				if pk == strconv.Itoa(rejudgedProblem) && n.HasStatus && n.ProblemStatus == materialize.StatusPending {
					pending++
					n.ProblemStatus, n.HasStatus = b.ProblemStatus, b.HasStatus
				}
				if !b.Equal(n) {
					t.Fatalf("entry %s.%s.%s moved during the rejudge: %+v -> %+v", hw.Hex(), u, pk, b, now.Entries[hw][u][pk])
				}
			}
		}
	}
	return pending
}

// TestSimulationRejudgeWholeProblem: a teacher rejudges every submission of
// one problem for a class of 200 at once, while the daemon streams (and
// crashes now and then). During the rejudge nothing moves but the
// problemStatus of the rejudged problem's entries, which shows -1 while
// the submission that set it is in flight (docs/derivation-spec.md,
// "Rejudge in flight"); user counts are checked against a count made from
// the stored submissions by the spec's rule. After the new results land,
// the derived state equals that of a store that only ever held the new
// results: the old results count for nothing.
func TestSimulationRejudgeWholeProblem(t *testing.T) {
	t.Parallel() // its own store and clock: runs beside the explorer
	seeds := 5
	if testing.Short() {
		seeds = 1
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { runRejudgeWholeProblem(t, seed) })
	}
}

func runRejudgeWholeProblem(t *testing.T, seed uint64) {
	w := newRejudgeWorld(seed)
	st := w.store(w.subs)
	drainWithCrash(t, w.r, st) // the rebuild
	before := stored(t, st)
	for u, want := range countsFromSubmissions(st) {
		if !sameUser(before.Users[u], want) {
			t.Fatalf("before the rejudge: user %s = %+v, counted from submissions %+v", u, before.Users[u], want)
		}
	}
	everyone := func(string) bool { return true }

	// The rejudge, in bursts as the teacher's clicks and the Back-End's
	// requests arrive: status -1, tasks [], lastSend now; score kept
	// (Submission.rejudge, mongo/submission.py).
	for i := 0; i < len(w.rejudge); {
		n := min(len(w.rejudge)-i, 1+w.r.IntN(40))
		for _, id := range w.rejudge[i : i+n] {
			d := st.Get(materialize.CollSubmission, id)
			must(st.Update(materialize.CollSubmission, setFields(d, "status", int32(materialize.StatusPending), "tasks", bson.A{},
				"lastSend", bson.DateTime(w.base+10*86_400_000)), []string{"status", "tasks", "lastSend"}))
		}
		i += n
		drainWithCrash(t, w.r, st)
		checkOnlyStatusMoved(t, before, stored(t, st), everyone)
	}
	// Every entry of the rejudged problem that a submission contributes to
	// now shows the rejudge in flight.
	all := stored(t, st)
	pending := checkOnlyStatusMoved(t, before, all, everyone)
	withSubs := 0
	for _, users := range all.Entries {
		for _, entries := range users {
			if e, ok := entries[strconv.Itoa(rejudgedProblem)]; ok && len(e.SubmissionIDs) > 0 {
				withSubs++
			}
		}
	}
	if pending == 0 || pending != withSubs {
		t.Fatalf("%d entries show -1 after the whole rejudge, want all %d with submissions", pending, withSubs)
	}

	// The new results land in another order, some twice (a repeated
	// landing). A user none of whose submissions has a new result yet must
	// still see nothing but problemStatus moved.
	order := slices.Clone(w.rejudge)
	w.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	landed := map[string]bool{}
	for i := 0; i < len(order); {
		n := min(len(order)-i, 1+w.r.IntN(40))
		for _, id := range order[i : i+n] {
			d := st.Get(materialize.CollSubmission, id)
			res := sandboxResults[w.r.IntN(len(sandboxResults))]
			d = setFields(d, "status", res[0], "score", res[1], "tasks", bson.A{mtest.D("status", res[0])})
			for k := 1 + w.r.IntN(2); k > 0; k-- {
				must(st.Update(materialize.CollSubmission, d, []string{"status", "score", "tasks"}))
			}
			landed[d.Lookup("user").StringValue()] = true
		}
		i += n
		drainWithCrash(t, w.r, st)
		now := stored(t, st)
		checkOnlyStatusMoved(t, before, now, func(u string) bool { return !landed[u] })
		for u, want := range countsFromSubmissions(st) {
			if !sameUser(now.Users[u], want) {
				t.Fatalf("user %s = %+v, counted from submissions %+v", u, now.Users[u], want)
			}
		}
	}

	// After: no rejudge in flight is left, and the state equals that of a
	// store that only ever held the final submissions.
	after := stored(t, st)
	for hw, users := range after.Entries {
		for u, entries := range users {
			for pk, e := range entries {
				if e.HasStatus && e.ProblemStatus == materialize.StatusPending {
					t.Fatalf("entry %s.%s.%s still shows -1 after every result landed", hw.Hex(), u, pk)
				}
			}
		}
	}
	fresh := w.store(st.Collection(materialize.CollSubmission))
	drainWithCrash(t, w.r, fresh)
	want := stored(t, fresh)
	if d := mtest.DiffResults(want, after); len(d) > 0 {
		t.Fatalf("after the rejudge: %d differences from a store holding only the new results, first: %s", len(d), d[0])
	}
	checkConverged(t, st, fmt.Sprintf("seed %d", seed))
}
