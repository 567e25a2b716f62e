package watch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// quietFeed is a change stream on which no watched event arrives while
// the oplog moves on (writes to other collections): every poll returns no
// event and a postBatchResumeToken that names the current fake time.
type quietFeed struct {
	now    func() time.Time
	opened []watch.Position
}

func (f *quietFeed) Open(_ context.Context, at watch.Position) (watch.Stream, error) {
	f.opened = append(f.opened, at)
	return quietStream{f.now}, nil
}

type quietStream struct{ now func() time.Time }

func (quietStream) Next(ctx context.Context) (watch.Event, bool, error) {
	return watch.Event{}, false, ctx.Err()
}
func (s quietStream) ResumeToken() bson.Raw     { return pbrt(s.now()) }
func (quietStream) Close(context.Context) error { return nil }

func pbrt(t time.Time) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: fmt.Sprintf("pbrt-%d", t.Unix())}})
	must(err)
	return b
}

// recordingCheckpoints records every checkpoint saved.
type recordingCheckpoints struct {
	resume.Store
	saved []resume.Checkpoint
}

func (r *recordingCheckpoints) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	if err := r.Store.SaveCheckpoint(ctx, cp); err != nil {
		return err
	}
	r.saved = append(r.saved, cp)
	return nil
}

// TestQuietStreamCheckpoints: a stream with no events still saves its
// postBatchResumeToken every CheckpointInterval (on a fake clock), marked
// as caught up, so its resume point keeps up with the oplog; it does not
// save more often than that.
func TestQuietStreamCheckpoints(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }
	st := memstore.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	initial := resume.Checkpoint{Token: pbrt(start.Add(-time.Hour)), SavedAt: start.Add(-time.Hour)}
	must(st.SaveCheckpoint(ctx, initial))
	cps := &recordingCheckpoints{Store: st}
	feed := &quietFeed{now: clock}
	const runFor = 35 * time.Second
	eng := &watch.Engine{Store: st, Feed: feed, Checkpoints: cps, Log: zerolog.Nop(), Now: clock,
		Sleep: func(ctx context.Context, d time.Duration) {
			now = now.Add(d)
			if now.Sub(start) > runFor {
				cancel()
			}
		},
		Config: watch.Config{CheckpointInterval: 10 * time.Second, IdlePause: time.Second}}
	if err := eng.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(feed.opened) != 1 || string(feed.opened[0].Token) != string(initial.Token) {
		t.Fatalf("stream opened at %v, want once at the saved token", feed.opened)
	}
	// Saves at 10s, 20s and 30s of quiet, each with the token of that moment.
	if len(cps.saved) != 3 {
		t.Fatalf("%d checkpoints saved in %s of quiet with a 10s interval, want 3: %+v", len(cps.saved), runFor, cps.saved)
	}
	for i, cp := range cps.saved {
		at := start.Add(time.Duration(i+1) * 10 * time.Second)
		if !cp.SavedAt.Equal(at) || !cp.CaughtUpAt.Equal(at) {
			t.Errorf("save %d: saved at %s, caught up at %s; want both %s", i, cp.SavedAt, cp.CaughtUpAt, at)
		}
		if string(cp.Token) != string(pbrt(at)) {
			t.Errorf("save %d: token %s, want the postBatchResumeToken of that moment %s", i, cp.Token, pbrt(at))
		}
	}
	last, _, _ := st.LoadCheckpoint(ctx)
	if string(last.Token) != string(cps.saved[2].Token) {
		t.Errorf("stored checkpoint %s, want the last postBatchResumeToken", last.Token)
	}
}

// failingFeed wraps a memstore feed: the stream it opens fails once,
// with a transient error, at the failAt-th call of Next, after the events
// before it were read into the batch. Delivered records every event read.
type failingFeed struct {
	*memstore.Store
	failAt    int
	delivered []watch.Event
}

func (f *failingFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.Store.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &failingStream{Stream: s, f: f}, nil
}

type failingStream struct {
	watch.Stream
	f     *failingFeed
	calls int
}

var errStreamBroke = errors.New("connection reset mid-batch")

func (s *failingStream) Next(ctx context.Context) (watch.Event, bool, error) {
	s.calls++
	if s.calls == s.f.failAt {
		s.f.failAt = 0 // once
		return watch.Event{}, false, fmt.Errorf("%w: %w", errStreamBroke, watch.ErrTransient)
	}
	ev, ok, err := s.Stream.Next(ctx)
	if ok && err == nil {
		s.f.delivered = append(s.f.delivered, ev)
	}
	return ev, ok, err
}

