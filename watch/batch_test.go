package watch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// tickingFeed wraps a feed: every Next of its streams takes step on the
// fake clock clk, as a steady stream of events arriving step apart does.
type tickingFeed struct {
	watch.Feed
	clk  *fakeClock
	step time.Duration
}

func (f *tickingFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.Feed.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &tickingStream{Stream: s, f: f}, nil
}

type tickingStream struct {
	watch.Stream
	f *tickingFeed
}

func (s *tickingStream) Next(ctx context.Context) (watch.Event, bool, error) {
	s.f.clk.Add(s.f.step)
	return s.Stream.Next(ctx)
}

// TestBatchClosesByTimeUnderSteadyStream: under a steady stream (an event
// every 10 ms, never a quiet poll) a batch closes BatchMaxWait after its
// first event, well before BatchSize: 35 events with a wait of 100 ms make
// batches of 11 events (the first at t, the eleventh at t+100ms closes
// it), each checkpointed at its last event's token.
func TestBatchClosesByTimeUnderSteadyStream(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	drain(t, f.st)
	for i := range 35 {
		doc := f.st.Get(materialize.CollSubmission, id)
		must(f.st.Update(materialize.CollSubmission, setFields(doc, "lastSend", bson.DateTime(i)), []string{"lastSend"}))
	}
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	var served []watch.Event
	cps := &recordingCheckpoints{Store: f.st}
	eng := &watch.Engine{Store: f.st, Checkpoints: cps, Log: zerolog.Nop(), Now: clk.Now,
		Feed: &tickingFeed{Feed: &recordingFeed{Feed: f.st, events: &served}, clk: clk, step: 10 * time.Millisecond},
		// A checkpoint after every batch (not the default spacing): the
		// saves show where the batches closed.
		Config: watch.Config{BatchSize: 1000, BatchMaxWait: 100 * time.Millisecond, CheckpointEvery: -1}}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(served) != 35 {
		t.Fatalf("setup: %d events served, want 35", len(served))
	}
	var batchSaves []string
	for _, cp := range cps.saved {
		if !cp.ClusterTime.IsZero() && cp.CaughtUpAt.IsZero() {
			batchSaves = append(batchSaves, string(cp.Token))
		}
	}
	// Batches: events 1-11, 12-22, 23-33 close by time; 34-35 end at the
	// quiet poll that follows.
	want := []string{string(served[10].Token), string(served[21].Token), string(served[32].Token), string(served[34].Token)}
	if fmt.Sprint(batchSaves) != fmt.Sprint(want) {
		t.Errorf("batch checkpoints after events %v, want after events 11, 22, 33 and 35", tokenIndexes(served, batchSaves))
	}
}

func tokenIndexes(served []watch.Event, tokens []string) []int {
	var out []int
	for _, tok := range tokens {
		for i, ev := range served {
			if string(ev.Token) == tok {
				out = append(out, i+1)
			}
		}
	}
	return out
}

// TestDropThenEventsInOneBatch: a drop of a source collection followed by
// other events in the same batch rebuilds once for the whole batch; the
// rebuild, not the short-circuited batch, records the later submission's
// pair in the key index, so its later delete is resolved without another
// rebuild; the checkpoint moves past the batch.
func TestDropThenEventsInOneBatch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	drain(t, f.st)
	f.st.EmitRaw(mtest.D("operationType", "drop", "clusterTime", bson.Timestamp{T: 1_800_000_000, I: 1},
		"ns", mtest.D("db", "normal-oj", "coll", materialize.CollSubmission)))
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	m := watch.NewMetrics(nil)
	eng := newEngine(f.st)
	eng.Metrics = m
	eng.Config.BatchSize = 64
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(m.Rebuilds.WithLabelValues("unresolved")); n != 1 {
		t.Errorf("%v rebuilds for a batch with a drop, want 1", n)
	}
	if u := f.user(t); u.Submission != 1 || u.ACSubmission != 1 {
		t.Errorf("user %+v after the batch, want the submission after the drop counted", u)
	}
	if keys, err := f.st.LookupKeys(ctx, []bson.ObjectID{id}); err != nil || len(keys[id]) != 1 {
		t.Fatalf("key index for the submission after the drop: %v %v, want its pair recorded by the rebuild", keys, err)
	}
	checkConverged(t, f.st, "after a drop and a submission in one batch")
	must(f.st.Delete(materialize.CollSubmission, id))
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(m.UnresolvedPairs); n != 0 {
		t.Errorf("%v unresolved submissions after deleting it, want 0 (its pair is in the key index)", n)
	}
	if n := testutil.ToFloat64(m.Rebuilds.WithLabelValues("unresolved")); n != 1 {
		t.Errorf("%v rebuilds after the delete, want still 1", n)
	}
	checkConverged(t, f.st, "after deleting the submission")
}
