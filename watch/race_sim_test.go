package watch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// racingStore is a store on which foreign writes land between a batch's
// events being read and its source reads: the reads are causally after
// the batch's last event, so they may see writes whose events the engine
// has not read yet. The write happens at the batch's n-th read call (one
// of the first three, n drawn per batch), so it may also fall between two
// reads of one batch.
type racingStore struct {
	*memstore.Store
	w        *world
	budget   int // foreign writes left for this run
	injected int // foreign writes applied
	reads    int // read calls since the batch's events were read
	at       int // the read call that writes, 0: none this batch
	hot      bson.ObjectID
	// malformed: some foreign moves leave a half undecodable (a number,
	// a document, removed), maybe setting the other; later moves and
	// replaces fix them.
	malformed bool
	malforms  int
}

// pick returns the submission a foreign write changes: often the newest
// or the one a foreign write changed last, so that one submission moves
// again (or goes) before the events of its last move are processed.
func (s *racingStore) pick() bson.ObjectID {
	w := s.w
	if len(w.subs) == 0 {
		return bson.ObjectID{}
	}
	switch w.r.IntN(3) {
	case 0:
		s.hot = w.subs[len(w.subs)-1]
	case 1:
		if s.hot.IsZero() {
			s.hot = w.subs[w.r.IntN(len(w.subs))]
		}
	default:
		s.hot = w.subs[w.r.IntN(len(w.subs))]
	}
	return s.hot
}

// Open wraps the stream so that every event read arms the next batch.
func (s *racingStore) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	st, err := s.Store.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &racingStream{Stream: st, s: s}, nil
}

type racingStream struct {
	watch.Stream
	s *racingStore
}

func (st *racingStream) Next(ctx context.Context) (watch.Event, bool, error) {
	ev, ok, err := st.Stream.Next(ctx)
	if ok {
		s := st.s
		s.reads, s.at = 0, 0
		if s.budget > 0 && s.w.r.IntN(4) != 0 {
			s.at = 1 + s.w.r.IntN(3)
			if s.w.r.IntN(2) == 0 {
				s.at = 1 // mostly before every read of the batch
			}
		}
	}
	return ev, ok, err
}

// race applies one to three foreign writes at the batch's chosen read.
func (s *racingStore) race() {
	s.reads++
	if s.reads != s.at {
		return
	}
	for n := 1 + s.w.r.IntN(3); n > 0 && s.budget > 0; n-- {
		s.budget--
		s.injected++
		switch k := s.w.r.IntN(8); {
		case k == 0:
			s.w.ops[s.w.replace(s.pick())]++
		case k <= 2 && s.malformed && s.w.r.IntN(3) == 0:
			op := s.w.malform(s.pick())
			if op == "malform submission" {
				s.malforms++
			}
			s.w.ops[op]++
		case k <= 2: // moves are what key resolution must follow
			s.w.ops[s.w.move(s.pick())]++
		case k == 3:
			op := "delete submission"
			if id := s.pick(); s.Get(materialize.CollSubmission, id) != nil {
				must(s.Delete(materialize.CollSubmission, id))
			} else {
				op = "delete deleted (noop)"
			}
			s.w.ops[op]++
		default:
			s.w.step()
		}
	}
}

func (s *racingStore) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	s.race()
	return s.Store.LookupKeys(ctx, ids)
}

func (s *racingStore) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	s.race()
	return s.Store.SubmissionsByID(ctx, ids)
}

func (s *racingStore) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	s.race()
	return s.Store.Submissions(ctx, users, pairs)
}

func (s *racingStore) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	s.race()
	return s.Store.UserStats(ctx, users)
}

func (s *racingStore) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	s.race()
	return s.Store.Users(ctx, names)
}

func (s *racingStore) Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	s.race()
	return s.Store.Problems(ctx, ids)
}

func (s *racingStore) ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error) {
	s.race()
	return s.Store.ProblemsListing(ctx, homeworks)
}

func (s *racingStore) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	s.race()
	return s.Store.Homeworks(ctx, ids, users)
}

func (s *racingStore) EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]watch.EntryRef, []*materialize.DecodeError, error) {
	s.race()
	return s.Store.EntryKeys(ctx, homeworks)
}

func (s *racingStore) EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error) {
	s.race()
	return s.Store.EntriesForProblems(ctx, problems)
}

// Read composes the parts through the racing methods, so a write may land
// between two of them as between two calls.
func (s *racingStore) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, s, r)
}

// replace replaces submission id whole (a replace event carries its new
// user and problem): maybe moved, maybe judged.
func (w *world) replace(id bson.ObjectID) string {
	doc := w.st.Get(materialize.CollSubmission, id)
	if doc == nil {
		return "replace deleted (noop)"
	}
	scores := []int32{0, 60, 100}
	d := setFields(doc, "user", w.users[w.r.IntN(len(w.users))], "problem", int32(w.probs[w.r.IntN(len(w.probs))]),
		"status", int32(w.r.IntN(3)-1), "score", scores[w.r.IntN(len(scores))])
	must(w.st.Replace(materialize.CollSubmission, d))
	return "replace submission"
}

