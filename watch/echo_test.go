package watch_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// echoSetup lands one judged submission on a drained fixture and returns
// an engine (with its metrics) and a function reading the events the
// stream has after the fixture's checkpoint, as the engine's batches do.
func echoSetup(t *testing.T) (*fixture, *watch.Engine, *watch.Metrics, func() []watch.Event) {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	drain(t, f.st)
	cp, _, err := f.st.LoadCheckpoint(ctx)
	must(err)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	next := openStream(f.st, cp.Token)
	m := watch.NewMetrics(nil)
	eng := &watch.Engine{Store: f.st, Feed: f.st, Checkpoints: f.st, Log: zerolog.Nop(), Metrics: m}
	return f, eng, m, next
}

// TestEchoBatchReadsNothing: one landing at a time, the landing's batch
// reads the sources and writes the user and the entry; the next batch
// holds only the echoes of those two writes, which are skipped: no source
// read, no write, no batch counted.
func TestEchoBatchReadsNothing(t *testing.T) {
	ctx := context.Background()
	f, eng, m, next := echoSetup(t)
	f.st.ResetStats()
	must(eng.ProcessBatch(ctx, next()))
	if s := f.st.Stats(); s.Reads == 0 || s.UserWrites != 1 || s.EntryWrites != 1 {
		t.Fatalf("setup: the landing's batch made %+v, want reads and one user and one entry write", s)
	}
	echoes := next()
	if len(echoes) != 2 {
		t.Fatalf("setup: %d events after the landing's batch, want its 2 echoes", len(echoes))
	}
	f.st.ResetStats()
	must(eng.ProcessBatch(ctx, echoes))
	if s := f.st.Stats(); s.Reads != 0 || s.WriteCalls != 0 {
		t.Errorf("the echoes' batch made %d reads and %d write calls, want none", s.Reads, s.WriteCalls)
	}
	if n := testutil.ToFloat64(m.EchoesSkipped); n != 2 {
		t.Errorf("%v echoes skipped, want 2", n)
	}
	if n := testutil.ToFloat64(m.Batches); n != 1 {
		t.Errorf("%v batches recomputed, want 1 (the landing's)", n)
	}
	checkConverged(t, f.st, "after the echoes")
}

// TestEchoesSkippedByTheStream: through Run (collect, process, save),
// one landing costs one batch of reads; its echoes alone make a batch
// that closes at once (the clock never moves here: waiting for more
// events would never end) and is skipped; the checkpoint saved on the way
// out is past them.
func TestEchoesSkippedByTheStream(t *testing.T) {
	ctx := context.Background()
	f, _, _, _ := echoSetup(t)
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	m := watch.NewMetrics(nil)
	feed := newIdleFeed(f.st)
	eng := &watch.Engine{Store: f.st, Feed: feed, Checkpoints: f.st, Log: zerolog.Nop(), Now: clk.Now, Metrics: m,
		Sleep: feed.sleep, Config: watch.Config{IdlePause: time.Millisecond}}
	// Stopped once idle past the echoes: a stop while their batch is
	// processed abandons it, and the checkpoint is then before them.
	must(runUntil(t, eng, func() bool { return testutil.ToFloat64(m.EchoesSkipped) == 2 && feed.idleAtEnd() }))
	if n := testutil.ToFloat64(m.Batches); n != 1 {
		t.Errorf("%v batches recomputed for one landing, want 1", n)
	}
	cp, _, err := f.st.LoadCheckpoint(ctx)
	must(err)
	if left := f.st.OplogLen() - tokenSeq(t, cp.Token); left != 0 {
		t.Errorf("checkpoint %d events before the end of the oplog, want past the skipped echoes", left)
	}
	checkConverged(t, f.st, "after the landing")
}

// tokenSeq is the position a memstore resume token names: {_data: the
// next event's index in hex}.
func tokenSeq(t *testing.T, token bson.Raw) int {
	t.Helper()
	s, ok := token.Lookup("_data").StringValueOK()
	if !ok {
		t.Fatalf("token %v has no _data", token)
	}
	n, err := strconv.ParseInt(s, 16, 64)
	must(err)
	return int(n)
}

