package watch_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// callCountingStore counts the Source and KeyIndex read calls made on it
// by name; a Read is one call, whatever its parts (memstore answers it
// with one call per part internally, not through these methods). reads
// records what each Read asked for.
type callCountingStore struct {
	*memstore.Store
	calls map[string]int
	reads []watch.Reads
}

func newCallCountingStore(st *memstore.Store) *callCountingStore {
	return &callCountingStore{Store: st, calls: make(map[string]int)}
}

func (c *callCountingStore) total() int {
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *callCountingStore) reset() { c.calls = make(map[string]int); c.reads = nil }

func (c *callCountingStore) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	c.calls["Submissions"]++
	return c.Store.Submissions(ctx, users, pairs)
}

func (c *callCountingStore) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	c.calls["UserStats"]++
	return c.Store.UserStats(ctx, users)
}

func (c *callCountingStore) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	c.calls["SubmissionsByID"]++
	return c.Store.SubmissionsByID(ctx, ids)
}

func (c *callCountingStore) Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	c.calls["Problems"]++
	return c.Store.Problems(ctx, ids)
}

func (c *callCountingStore) ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error) {
	c.calls["ProblemsListing"]++
	return c.Store.ProblemsListing(ctx, homeworks)
}

func (c *callCountingStore) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	c.calls["Homeworks"]++
	return c.Store.Homeworks(ctx, ids, users)
}

func (c *callCountingStore) EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]watch.EntryRef, []*materialize.DecodeError, error) {
	c.calls["EntryKeys"]++
	return c.Store.EntryKeys(ctx, homeworks)
}

func (c *callCountingStore) EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error) {
	c.calls["EntriesForProblems"]++
	return c.Store.EntriesForProblems(ctx, problems)
}

func (c *callCountingStore) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	c.calls["Users"]++
	return c.Store.Users(ctx, names)
}

func (c *callCountingStore) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	c.calls["Read"]++
	c.reads = append(c.reads, *r)
	return c.Store.Read(ctx, r)
}

func (c *callCountingStore) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	c.calls["LookupKeys"]++
	return c.Store.LookupKeys(ctx, ids)
}

// newEvents returns the events of st's oplog after the first *seen, and
// advances *seen past them.
func newEvents(t *testing.T, st *memstore.Store, seen *int) []watch.Event {
	t.Helper()
	all := serveAll(t, st)
	evs := all[*seen:]
	*seen = len(all)
	return evs
}

// TestDeriveOneReadPerLanding: once the engine has read a problem, a
// landing on it derives with one Source.Read (the pair's submissions, the
// user's counts and stored fields, the problem and its homeworks) and no
// other read of those parts; the batch of the echoes of its writes
// derives with one Read too, its homeworks served by expandHomeworks'
// read.
func TestDeriveOneReadPerLanding(t *testing.T) {
	f := newFixture(t)
	cs := newCallCountingStore(f.st)
	eng := &watch.Engine{Store: cs, Feed: f.st, Checkpoints: f.st, Log: zerolog.Nop()}
	ctx := context.Background()
	seen := 0
	newEvents(t, f.st, &seen) // the fixture's loads emit nothing; nothing before
	parts := []string{"Submissions", "UserStats", "Users", "Problems"}
	for i := range 3 {
		id := f.submit(t, f.end.Add(-time.Duration(10-i)*time.Hour))
		f.land(t, id, 0, int32(50+10*i))
		cs.reset()
		if err := eng.ProcessBatch(ctx, newEvents(t, f.st, &seen)); err != nil {
			t.Fatal(err)
		}
		if cs.calls["Read"] != 1 {
			t.Errorf("landing %d: %d Read calls, want 1 (calls %v)", i, cs.calls["Read"], cs.calls)
		}
		for _, p := range parts {
			if cs.calls[p] != 0 {
				t.Errorf("landing %d: %s called %d times outside Read (calls %v)", i, p, cs.calls[p], cs.calls)
			}
		}
		// A fresh engine does not know the problem's homeworks yet: it
		// reads them after the problem, once.
		if want := map[bool]int{true: 1, false: 0}[i == 0]; cs.calls["Homeworks"] != want {
			t.Errorf("landing %d: %d Homeworks calls outside Read, want %d (calls %v)", i, cs.calls["Homeworks"], want, cs.calls)
		}
		cs.reset()
		if err := eng.ProcessBatch(ctx, newEvents(t, f.st, &seen)); err != nil { // the echoes
			t.Fatal(err)
		}
		if cs.calls["Read"] > 1 {
			t.Errorf("landing %d's echoes: %d Read calls, want at most 1 (calls %v)", i, cs.calls["Read"], cs.calls)
		}
		for _, p := range parts {
			if cs.calls[p] != 0 {
				t.Errorf("landing %d's echoes: %s called %d times outside Read (calls %v)", i, p, cs.calls[p], cs.calls)
			}
		}
		if cs.calls["Homeworks"] > 1 {
			t.Errorf("landing %d's echoes: %d Homeworks calls, want at most expandHomeworks' one (calls %v)", i, cs.calls["Homeworks"], cs.calls)
		}
	}
	if got, want := f.entry(t).Score, int64(70); got != want {
		t.Errorf("entry score %d after three landings, want %d", got, want)
	}
}