// malform leaves one half of submission id's pair undecodable (its user
// a number or a document, or removed; its problem a string or removed)
// and maybe sets the other half: an update naming both, of which the
// event's moved carries only the one that decodes.
func (w *world) malform(id bson.ObjectID) string {
	doc := w.st.Get(materialize.CollSubmission, id)
	if doc == nil {
		return "malform deleted (noop)"
	}
	var d bson.D
	must(bson.Unmarshal(doc, &d))
	set := func(k string, v any) {
		i := slices.IndexFunc(d, func(e bson.E) bool { return e.Key == k })
		switch {
		case v == nil && i >= 0:
			d = slices.Delete(d, i, i+1)
		case v == nil:
		case i >= 0:
			d[i].Value = v
		default:
			d = append(d, bson.E{Key: k, Value: v})
		}
	}
	bad, good := "user", "problem"
	var v any
	switch w.r.IntN(4) {
	case 0:
		v = int32(5)
	case 1:
		v = bson.D{{Key: "x", Value: int32(1)}}
	case 2:
		bad, good, v = "problem", "user", "x"
	}
	set(bad, v)
	fields := []string{bad}
	if w.r.IntN(2) == 0 {
		if good == "user" {
			set("user", w.users[w.r.IntN(len(w.users))])
		} else {
			set("problem", int32(w.probs[w.r.IntN(len(w.probs))]))
		}
		fields = append(fields, good)
	}
	b, err := bson.Marshal(d)
	must(err)
	must(w.st.Update(materialize.CollSubmission, b, fields))
	return "malform submission"
}

// raceFigures are what TestSimulationForeignWritesBeforeReads reports.
type raceFigures struct {
	runs, injected, dropped, crashes, malforms int
}

// TestSimulationForeignWritesBeforeReads drives the random sequences of
// TestSimulation with foreign writes (every operation the world's
// generators produce, and submission replaces) landing between a
// batch's events being read and its source reads, with crashes injected
// at random store operations, and checks convergence after the feed
// drains in two modes: the echoes of the engine's own writes delivered,
// and every one of them dropped from the stream before the engine sees it
// (the most aggressive echo skipping possible). Convergence must never
// depend on echoes: every source change's events resolve to every derived
// key it affects.
func TestSimulationForeignWritesBeforeReads(t *testing.T) {
	t.Parallel() // its own store and clock: runs beside the explorer
	for _, mode := range []struct {
		name            string
		drop, malformed bool
		runs            int
	}{{"echoes delivered", false, false, simRuns() * 2 / 5}, {"echoes dropped", true, false, simRuns()},
		{"echoes dropped, malformed moves", true, true, simRuns() * 2 / 5}} {
		t.Run(mode.name, func(t *testing.T) {
			var f raceFigures
			runs := mode.runs
			for seed := uint64(1); seed <= uint64(runs); seed++ {
				runRaceSimulation(t, seed, mode.drop, mode.malformed, &f)
				if t.Failed() {
					t.Fatalf("seed %d failed; reproduce with: go test ./watch -run 'TestSimulationForeignWritesBeforeReads/%s'", seed, mode.name)
				}
			}
			if mode.drop && f.dropped == 0 {
				t.Errorf("no echo dropped in %d sequences: the mode tests nothing", runs)
			}
			if mode.malformed && f.malforms == 0 {
				t.Errorf("no submission malformed in %d sequences: the mode tests nothing", runs)
			}
			if f.injected == 0 {
				t.Errorf("no foreign write landed before a batch's reads in %d sequences", runs)
			}
			t.Logf("%d runs, %d foreign writes before a batch's reads (%d malforming), %d echoes dropped, %d injected crashes, all converged", f.runs, f.injected, f.malforms, f.dropped, f.crashes)
			fmt.Printf("race simulation (%s): %d random sequences, %d foreign writes before reads (%d malforming), %d echoes dropped, %d injected crashes, all converged\n",
				mode.name, f.runs, f.injected, f.malforms, f.dropped, f.crashes)
		})
	}
}

func runRaceSimulation(t *testing.T, seed uint64, drop, malformed bool, f *raceFigures) {
	t.Helper()
	ctx := context.Background()
	w := newWorld(seed)
	if seed%2 == 0 {
		// A crowded world: every operation on two users and two
		// problems, so a moved submission's new pair is often dirty.
		w.users, w.probs = w.users[:2], w.probs[:2]
	}
	st := w.st
	st.DropOwnEvents = drop
	rs := &racingStore{Store: st, w: w, budget: 40, malformed: malformed}
	engine := func() *watch.Engine {
		e := newEngine(st)
		e.Store, e.Feed = rs, rs
		return e
	}
	eng := engine()
	steps := 20 + w.r.IntN(40)
	for i := 0; i < steps; i++ {
		w.step()
		if w.r.IntN(3) != 0 {
			continue
		}
		if w.r.IntN(3) == 0 {
			failAt, count := 1+w.r.IntN(12), 0
			st.Fail = func(string) error {
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
			f.crashes++
			eng = engine()
		}
		if w.r.IntN(10) == 0 {
			st.RewindCheckpoint(w.r.IntN(st.OplogLen() + 1)) // a token saved late: events delivered again
		}
	}
	// Drain returns once a poll finds the stream quiet, even when writes
	// landed while its last batch was read (Run would go on): drain again
	// until a drain reads no event.
	for {
		served := st.Stats().EventsServed
		if err := eng.Drain(ctx); err != nil {
			t.Fatalf("seed %d: final drain: %v", seed, err)
		}
		if st.Stats().EventsServed == served {
			break
		}
	}
	checkConverged(t, st, fmt.Sprintf("seed %d (echoes dropped: %v)", seed, drop))
	rs.budget = 0
	before := st.Stats()
	if err := engine().Drain(ctx); err != nil {
		t.Fatalf("seed %d: idle drain: %v", seed, err)
	}
	after := st.Stats()
	if after.UserWrites != before.UserWrites || after.EntryWrites != before.EntryWrites {
		t.Fatalf("seed %d: idle drain wrote: users %d→%d entries %d→%d", seed, before.UserWrites, after.UserWrites, before.EntryWrites, after.EntryWrites)
	}
	f.runs++
	f.injected += rs.injected
	f.malforms += rs.malforms
	f.dropped += st.Stats().OwnDropped
}