// TestForeignWriteOfTheSameValueAfterTheWriteRecomputed: another writer
// setting the user's derived fields to the very values the daemon wrote,
// after the daemon's write was acknowledged, is recomputed (its cluster
// time is after the write's operationTime), while the daemon's own echoes
// in the same batch are skipped.
func TestForeignWriteOfTheSameValueAfterTheWriteRecomputed(t *testing.T) {
	ctx := context.Background()
	f, eng, m, next := echoSetup(t)
	must(eng.ProcessBatch(ctx, next()))
	user := f.st.Get(materialize.CollUser, fxUser)
	must(f.st.Update(materialize.CollUser, user, []string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}))
	batch := next()
	if len(batch) != 3 {
		t.Fatalf("setup: %d events, want the 2 echoes and the foreign write", len(batch))
	}
	f.st.ResetStats()
	must(eng.ProcessBatch(ctx, batch))
	if n := testutil.ToFloat64(m.EchoesSkipped); n != 2 {
		t.Errorf("%v events skipped, want the 2 echoes only", n)
	}
	if s := f.st.Stats(); s.Reads == 0 {
		t.Error("the foreign write of the same value was not recomputed (no read)")
	}
	checkConverged(t, f.st, "after the foreign write")
}

// TestForeignStaleWriteAfterTheWriteCorrected: a stale value written by
// another writer after the daemon's write (here the value before the
// landing) is corrected, in the batch of the echoes.
func TestForeignStaleWriteAfterTheWriteCorrected(t *testing.T) {
	ctx := context.Background()
	f, eng, _, next := echoSetup(t)
	before := f.st.Get(materialize.CollUser, fxUser)
	must(eng.ProcessBatch(ctx, next()))
	must(f.st.Update(materialize.CollUser, before, []string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}))
	must(eng.ProcessBatch(ctx, next()))
	if u := f.user(t); u.Submission != 1 || u.ACSubmission != 1 {
		t.Errorf("user %+v after the stale write's batch, want it corrected to 1 and 1", u)
	}
	checkConverged(t, f.st, "after the stale write")
}

// afterApply runs hook once, after the first Apply that wrote, with its
// operationTime.
type afterApply struct {
	*memstore.Store
	hook func(at bson.Timestamp)
}

func (a *afterApply) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	at, err := a.Store.Apply(ctx, w)
	if err == nil && w.Len() > 0 && a.hook != nil {
		a.hook(at)
		a.hook = nil
	}
	return at, err
}

// TestMalformedDerivedValuesRecomputed: an update of a user's derived
// field whose derivedValues cannot be read whole is a bad event and is
// recomputed like any event, never skipped, even when the part that can
// be read holds the daemon's value at a time the write covers: here the
// event stands for a stale value (written in place) that the recompute
// corrects.
func TestMalformedDerivedValuesRecomputed(t *testing.T) {
	own := mtest.D("k", materialize.FieldSubmission, "v", int32(1)) // the value the daemon writes
	for _, tc := range []struct {
		name   string
		values any
	}{
		{"not an array", mtest.D("0", own)},
		{"an element not a document", bson.A{own, int32(1)}},
		{"k not a string", bson.A{own, mtest.D("k", int32(1), "v", int32(0))}},
		{"no v", bson.A{own, mtest.D("k", materialize.FieldACSubmission)}},
		{"a path twice", bson.A{own, mtest.D("k", materialize.FieldSubmission, "v", int32(0))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
			st := &afterApply{Store: f.st, hook: func(at bson.Timestamp) {
				must(f.st.Load(materialize.CollUser, mtest.Raw("_id", fxUser, "submission", int32(0), "AC_submission", int32(1), "AC_problem_ids", bson.A{int32(fxProblem)})))
				f.st.EmitRaw(mtest.D("operationType", "update", "clusterTime", at,
					"ns", mtest.D("db", "normal-oj", "coll", materialize.CollUser), "documentKey", mtest.D("_id", fxUser),
					"changedFields", bson.A{materialize.FieldSubmission}, "derivedValues", tc.values))
			}}
			m := watch.NewMetrics(nil)
			eng := &watch.Engine{Store: st, Feed: f.st, Checkpoints: f.st, Log: zerolog.Nop(), Metrics: m}
			// Batches: the landing's, then its echoes and the bad event
			// (recomputed: it writes the correction); the correction's
			// echo is skipped.
			must(runUntil(t, eng, func() bool {
				return testutil.ToFloat64(m.Batches) == 2 && testutil.ToFloat64(m.EchoesSkipped) == 3
			}))
			if n := testutil.ToFloat64(m.BadEvents); n != 1 {
				t.Errorf("%v bad events, want 1", n)
			}
			if u := f.user(t); u.Submission != 1 {
				t.Errorf("user %+v, want the stale submission count corrected to 1", u)
			}
			checkConverged(t, f.st, "after the malformed event")
		})
	}
}