// guessWorld is user u enrolled in homeworks H1..H5 (an entry for each of
// problems 1-3 in each, at the start value), problems 1 [H1], 2 [H1, H2]
// and 3 [H2], and an accepted submission of u to each problem.
type guessWorld struct {
	st  *memstore.Store
	hws [6]bson.ObjectID // 1..5
}

func newGuessWorld(t *testing.T) *guessWorld {
	t.Helper()
	w := &guessWorld{st: memstore.New()}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	must(w.st.Load(materialize.CollUser, mtest.Raw("_id", "u", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	for i := 1; i <= 5; i++ {
		w.hws[i] = bson.ObjectID{10: 0x40, 11: byte(i)}
		must(w.st.Load(materialize.CollHomework, mtest.Raw("_id", w.hws[i], "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
			"studentStatus", mtest.D("u", mtest.D("1", start, "2", start, "3", start)))))
	}
	w.setProblem(1, 1)
	w.setProblem(2, 1, 2)
	w.setProblem(3, 2)
	for p := int32(1); p <= 3; p++ {
		id := bson.ObjectID{10: 0x50, 11: byte(p)}
		must(w.st.Load(materialize.CollSubmission, mtest.Raw("_id", id, "user", "u", "problem", p, "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", int32(0), "score", int32(100))))
	}
	return w
}

// setProblem replaces problem p's homeworks list (no change event: the
// engine learns of it only by reading).
func (w *guessWorld) setProblem(p int32, hws ...int) {
	list := bson.A{}
	for _, h := range hws {
		list = append(list, w.hws[h])
	}
	must(w.st.Load(materialize.CollProblem, mtest.Raw("_id", p, "homeworks", list)))
}

// keys is a landing on each of u's pairs.
func (w *guessWorld) keys() *materialize.Keys {
	k := materialize.NewKeys()
	k.AddUser("u")
	for p := int64(1); p <= 3; p++ {
		k.AddPair(materialize.Pair{User: "u", Problem: p})
	}
	return k
}

// outcomeOf is what a recomputation decides, its read calls left out.
type outcomeOf struct {
	Users, Pairs, SkippedUsers, SkippedEntries, PenaltyErrors, Unresolved int
	NeedRebuild                                                           bool
	Writes                                                                watch.Writes
	Malformed                                                             []string
}

func decided(o *watch.Outcome) outcomeOf {
	d := outcomeOf{Users: o.Users, Pairs: o.Pairs, SkippedUsers: o.SkippedUsers, SkippedEntries: o.SkippedEntries,
		PenaltyErrors: o.PenaltyErrors, Unresolved: o.Unresolved, NeedRebuild: o.NeedRebuild, Writes: o.Writes}
	for _, b := range o.Malformed {
		d.Malformed = append(d.Malformed, b.Error())
	}
	return d
}

// TestDeriveStaleHomeworkGuess: after the engine read the problems once,
// a problem's homeworks list changes without it seeing the change event;
// its next derivation, reading the homeworks its guess names with the
// problems, decides exactly what a fresh engine (no guess) decides: the
// homeworks the guess missed are read after, the homeworks it named in
// excess are not used, nor their decode errors reported. Then the guess
// has learned: the same derivation again costs one Read.
func TestDeriveStaleHomeworkGuess(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(w *guessWorld)
		// secondRead: the guess misses a homework (or read one in excess
		// that cannot be decoded): a Homeworks call after the Read.
		secondRead bool
	}{
		{"problem moved to another homework", func(w *guessWorld) { w.setProblem(1, 3) }, true},
		{"homework added to a problem's list", func(w *guessWorld) { w.setProblem(3, 2, 4) }, true},
		{"homework removed from a problem's list", func(w *guessWorld) { w.setProblem(2, 1); w.setProblem(3) }, false},
		{"removed homework now undecodable", func(w *guessWorld) {
			w.setProblem(2, 1)
			w.setProblem(3)
			must(w.st.Load(materialize.CollHomework, mtest.Raw("_id", w.hws[2], "penalty", int32(3))))
		}, true},
		{"needed homework undecodable, another removed, one added", func(w *guessWorld) {
			w.setProblem(2, 1, 3)
			w.setProblem(3)
			must(w.st.Load(materialize.CollHomework, mtest.Raw("_id", w.hws[1], "penalty", int32(3))))
		}, true},
		{"problem deleted", func(w *guessWorld) { must(w.st.Delete(materialize.CollProblem, int32(3))) }, false},
		{"problem deleted, its homework no longer needed and undecodable", func(w *guessWorld) {
			must(w.st.Delete(materialize.CollProblem, int32(2)))
			w.setProblem(3, 5)
			must(w.st.Load(materialize.CollHomework, mtest.Raw("_id", w.hws[2], "penalty", int32(3))))
		}, true},
		{"problem undecodable", func(w *guessWorld) {
			must(w.st.Load(materialize.CollProblem, mtest.Raw("_id", int32(3), "homeworks", "H2")))
		}, false},
		{"unchanged", func(w *guessWorld) {}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			w := newGuessWorld(t)
			cs := newCallCountingStore(w.st)
			g := &watch.HomeworkGuess{}
			if _, err := watch.RecomputeGuessing(ctx, cs, cs, materialize.NewDeriver(), w.keys(), g); err != nil {
				t.Fatal(err)
			}
			c.change(w)
			want, err := watch.Recompute(ctx, w.st, w.st, materialize.NewDeriver(), w.keys())
			if err != nil {
				t.Fatal(err)
			}
			for round, wantHomeworks := range []int{map[bool]int{true: 1, false: 0}[c.secondRead], 0} {
				cs.reset()
				got, err := watch.RecomputeGuessing(ctx, cs, cs, materialize.NewDeriver(), w.keys(), g)
				if err != nil {
					t.Fatal(err)
				}
				if d, wd := decided(got), decided(want); !reflect.DeepEqual(d, wd) {
					t.Errorf("round %d: with the engine's guess\n  %+v\nfresh engine\n  %+v", round, d, wd)
				}
				if cs.calls["Read"] != 1 || cs.calls["Homeworks"] != wantHomeworks || cs.total() != 1+wantHomeworks || got.Reads != cs.total() {
					t.Errorf("round %d: calls %v (Outcome.Reads %d), want one Read and %d Homeworks", round, cs.calls, got.Reads, wantHomeworks)
				}
			}
			if len(want.Writes.Entries) == 0 {
				t.Error("the scenario writes no entry: it checks nothing")
			}
		})
	}
}

// TestDerivePrunedPairsReportNothingRead: a pair that matters only with a
// submission (Keys.IfSubmitted), without one, is not derived: the problem
// and homeworks read with its submissions are dropped, their decode
// errors not reported, as when they were read only after the submissions.
func TestDerivePrunedPairsReportNothingRead(t *testing.T) {
	st := memstore.New()
	h := bson.ObjectID{11: 0x61}
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(9), "homeworks", "not a list")))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", h, "penalty", int32(1))))
	g := &watch.HomeworkGuess{}
	keys := func() *materialize.Keys {
		k := materialize.NewKeys()
		p := materialize.Pair{User: "bob", Problem: 9}
		k.AddPair(p)
		k.IfSubmitted[p] = struct{}{}
		return k
	}
	for round := range 2 {
		out, err := watch.RecomputeGuessing(context.Background(), st, st, materialize.NewDeriver(), keys(), g)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Malformed) != 0 || out.Writes.Len() != 0 || out.Pairs != 0 {
			t.Errorf("round %d: pruned pair: %d pairs, %d writes, malformed %v; want none", round, out.Pairs, out.Writes.Len(), out.Malformed)
		}
		// Round 2 guesses from a readable list.
		must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(9), "homeworks", bson.A{h})))
	}
}
