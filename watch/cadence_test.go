package watch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// lockedCheckpoints records every checkpoint saved; safe for a test
// goroutine reading while the engine saves.
type lockedCheckpoints struct {
	resume.Store
	mu    sync.Mutex
	saved []resume.Checkpoint
}

func (r *lockedCheckpoints) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	if err := r.Store.SaveCheckpoint(ctx, cp); err != nil {
		return err
	}
	r.mu.Lock()
	r.saved = append(r.saved, cp)
	r.mu.Unlock()
	return nil
}

func (r *lockedCheckpoints) list() []resume.Checkpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]resume.Checkpoint(nil), r.saved...)
}

// TestCheckpointCadence: with the default spacing (1s on the engine's
// clock, which does not move here unless the test moves it), the first
// batch of a stream saves at once, later batches within the spacing do not
// (each landing was saved twice before: after its batch and after the
// batch of its echoes), a quiet poll once the spacing has elapsed saves
// the postBatchResumeToken, and a shutdown saves the last processed batch,
// so a restart replays nothing that landed.
func TestCheckpointCadence(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cps := &lockedCheckpoints{Store: f.st}
	feed := newIdleFeed(f.st)
	eng := &watch.Engine{Store: f.st, Feed: feed, Checkpoints: cps, Log: zerolog.Nop(), Now: clk.Now,
		Sleep: feed.sleep, Config: watch.Config{IdlePause: time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()

	judged := func(n int64) func() bool {
		return func() bool { return f.user(t).Submission == n }
	}
	a := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, a, 0, 100)
	eventually(t, "the first landing written", judged(1))
	eventually(t, "the first batch saved", func() bool { return len(cps.list()) >= 1 })
	for i := range 3 {
		id := f.submit(t, f.end.Add(-time.Duration(i+2)*time.Hour))
		f.land(t, id, 1, 40)
		eventually(t, "a landing written", judged(int64(i+2)))
	}
	feed.waitIdle(t, "the echo batches processed")
	if n := len(cps.list()); n != 1 {
		t.Fatalf("%d checkpoints saved after 4 landings within the spacing, want 1 (the stream's first batch)", n)
	}
	clk.Add(2 * time.Second)
	eventually(t, "a save once the spacing elapsed", func() bool { return len(cps.list()) >= 2 })
	feed.waitIdle(t, "the quiet poll's save")
	if n := len(cps.list()); n != 2 {
		t.Fatalf("%d checkpoints saved once the spacing elapsed, want 2", n)
	}
	// At the quiet stream's postBatchResumeToken, or at the last event of
	// the echo batch that waited for the spacing: either way past every
	// event so far.
	if n := leftAfter(t, f.st, cps.list()[1].Token); n > 0 {
		t.Errorf("%d events after the checkpoint saved once the spacing elapsed, want none", n)
	}
	e := f.submit(t, f.end.Add(-10*time.Hour))
	f.land(t, e, 0, 100)
	eventually(t, "the last landing written", judged(5))
	feed.waitIdle(t, "the last echoes processed")
	if n := len(cps.list()); n != 2 {
		t.Fatalf("%d checkpoints saved, want 2 before the shutdown", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	saved := cps.list()
	if len(saved) != 3 {
		t.Fatalf("%d checkpoints saved, want 3: the shutdown saves the last processed batch", len(saved))
	}
	// Nothing after the saved token is left to process.
	cp, _, _ := f.st.LoadCheckpoint(context.Background())
	if n := leftAfter(t, f.st, cp.Token); n > 0 {
		t.Errorf("%d events after the shutdown's checkpoint whose recompute writes something, want none", n)
	}
	checkConverged(t, f.st, "after the shutdown")
}

// leftAfter returns the number of events after token whose recompute
// would write or record something.
func leftAfter(t *testing.T, st *memstore.Store, token bson.Raw) int {
	t.Helper()
	s, err := st.Open(context.Background(), watch.Position{Token: token})
	must(err)
	n := 0
	for {
		ev, ok, err := s.Next(context.Background())
		must(err)
		if !ok {
			return n
		}
		keys := materialize.Extract(ev.Change)
		out, err := watch.Recompute(context.Background(), st, st, materialize.NewDeriver(), keys)
		must(err)
		if out.Writes.Len() > 0 || len(out.NewKeys) > 0 {
			n++
		}
	}
}

// countingKeys counts the key-index lookups and by-id reads of
// submissions the engine makes.
type countingKeys struct {
	*memstore.Store
	lookups, byID int
}

func (c *countingKeys) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	c.lookups++
	return c.Store.LookupKeys(ctx, ids)
}

func (c *countingKeys) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	c.byID++
	return c.Store.SubmissionsByID(ctx, ids)
}

// TestInsertedSubmissionNotLookedUp: a batch holding a submission's
// insert (with its pair) and its result resolves the pair from the events:
// no key-index lookup and no read by id (a landing cost both before); it
// still records the pair in the key index, so a later delete resolves.
// A batch whose update may have moved the submission, or that starts
// with the result, still reads both.
func TestInsertedSubmissionNotLookedUp(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(f *fixture) // the events of the batch
		reads int              // lookups and by-id reads, each
	}{
		{"insert and result in one batch", func(f *fixture) {
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
		}, 0},
		{"result only", func(f *fixture) {
			id := f.submit(t, f.end.Add(-time.Hour))
			drain(t, f.st)
			f.land(t, id, 0, 100)
		}, 1},
		{"insert, then an update of the user", func(f *fixture) {
			id := f.submit(t, f.end.Add(-time.Hour))
			doc := f.st.Get(materialize.CollSubmission, id)
			must(f.st.Update(materialize.CollSubmission, setFields(doc, "user", "nobody", "status", int32(0)), []string{"user", "status"}))
		}, 1},
		{"insert, then a delete", func(f *fixture) {
			id := f.submit(t, f.end.Add(-time.Hour))
			must(f.st.Delete(materialize.CollSubmission, id))
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			c.setup(f)
			ck := &countingKeys{Store: f.st}
			eng := &watch.Engine{Store: ck, Feed: f.st, Checkpoints: f.st, Log: zerolog.Nop(),
				Config: watch.Config{BatchSize: 100, BatchMaxWait: time.Hour}}
			must(eng.Drain(context.Background()))
			if ck.lookups < c.reads || ck.byID < c.reads || (c.reads == 0 && ck.lookups+ck.byID > 0) {
				t.Errorf("%d key lookups, %d reads by id; want %d each", ck.lookups, ck.byID, c.reads)
			}
			checkConverged(t, f.st, c.name)
			for _, raw := range f.st.Collection(materialize.CollSubmission) {
				id := raw.Lookup("_id").ObjectID()
				keys, err := f.st.LookupKeys(context.Background(), []bson.ObjectID{id})
				must(err)
				if len(keys[id]) == 0 {
					t.Errorf("submission %s: no key-index record", id.Hex())
				}
			}
		})
	}
}

