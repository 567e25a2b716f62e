package watch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// world is a small Normal-OJ: the simulation mutates it the way Back-End
// does (one source write per operation, each emitting a change event).
type world struct {
	r     *rand.Rand
	st    *memstore.Store
	users []string
	probs []int64
	hws   []bson.ObjectID
	subs  []bson.ObjectID
	clock int64 // ms
	base  int64
	ops   map[string]int // operations applied, by name
}

var penalties = []any{
	"score = score * 0.8 ** overtime",
	"if overtime > 3:\n    score = 0\nelse:\n    score = score * (1 - overtime * 0.1)",
	"score = score / overtime", // ZeroDivisionError on day 0: a penalty error
	nil,                        // missing → "score = 0"
	"score -= overtime * 5",
	"score = 2 ** 62 + score", // running score leaves int64 after two late submissions
}

func newWorld(seed uint64) *world {
	w := &world{
		r:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		st:    memstore.New(),
		users: []string{"alice", "bob", "dot.user", "carol"},
		probs: []int64{1, 2, 3},
		base:  time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC).UnixMilli(),
		ops:   make(map[string]int),
	}
	for i := 0; i < 3; i++ {
		w.hws = append(w.hws, bson.NewObjectIDFromTimestamp(time.Unix(int64(1_700_000_000+i), 0)))
	}
	for _, u := range w.users {
		must(w.st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(w.r.IntN(5)), "AC_submission", int32(0),
			"AC_problem_ids", bson.A{}, "email", u+"@example.com")))
	}
	for i, h := range w.hws {
		must(w.st.Load(materialize.CollHomework, w.homework(h, i, w.randomStatus())))
	}
	for _, p := range w.probs {
		must(w.st.Load(materialize.CollProblem, mtest.Raw("_id", int32(p), "homeworks", w.randomList(), "problemName", "p"+strconv.Itoa(int(p)))))
	}
	return w
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (w *world) randomList() bson.A {
	var a bson.A
	for _, h := range w.hws {
		if w.r.IntN(3) > 0 {
			a = append(a, h)
		}
	}
	if len(a) > 0 && w.r.IntN(5) == 0 {
		a = append(a, a[0]) // a repeated reference
	}
	if w.r.IntN(6) == 0 {
		a = append(a, bson.NewObjectID()) // a dangling reference
	}
	w.r.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
	return a
}

func (w *world) randomStatus() bson.D {
	ss := bson.D{}
	for _, u := range w.users {
		if w.r.IntN(4) == 0 {
			continue
		}
		ud := bson.D{}
		for _, p := range w.probs {
			if w.r.IntN(3) > 0 {
				// stale garbage left by the old code, or the start value
				ud = append(ud, bson.E{Key: strconv.Itoa(int(p)), Value: mtest.D("score", int32(w.r.IntN(100)), "problemStatus", nil,
					"submissionIds", bson.A{"x"})})
			}
		}
		ss = append(ss, bson.E{Key: u, Value: ud})
	}
	return ss
}

func (w *world) homework(id bson.ObjectID, i int, ss bson.D) bson.Raw {
	kv := []any{"_id", id, "homeworkName", "hw" + strconv.Itoa(i),
		"duration", mtest.D("start", bson.DateTime(w.base), "end", bson.DateTime(w.base+int64(w.r.IntN(5))*86_400_000))}
	if p := penalties[w.r.IntN(len(penalties))]; p != nil {
		kv = append(kv, "penalty", p)
	}
	kv = append(kv, "studentStatus", ss)
	return mtest.Raw(kv...)
}

// step applies one random Back-End-shaped operation and counts it.
func (w *world) step() string {
	op := w.randomOp()
	w.ops[op]++
	return op
}