// TestEchoRecordsPruned: the records of the daemon's writes are kept
// while the stream has not passed their operationTime (the echoes'
// batch) and dropped by the first batch whose events are after it, so
// they are bounded by the writes in flight, not by every path ever
// written.
func TestEchoRecordsPruned(t *testing.T) {
	ctx := context.Background()
	f, eng, m, next := echoSetup(t)
	must(eng.ProcessBatch(ctx, next()))
	if n := testutil.ToFloat64(m.EchoRecords); n != 4 {
		t.Fatalf("%v records after the landing's batch, want 4 (the user's three fields, the entry)", n)
	}
	must(eng.ProcessBatch(ctx, next())) // the echoes: skipped, at or before the write
	if n := testutil.ToFloat64(m.EchoRecords); n != 4 {
		t.Errorf("%v records after the echoes' batch, want the 4 kept", n)
	}
	// Another writer's write of the same values, after the write: the
	// stream has passed the records' time.
	user := f.st.Get(materialize.CollUser, fxUser)
	must(f.st.Update(materialize.CollUser, user, []string{materialize.FieldSubmission}))
	must(eng.ProcessBatch(ctx, next()))
	if n := testutil.ToFloat64(m.EchoRecords); n != 0 {
		t.Errorf("%v records after a batch past their time, want none", n)
	}
}

// beforeApply runs hook once, with the writes, before the first Apply
// that writes.
type beforeApply struct {
	*memstore.Store
	hook func(w *watch.Writes)
}

func (b *beforeApply) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	if w.Len() > 0 && b.hook != nil {
		b.hook(w)
		b.hook = nil
	}
	return b.Store.Apply(ctx, w)
}

// TestSameValueWrittenFirstByAnotherInstanceSkippedAndConverged: another
// instance (a deposed leader's late write) writes exactly the values the
// daemon is about to write, then the landed submission moves to another
// user, both before the daemon's own write, which then changes nothing
// (no event of its own). The other instance's events are at or before
// the daemon's operationTime with the daemon's values: they are skipped;
// the move after them is recomputed against what the paths then hold,
// and the state converges.
func TestSameValueWrittenFirstByAnotherInstanceSkippedAndConverged(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	must(f.st.Load(materialize.CollUser, mtest.Raw("_id", "bob", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	drain(t, f.st)
	cp, _, err := f.st.LoadCheckpoint(ctx)
	must(err)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	next := openStream(f.st, cp.Token)
	st := &beforeApply{Store: f.st, hook: func(w *watch.Writes) {
		if _, err := f.st.Apply(ctx, w); err != nil { // the other instance's identical write
			t.Fatal(err)
		}
		must(f.st.Update(materialize.CollSubmission, setFields(f.st.Get(materialize.CollSubmission, id), "user", "bob"), []string{"user"}))
	}}
	m := watch.NewMetrics(nil)
	eng := &watch.Engine{Store: st, Feed: f.st, Checkpoints: f.st, Log: zerolog.Nop(), Metrics: m}
	must(eng.ProcessBatch(ctx, next()))
	batch := next()
	if len(batch) != 3 {
		t.Fatalf("setup: %d events after the landing's batch, want the other instance's 2 writes and the move", len(batch))
	}
	must(eng.ProcessBatch(ctx, batch))
	if n := testutil.ToFloat64(m.EchoesSkipped); n != 2 {
		t.Errorf("%v events skipped, want the other instance's 2 writes of the daemon's values", n)
	}
	must(eng.ProcessBatch(ctx, next())) // the correction's echoes
	if u := f.user(t); u.Submission != 0 {
		t.Errorf("alice %+v after the move, want no submission", u)
	}
	checkConverged(t, f.st, "after the other instance's write and the move")
}