// unknownTime is a store whose writes' operationTime is unknown: the
// engine records none of them, so their echoes are never skipped.
type unknownTime struct{ *memstore.Store }

func (u unknownTime) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	_, err := u.Store.Apply(ctx, w)
	return bson.Timestamp{}, err
}

// TestEchoesShareTheNextBatch: the change events of the daemon's own
// writes (the user's derived fields, the homework's entries) that are not
// skipped (here: the store does not report its writes' operationTime) do
// not make a batch of their own while the batch's wait lasts: the next
// landing's events join them, and one batch recomputes both (before, each
// landing cost a batch for its echoes). Once the wait has passed, echoes
// alone are processed.
func TestEchoesShareTheNextBatch(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	m := watch.NewMetrics(nil)
	feed := newIdleFeed(f.st)
	eng := &watch.Engine{Store: unknownTime{f.st}, Feed: feed, Checkpoints: f.st, Log: zerolog.Nop(), Now: clk.Now, Metrics: m,
		Sleep: feed.sleep, Config: watch.Config{IdlePause: time.Millisecond}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	judged := func(n int64) func() bool { return func() bool { return f.user(t).Submission == n } }
	// Each landing one event: a judged submission inserted.
	land := func(ts time.Time, status, score int32) {
		id := bson.NewObjectIDFromTimestamp(ts)
		must(f.st.Insert(materialize.CollSubmission, mtest.Raw("_id", id, "user", fxUser, "problem", int32(fxProblem),
			"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", status, "score", score)))
	}
	land(f.end.Add(-time.Hour), 0, 100)
	eventually(t, "the first landing written", judged(1))
	feed.waitIdle(t, "the first landing's echoes waiting")
	land(f.end.Add(-2*time.Hour), 1, 40)
	eventually(t, "the second landing written", judged(2))
	feed.waitIdle(t, "the second landing's echoes waiting")
	if n := testutil.ToFloat64(m.Batches); n != 2 {
		t.Errorf("%v batches for two landings, want 2: the first landing's echoes share the second's batch", n)
	}
	clk.Add(time.Second) // the second landing's echoes wait no longer
	eventually(t, "the last echoes processed", func() bool { return testutil.ToFloat64(m.Batches) >= 3 })
	feed.waitIdle(t, "nothing left to process")
	if n := testutil.ToFloat64(m.Batches); n != 3 {
		t.Errorf("%v batches once the wait passed, want 3: the second landing's echoes alone", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkConverged(t, f.st, "after the echoes")
}

// countingHomeworks counts the Homeworks reads.
type countingHomeworks struct {
	*memstore.Store
	reads int
}

func (c *countingHomeworks) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	c.reads++
	return c.Store.Homeworks(ctx, ids, users)
}

// Read goes through the parts above, as Source.Read is defined.
func (c *countingHomeworks) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, c, r)
}

// TestEchoBatchReadsHomeworksOnce: the echoes of a landing (the user's
// derived fields, the entry studentStatus.<user>.<problem>, which also
// reads as user "<user>.<problem>"'s whole status) read the homework once:
// the read that expands the second reading serves the derivation too
// (before, twice). Nothing is written: the values are those stored.
func TestEchoBatchReadsHomeworksOnce(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	drain(t, f.st)
	before := f.st.OplogLen()
	ch := &countingHomeworks{Store: f.st}
	eng := &watch.Engine{Store: ch, Feed: f.st, Checkpoints: f.st, Log: zerolog.Nop()}
	echoes := []watch.Event{
		{Change: materialize.Change{Op: materialize.OpUpdate, Collection: materialize.CollUser, UserID: fxUser,
			Fields: []string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}}},
		{Change: materialize.Change{Op: materialize.OpUpdate, Collection: materialize.CollHomework, HomeworkID: f.hw,
			Fields: []string{materialize.FieldStudentStatus + "." + fxUser + "." + materialize.ProblemKey(fxProblem)}}},
	}
	must(eng.ProcessBatch(context.Background(), echoes))
	if ch.reads != 1 {
		t.Errorf("%d Homeworks reads for a batch of echoes, want 1", ch.reads)
	}
	if n := f.st.OplogLen(); n != before {
		t.Errorf("%d writes for echoes of values already stored, want none", n-before)
	}
	checkConverged(t, f.st, "after the echoes")
}