// randomOp applies one random Back-End-shaped operation.
func (w *world) randomOp() string {
	w.clock += int64(w.r.IntN(3 * 86_400_000))
	if w.r.IntN(6) == 0 {
		return w.edgeStep()
	}
	pick := w.r.IntN(100)
	switch {
	case pick < 30 || len(w.subs) == 0: // a new submission, pending
		id := bson.NewObjectIDFromTimestamp(time.UnixMilli(w.base + w.clock))
		id[11], id[10] = byte(len(w.subs)), byte(len(w.subs)>>8) // unique within a second
		lang := int32(w.r.IntN(4))
		doc := mtest.Raw("_id", id, "user", w.users[w.r.IntN(len(w.users))], "problem", int32(w.probs[w.r.IntN(len(w.probs))]),
			"languageType", lang, "timestamp", bson.DateTime(w.base+w.clock), "status", int32(-1), "score", int32(-1), "tasks", bson.A{})
		must(w.st.Insert(materialize.CollSubmission, doc))
		w.subs = append(w.subs, id)
		return "insert submission"
	case pick < 60: // judge (or a duplicate landing of the same result)
		id := w.subs[w.r.IntN(len(w.subs))]
		doc := w.st.Get(materialize.CollSubmission, id)
		if doc == nil {
			return "judge deleted (noop)"
		}
		scores := []int32{0, 40, 60, 100, 100}
		d := setFields(doc, "status", int32(w.r.IntN(8)-1), "score", scores[w.r.IntN(len(scores))], "runTime", int32(w.r.IntN(100)))
		must(w.st.Update(materialize.CollSubmission, d, []string{"status", "score", "runTime"}))
		return "judge"
	case pick < 65: // rejudge: back to pending
		id := w.subs[w.r.IntN(len(w.subs))]
		if doc := w.st.Get(materialize.CollSubmission, id); doc != nil {
			must(w.st.Update(materialize.CollSubmission, setFields(doc, "status", int32(-1)), []string{"status"}))
		}
		return "rejudge"
	case pick < 70: // Back-End bookkeeping that changes nothing derived
		id := w.subs[w.r.IntN(len(w.subs))]
		if doc := w.st.Get(materialize.CollSubmission, id); doc != nil {
			must(w.st.Update(materialize.CollSubmission, setFields(doc, "lastSend", bson.DateTime(w.base+w.clock)), []string{"lastSend"}))
		}
		return "touch submission"
	case pick < 76: // delete (handwritten resubmission deletes the old one)
		i := w.r.IntN(len(w.subs))
		id := w.subs[i]
		if w.st.Get(materialize.CollSubmission, id) != nil {
			must(w.st.Delete(materialize.CollSubmission, id))
		}
		return "delete submission"
	case pick < 82: // homework penalty or deadline change
		i := w.r.IntN(len(w.hws))
		doc := w.st.Get(materialize.CollHomework, w.hws[i])
		if w.r.IntN(2) == 0 {
			p := penalties[w.r.IntN(len(penalties))]
			if p == nil {
				p = "score = score // 2"
			}
			must(w.st.Update(materialize.CollHomework, setFields(doc, "penalty", p), []string{"penalty"}))
		} else {
			end := bson.DateTime(w.base + int64(w.r.IntN(10))*86_400_000)
			must(w.st.Update(materialize.CollHomework, setFields(doc, "duration", mtest.D("start", bson.DateTime(w.base), "end", end)), []string{"duration.end"}))
		}
		return "homework config"
	case pick < 88: // a student added to / removed from a homework
		i := w.r.IntN(len(w.hws))
		doc := w.st.Get(materialize.CollHomework, w.hws[i])
		u := w.users[w.r.IntN(len(w.users))]
		ss, _ := doc.Lookup("studentStatus").DocumentOK()
		var d bson.D
		must(bson.Unmarshal(ss, &d))
		out := bson.D{}
		found := false
		for _, e := range d {
			if e.Key == u {
				found = true
				continue
			}
			out = append(out, e)
		}
		if !found {
			ud := bson.D{}
			for _, p := range w.probs {
				ud = append(ud, bson.E{Key: strconv.Itoa(int(p)), Value: mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})})
			}
			if w.r.IntN(4) == 0 { // a key no problem id renders to, with garbage
				ud = append(ud, bson.E{Key: "0" + strconv.Itoa(int(w.probs[0])), Value: mtest.D("score", int32(5), "problemStatus", int32(0), "submissionIds", bson.A{"x"})})
			}
			out = append(out, bson.E{Key: u, Value: ud})
		}
		must(w.st.Update(materialize.CollHomework, setFields(doc, "studentStatus", out), []string{"studentStatus." + u}))
		return "homework students"
	case pick < 90: // the old add_submission still running: user.submission += 1
		u := w.users[w.r.IntN(len(w.users))]
		doc := w.st.Get(materialize.CollUser, u)
		n, _ := doc.Lookup("submission").AsInt64OK()
		must(w.st.Update(materialize.CollUser, setFields(doc, "submission", int32(n+1)), []string{"submission"}))
		return "tamper user"
	case pick < 93: // tamper an entry, as the old finish_judging would
		i := w.r.IntN(len(w.hws))
		doc := w.st.Get(materialize.CollHomework, w.hws[i])
		entries, _ := mtest.StoredEntries(doc)
		for u, ps := range entries {
			for pk := range ps {
				patched, _, err := materialize.PatchHomework(doc, map[string]map[string]materialize.Entry{u: {pk: {Score: 999, SubmissionIDs: []string{"dup", "dup"}}}})
				must(err)
				must(w.st.Update(materialize.CollHomework, patched, []string{"studentStatus." + u + "." + pk + ".score", "studentStatus." + u + "." + pk + ".submissionIds"}))
				return "tamper entry"
			}
		}
		return "tamper (none)"
	default: // problem.homeworks reorder / add / remove
		p := w.probs[w.r.IntN(len(w.probs))]
		doc := w.st.Get(materialize.CollProblem, int32(p))
		must(w.st.Update(materialize.CollProblem, setFields(doc, "homeworks", w.randomList()), []string{"homeworks"}))
		return "problem homeworks"
	}
}

