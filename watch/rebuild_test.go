package watch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// closingFeed behaves like mongodb.Stream after an invalidate: once an
// invalidate event was delivered, the server cursor is closed and the next
// Next returns ErrTransient ("change stream closed by the server").
type closingFeed struct{ st *memstore.Store }

func (f closingFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.st.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &closingStream{Stream: s}, nil
}

type closingStream struct {
	watch.Stream
	closed bool
}

func (s *closingStream) Next(ctx context.Context) (watch.Event, bool, error) {
	if s.closed {
		return watch.Event{}, false, fmt.Errorf("change stream closed by the server (invalidated): %w", watch.ErrTransient)
	}
	ev, ok, err := s.Stream.Next(ctx)
	if ok && ev.Change.Op == materialize.OpInvalidate {
		s.closed = true
	}
	return ev, ok, err
}

// TestInvalidateEndsBatch: the server closes a change stream right after
// its invalidate event; the batch holding it must still be processed (a
// rebuild) and its token saved, not dropped and retried forever.
func TestInvalidateEndsBatch(t *testing.T) {
	st := memstore.New()
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "alice", "submission", int32(5), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	m := watch.NewMetrics(nil)
	eng := &watch.Engine{Store: st, Feed: closingFeed{st}, Checkpoints: st, Log: zerolog.Nop(), Metrics: m,
		Config: watch.Config{BatchSize: 64, BatchMaxWait: time.Hour}}
	ctx := context.Background()
	if err := eng.Drain(ctx); err != nil { // initial rebuild + checkpoint
		t.Fatal(err)
	}
	cp0, _, _ := st.LoadCheckpoint(ctx)
	// dropDatabase: a drop per collection, the dropDatabase, then invalidate.
	st.EmitRaw(bson.D{{Key: "operationType", Value: "dropDatabase"}, {Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}}}})
	st.EmitRaw(bson.D{{Key: "operationType", Value: "invalidate"}})
	// Stored user drifted meanwhile (stand-in for anything a rebuild fixes).
	for i := 0; i < 3; i++ {
		err := eng.Drain(ctx)
		cp, _, _ := st.LoadCheckpoint(ctx)
		t.Logf("drain %d: err=%v checkpoint moved=%v", i, err, string(cp.Token) != string(cp0.Token) || cp.StartAt != cp0.StartAt)
		if err == nil {
			return
		}
	}
	t.Errorf("the batch ending with the invalidate event is discarded on every attempt; the checkpoint never passes it")
}

// dupScan re-delivers one submission at its new (user, problem) during the
// scan, as a MongoDB index scan does when a document's indexed key moves
// forward while the cursor is open.
type dupScan struct {
	*memstore.Store
	moved bson.ObjectID
}

func (d *dupScan) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	var again *materialize.Submission
	err := d.Store.ScanSubmissions(ctx, func(s materialize.Submission) error {
		if err := fn(s); err != nil {
			return err
		}
		if s.ID == d.moved {
			// Back-End moves the submission to user "carol" right now.
			doc := d.Store.Get(materialize.CollSubmission, s.ID)
			must(d.Store.Update(materialize.CollSubmission, setFields(doc, "user", "carol"), []string{"user"}))
			n := s
			n.User = "carol"
			again = &n
		}
		return nil
	}, bad)
	if err != nil {
		return err
	}
	if again != nil {
		return fn(*again) // seen again at its new position (after "bob")
	}
	return nil
}

// TestRebuildKeepsEveryPairOfAMovedSubmission: a cursor is not isolated,
// so a submission moved to another user during the rebuild scan is seen at
// both positions; the key index must keep both pairs, or the move's event
// cannot recompute the old pair.
func TestRebuildKeepsEveryPairOfAMovedSubmission(t *testing.T) {
	st := memstore.New()
	hw := bson.NewObjectID()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, u := range []string{"alice", "bob", "carol"} {
		must(st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D("alice", mtest.D("7", start), "bob", mtest.D("7", start), "carol", mtest.D("7", start)))))
	ts := end.Add(-time.Hour)
	s1 := bson.NewObjectIDFromTimestamp(ts)
	s2 := bson.NewObjectIDFromTimestamp(ts.Add(time.Minute))
	must(st.Load(materialize.CollSubmission,
		mtest.Raw("_id", s1, "user", "alice", "problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100)),
		mtest.Raw("_id", s2, "user", "bob", "problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100))))
	// The stored values are already right for the pre-move state (as Back-End's
	// old code or an earlier materializer left them): bring them there first
	// with a plain rebuild on a throwaway engine, then forget its key index.
	pre := memstore.New()
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		must(pre.Load(c, st.Collection(c)...))
	}
	if _, err := watch.Rebuild(context.Background(), pre, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	st = memstore.New()
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		must(st.Load(c, pre.Collection(c)...))
	}
	ds := &dupScan{Store: st, moved: s1}
	eng := &watch.Engine{Store: ds, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Metrics: watch.NewMetrics(nil),
		Config: watch.Config{BatchSize: 64, BatchMaxWait: time.Hour}}
	if err := eng.Drain(context.Background()); err != nil { // initial rebuild, then the stream replays the move
		t.Fatal(err)
	}
	ds.moved = bson.ObjectID{}
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diffs := biDiffConverged(st); len(diffs) > 0 {
		for _, d := range diffs {
			t.Log(d)
		}
		t.Errorf("after the stream drained, stored derived values differ from Derive (%d diffs)", len(diffs))
	}
}