// TestMidBatchStreamErrorKeepsBatch: a stream error after some events of
// a batch were read does not drop them: they are processed, their derived
// values written and the last one's token saved before the error is
// reported; reopening from that checkpoint delivers only the rest.
func TestMidBatchStreamErrorKeepsBatch(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	hw := bson.ObjectID{11: 0xa1}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	users := []string{"alice", "bob", "carol"}
	ss := bson.D{}
	for _, u := range users {
		must(st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
		ss = append(ss, bson.E{Key: u, Value: mtest.D("7", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))})
	}
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", ss)))
	feed := &failingFeed{Store: st}
	eng := &watch.Engine{Store: st, Feed: feed, Checkpoints: st, Log: zerolog.Nop(),
		Config: watch.Config{BatchSize: 64, BatchMaxWait: time.Hour}}
	if err := eng.Drain(ctx); err != nil { // initial rebuild and checkpoint
		t.Fatal(err)
	}
	// Three judged submissions, one per user: three insert events.
	for i, u := range users {
		ts := end.Add(-time.Duration(i+1) * time.Hour)
		id := bson.NewObjectIDFromTimestamp(ts)
		must(st.Insert(materialize.CollSubmission, mtest.Raw("_id", id, "user", u, "problem", int32(7), "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100))))
	}
	feed.delivered = nil
	feed.failAt = 3 // two events read, then the stream breaks
	err := eng.Drain(ctx)
	if !errors.Is(err, errStreamBroke) || !errors.Is(err, watch.ErrTransient) {
		t.Fatalf("drain: %v, want the transient stream error", err)
	}
	if len(feed.delivered) != 2 {
		t.Fatalf("%d events read before the error, want 2", len(feed.delivered))
	}
	// The two events read were processed: alice and bob hold their derived
	// values; carol's submission (not read yet) is not counted.
	docs := st.Docs()
	var firstTwo []bson.Raw
	for _, raw := range docs.Submissions {
		if u, _ := raw.Lookup("user").StringValueOK(); u != "carol" {
			firstTwo = append(firstTwo, raw)
		}
	}
	want := reference.Derive(reference.DB{Users: docs.Users, Problems: docs.Problems, Homeworks: docs.Homeworks, Submissions: firstTwo})
	if d := reference.Compare(want, refDB(docs)); len(d) > 0 {
		t.Errorf("after the error, stored values differ from the derivation of the two events read: %v", d)
	}
	if d := reference.Check(refDB(docs)); len(d) == 0 {
		t.Errorf("carol's submission was counted before its event was read; the test proves nothing")
	}
	cp, _, _ := st.LoadCheckpoint(ctx)
	if string(cp.Token) != string(feed.delivered[1].Token) {
		t.Errorf("checkpoint %s after the error, want the token of the second event %s", cp.Token, feed.delivered[1].Token)
	}
	// Reopened from there: only the third event comes, and all converge.
	feed.delivered = nil
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// (The rest are the echoes of the derived writes of the first batch.)
	var subEvents []watch.Event
	for _, ev := range feed.delivered {
		if ev.Change.Collection == materialize.CollSubmission {
			subEvents = append(subEvents, ev)
		}
	}
	if len(subEvents) != 1 || subEvents[0].Change.Pair.User != "carol" {
		t.Errorf("%d submission events delivered after reopening, want only carol's, not yet processed", len(subEvents))
	}
	checkConverged(t, st, "after reopening")
}

// TestBatchSizeBound: a batch holds at most BatchSize events; each batch's
// checkpoint is the token of its last event. The events touch no derived
// input (a lastSend update), so no derived write or echo interferes.
func TestBatchSizeBound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	drain(t, f.st)
	first := f.st.OplogLen()
	for i := 0; i < 5; i++ {
		doc := f.st.Get(materialize.CollSubmission, id)
		must(f.st.Update(materialize.CollSubmission, setFields(doc, "lastSend", bson.DateTime(i)), []string{"lastSend"}))
	}
	cps := &recordingCheckpoints{Store: f.st}
	var served []watch.Event
	feed := &recordingFeed{Feed: f.st, events: &served}
	eng := &watch.Engine{Store: f.st, Feed: feed, Checkpoints: cps, Log: zerolog.Nop(),
		// A checkpoint after every batch: the saves show the batches.
		Config: watch.Config{BatchSize: 2, BatchMaxWait: time.Hour, CheckpointEvery: -1}}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(served) != 5 || f.st.OplogLen() != first+5 {
		t.Fatalf("setup: %d events served, oplog %d → %d", len(served), first, f.st.OplogLen())
	}
	var batchSaves []string
	for _, cp := range cps.saved {
		if !cp.ClusterTime.IsZero() && cp.CaughtUpAt.IsZero() {
			batchSaves = append(batchSaves, string(cp.Token))
		}
	}
	want := []string{string(served[1].Token), string(served[3].Token), string(served[4].Token)}
	if fmt.Sprint(batchSaves) != fmt.Sprint(want) {
		t.Errorf("batch checkpoints %q, want after events 2, 4 and 5: %q", batchSaves, want)
	}
}

// recordingFeed records every event its streams deliver.
type recordingFeed struct {
	watch.Feed
	events *[]watch.Event
}

func (f *recordingFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.Feed.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &recordingStream{Stream: s, events: f.events}, nil
}

type recordingStream struct {
	watch.Stream
	events *[]watch.Event
}

func (s *recordingStream) Next(ctx context.Context) (watch.Event, bool, error) {
	ev, ok, err := s.Stream.Next(ctx)
	if ok && err == nil {
		*s.events = append(*s.events, ev)
	}
	return ev, ok, err
}

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