// edgeStep applies one of the operations the main mix rarely or never
// produces: a submission moved to another user or problem, a deadline
// extended after it passed, a problem's homeworks list reordered (same
// members), a submission exactly at a deadline (on time: equal is not
// late), and a deadline moved exactly onto a submission's timestamp.
func (w *world) edgeStep() string {
	switch w.r.IntN(5) {
	case 0: // move a submission to another user and/or problem
		return w.moveSubmission()
	case 1: // extend a deadline that has passed: late submissions become on time
		doc := w.st.Get(materialize.CollHomework, w.hws[w.r.IntN(len(w.hws))])
		end := bson.DateTime(w.base + w.clock + int64(1+w.r.IntN(5))*86_400_000)
		// $set of the whole duration document: the event names the parent path.
		must(w.st.Update(materialize.CollHomework, setFields(doc, "duration", mtest.D("start", bson.DateTime(w.base), "end", end)), []string{"duration"}))
		return "extend deadline"
	case 2: // reorder a problem's homeworks list, same members
		p := w.probs[w.r.IntN(len(w.probs))]
		doc := w.st.Get(materialize.CollProblem, int32(p))
		arr, _ := doc.Lookup("homeworks").ArrayOK()
		vals, _ := arr.Values()
		list := bson.A{}
		for _, v := range vals {
			list = append(list, v.ObjectID())
		}
		if len(list) < 2 {
			list = w.randomList()
		}
		w.r.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		must(w.st.Update(materialize.CollProblem, setFields(doc, "homeworks", list), []string{"homeworks"}))
		return "reorder problem homeworks"
	case 3: // a judged submission exactly at a homework's deadline
		h := w.st.Get(materialize.CollHomework, w.hws[w.r.IntN(len(w.hws))])
		end, _ := h.Lookup("duration", "end").DateTimeOK()
		id := bson.NewObjectIDFromTimestamp(time.UnixMilli(end))
		id[11], id[10], id[9] = byte(len(w.subs)), byte(len(w.subs)>>8), 0xee
		doc := mtest.Raw("_id", id, "user", w.users[w.r.IntN(len(w.users))], "problem", int32(w.probs[w.r.IntN(len(w.probs))]),
			"languageType", int32(w.r.IntN(3)), "timestamp", bson.DateTime(end), "status", int32(0), "score", []int32{60, 100}[w.r.IntN(2)], "tasks", bson.A{})
		must(w.st.Insert(materialize.CollSubmission, doc))
		w.subs = append(w.subs, id)
		return "submission at the deadline"
	default: // a deadline moved exactly onto a submission's timestamp
		if len(w.subs) == 0 {
			return "deadline onto submission (none)"
		}
		sub := w.st.Get(materialize.CollSubmission, w.subs[w.r.IntN(len(w.subs))])
		if sub == nil {
			return "deadline onto deleted (noop)"
		}
		ts, _ := sub.Lookup("timestamp").DateTimeOK()
		doc := w.st.Get(materialize.CollHomework, w.hws[w.r.IntN(len(w.hws))])
		must(w.st.Update(materialize.CollHomework, setFields(doc, "duration", mtest.D("start", bson.DateTime(w.base), "end", bson.DateTime(ts))), []string{"duration.end"}))
		return "deadline onto a submission"
	}
}

// moveSubmission moves a random submission to another user and/or
// problem (an update naming user, problem or both).
func (w *world) moveSubmission() string {
	if len(w.subs) == 0 {
		return "move (none)"
	}
	return w.move(w.subs[w.r.IntN(len(w.subs))])
}

// move moves submission id to another user and/or problem.
func (w *world) move(id bson.ObjectID) string {
	doc := w.st.Get(materialize.CollSubmission, id)
	if doc == nil {
		return "move deleted (noop)"
	}
	var kv []any
	var fields []string
	if w.r.IntN(3) > 0 {
		kv, fields = append(kv, "user", w.users[w.r.IntN(len(w.users))]), append(fields, "user")
	}
	if len(kv) == 0 || w.r.IntN(2) == 0 {
		kv, fields = append(kv, "problem", int32(w.probs[w.r.IntN(len(w.probs))])), append(fields, "problem")
	}
	must(w.st.Update(materialize.CollSubmission, setFields(doc, kv...), fields))
	return "move submission"
}

// setFields returns doc with top-level fields replaced or appended.
func setFields(doc bson.Raw, kv ...any) bson.Raw {
	var d bson.D
	must(bson.Unmarshal(doc, &d))
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		done := false
		for j := range d {
			if d[j].Key == k {
				d[j].Value = kv[i+1]
				done = true
			}
		}
		if !done {
			d = append(d, bson.E{Key: k, Value: kv[i+1]})
		}
	}
	b, err := bson.Marshal(d)
	must(err)
	return b
}

func newEngine(st *memstore.Store) *watch.Engine {
	return &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(),
		Config: watch.Config{BatchSize: 7, BatchMaxWait: time.Hour}}
}

// checkConverged asserts the invariant: stored derived state equals the
// full derivation of the current source, as the independent reference
// (internal/reference, written from the spec, sharing no code with
// materialize) computes and compares it, by value.
func checkConverged(t *testing.T, st *memstore.Store, what string) {
	t.Helper()
	if d := reference.Check(refDB(st.Docs())); len(d) > 0 {
		t.Fatalf("%s: stored state differs from the reference derivation (%d differences), first: %s", what, len(d), d[0])
	}
}

// refDB converts the store's documents for the reference.
func refDB(d materialize.Docs) reference.DB {
	return reference.DB{Users: d.Users, Problems: d.Problems, Homeworks: d.Homeworks, Submissions: d.Submissions}
}

// simRuns is the number of random sequences per `go test` (250 by default:
// runs 251-500 reach no statement the first 250 do not;
// MATERIALIZER_SIM_RUNS overrides).
func simRuns() int {
	if s := os.Getenv("MATERIALIZER_SIM_RUNS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return 250
}

// TestSimulation drives random operation sequences with crashes injected
// at random store operations (before writes, between writes of a batch,
// after writes before the checkpoint, while reading, while recording keys),
// restarts from the saved checkpoint, and occasional rewinds of the
// checkpoint (duplicate delivery). After the feed drains, the stored
// derived state must equal Derive of the final source state, and a further
// idle drain must write nothing.
func TestSimulation(t *testing.T) {
	t.Parallel() // its own store and clock: runs beside the explorer
	runs := simRuns()
	crashes := 0
	ops := map[string]int{}
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		n := runSimulation(t, seed, ops)
		crashes += n
		if t.Failed() {
			t.Fatalf("seed %d failed; reproduce with: go test ./watch -run TestSimulation (seed %d)", seed, seed)
		}
	}
	t.Logf("operations: %v", ops)
	if runs >= 100 {
		for _, op := range []string{"move submission", "extend deadline", "reorder problem homeworks", "submission at the deadline", "deadline onto a submission"} {
			if ops[op] == 0 {
				t.Errorf("no %q in %d sequences: the simulation lost that coverage", op, runs)
			}
		}
	}
	t.Logf("%d simulated sequences, %d injected crashes", runs, crashes)
	fmt.Printf("simulation: %d random sequences, %d injected crashes, all converged\n", runs, crashes)
}

func runSimulation(t *testing.T, seed uint64, ops map[string]int) (crashes int) {
	ctx := context.Background()
	w := newWorld(seed)
	defer func() {
		for op, n := range w.ops {
			ops[op] += n
		}
	}()
	st := w.st
	eng := newEngine(st)
	steps := 20 + w.r.IntN(40)
	for i := 0; i < steps; i++ {
		w.step()
		if w.r.IntN(3) != 0 {
			continue
		}
		// Run the daemon for a while, maybe crashing it.
		if w.r.IntN(2) == 0 {
			failAt := 1 + w.r.IntN(12)
			count := 0
			st.Fail = func(op string) error {
				count++
				if count == failAt {
					return memstore.ErrInjected
				}
				return nil
			}
		}
		err := eng.Drain(ctx)
		st.Fail = nil
		if err != nil {
			if !errors.Is(err, memstore.ErrInjected) {
				t.Fatalf("seed %d: drain: %v", seed, err)
			}
			crashes++
			eng = newEngine(st) // restart: fresh process memory, same database
		}
		if w.r.IntN(10) == 0 {
			st.RewindCheckpoint(w.r.IntN(st.OplogLen() + 1)) // a token saved late: events delivered again
		}
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatalf("seed %d: final drain: %v", seed, err)
	}
	checkConverged(t, st, fmt.Sprintf("seed %d", seed))
	before := st.Stats()
	if err := newEngine(st).Drain(ctx); err != nil {
		t.Fatalf("seed %d: idle drain: %v", seed, err)
	}
	after := st.Stats()
	if after.UserWrites != before.UserWrites || after.EntryWrites != before.EntryWrites {
		t.Fatalf("seed %d: idle drain wrote: users %d→%d entries %d→%d", seed, before.UserWrites, after.UserWrites, before.EntryWrites, after.EntryWrites)
	}
	return crashes
}
