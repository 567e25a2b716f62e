package mongodb

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/drivertest"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestNextCancelledKillsCursor: when the caller's context ends while a
// getMore waits on the server, Next returns at once with a Cancelled
// error, and the cursor is still killed: Close sends a killCursors that
// the server answers. The mock deployment's getMore waits until its own
// context ends or Next has returned; the test cancels the caller's
// context as the getMore starts. Close must wait for that getMore before
// it kills the cursor. A getMore under the caller's context
// would end there and the driver would close the cursor under the ended
// context (no killCursors) and zero its id (Close sends none). The event
// the left getMore received was never returned: ResumeToken stays before
// it.
func TestNextCancelledKillsCursor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan struct{})
	var mu sync.Mutex
	var started, succeeded []string
	var killed bson.Raw
	mon := &event.CommandMonitor{
		Started: func(opCtx context.Context, e *event.CommandStartedEvent) {
			mu.Lock()
			started = append(started, e.CommandName)
			if e.CommandName == "killCursors" {
				killed = append(bson.Raw(nil), e.Command...)
			}
			mu.Unlock()
			if e.CommandName == "getMore" {
				cancel() // SIGTERM, a lost lease, while the server waits for events
				select {
				case <-opCtx.Done():
				case <-returned:
				case <-time.After(time.Minute): // a hang
				}
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			mu.Lock()
			defer mu.Unlock()
			succeeded = append(succeeded, e.CommandName)
		},
	}
	d, md := monitorMockDB(t, mon)
	// The getMore Next leaves receives an event: it was never returned, so
	// the stream's token must not pass it.
	left := bson.D{{Key: "_id", Value: token(1_800_000_000, 2)}, {Key: "operationType", Value: "insert"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1_800_000_000, I: 2}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: "submission"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: bson.NewObjectID()}}}}
	md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)),
		streamReply(false, 42, bson.A{left}, token(1_800_000_000, 3)),
		bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}})
	st, err := d.Open(context.Background(), watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Next(ctx); ok || err != nil { // the aggregate's empty first batch: no getMore
		t.Fatalf("first Next = %v, %v; want no event", ok, err)
	}
	_, ok, err := st.Next(ctx)
	close(returned)
	if ok || watch.Classify(ctx, err) != watch.Cancelled {
		t.Fatalf("Next cancelled during its getMore = %v, %v; want a cancelled error", ok, err)
	}
	if err := st.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, want := st.ResumeToken(), bson.Raw(mustMarshal(t, token(1_800_000_000, 1))); !bytes.Equal(got, want) {
		t.Errorf("ResumeToken after the cancelled Next and Close = %s, want %s (the token before the getMore it left)", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	// The getMore Next left ends first (its reply read), then Close kills
	// the cursor it left open.
	if want := []string{"aggregate", "getMore", "killCursors"}; !slices.Equal(succeeded, want) {
		t.Fatalf("commands started %v, answered %v: want %v answered", started, succeeded, want)
	}
	if id, ok := killed.Lookup("cursors", "0").Int64OK(); !ok || id != 42 {
		t.Errorf("killCursors %s, want cursor 42", killed)
	}
}

// TestNextCancelledMidResume: when the caller's context ends while the
// driver resumes inside Next (a resumable getMore error, then killCursors
// of the old cursor and a new aggregate), Next returns at once, the resume
// completes, and Close kills the cursor the new aggregate opened. Under
// the caller's context the aggregate would fail after it started
// (x/mongo/driver/operation.go:818-819) and a cursor the server opened
// for it would be left.
func TestNextCancelledMidResume(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan struct{})
	var mu sync.Mutex
	var succeeded []string
	var killed []int64
	aggregates := 0
	mon := &event.CommandMonitor{
		Started: func(opCtx context.Context, e *event.CommandStartedEvent) {
			mu.Lock()
			if e.CommandName == "killCursors" {
				id, _ := e.Command.Lookup("cursors", "0").Int64OK()
				killed = append(killed, id)
			}
			if e.CommandName == "aggregate" {
				aggregates++
			}
			resuming := e.CommandName == "aggregate" && aggregates == 2
			mu.Unlock()
			if resuming {
				cancel() // SIGTERM during the driver's resume
				select {
				case <-opCtx.Done():
				case <-returned:
				case <-time.After(time.Minute): // a hang
				}
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			mu.Lock()
			defer mu.Unlock()
			succeeded = append(succeeded, e.CommandName)
		},
	}
	d, md := monitorMockDB(t, mon)
	md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)),
		commandError(91, "ShutdownInProgress", "shutting down", "ResumableChangeStreamError"),
		bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}},
		streamReply(true, 43, bson.A{}, token(1_800_000_000, 2)),
		bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(43)}}})
	st, err := d.Open(context.Background(), watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Next(ctx); ok || err != nil { // the aggregate's empty first batch: no getMore
		t.Fatalf("first Next = %v, %v; want no event", ok, err)
	}
	_, ok, err := st.Next(ctx)
	close(returned)
	if ok || watch.Classify(ctx, err) != watch.Cancelled {
		t.Fatalf("Next cancelled during the driver's resume = %v, %v; want a cancelled error", ok, err)
	}
	if err := st.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"aggregate", "killCursors", "aggregate", "killCursors"}; !slices.Equal(succeeded, want) {
		t.Fatalf("commands answered %v, want %v", succeeded, want)
	}
	if want := []int64{42, 43}; !slices.Equal(killed, want) {
		t.Errorf("killCursors of cursors %v, want %v", killed, want)
	}
}

// TestNextStartAfterResumeRefused: a stream opened with startAfter (an
// invalidate event's token) whose first getMore fails with a resumable
// error is resumed by the driver with resumeAfter, which the server
// refuses from that token (260 InvalidResumeToken). The fault policy must
// answer with a reopen at the checkpoint (which uses startAfter), not a
// rebuild. Once the driver's token has moved past the one the stream was
// opened at (an event, or a later postBatchResumeToken of an empty
// getMore), its resumeAfter is what the change streams specification
// asks for too, and a 260 is the token's own: a rebuild.
func TestNextStartAfterResumeRefused(t *testing.T) {
	inv := token(1_800_000_000, 5)
	pbrt := token(1_800_000_002, 1) // a quiet getMore's postBatchResumeToken, past inv
	ev := bson.D{{Key: "_id", Value: token(1_800_000_001, 1)}, {Key: "operationType", Value: "insert"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1_800_000_001, I: 1}},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: "submission"}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: bson.NewObjectID()}}}}
	cases := []struct {
		name   string
		at     watch.Position
		first  bson.A   // the aggregate's first batch
		before []bson.D // getMore replies before the one that fails
		resume bson.D   // the token the driver's resume must send as resumeAfter
		want   watch.Action
	}{
		{"fresh startAfter", watch.Position{Token: bson.Raw(mustMarshal(t, inv))}, bson.A{}, nil, inv, watch.ActReopen},
		{"fresh startAfter, a quiet getMore at the same token", watch.Position{Token: bson.Raw(mustMarshal(t, inv))}, bson.A{},
			[]bson.D{streamReply(false, 42, bson.A{}, inv)}, inv, watch.ActReopen},
		{"after an event", watch.Position{Token: bson.Raw(mustMarshal(t, inv))}, bson.A{ev}, nil, ev[0].Value.(bson.D), watch.ActRebuild},
		{"after a quiet getMore's later token", watch.Position{Token: bson.Raw(mustMarshal(t, inv))}, bson.A{},
			[]bson.D{streamReply(false, 42, bson.A{}, pbrt)}, pbrt, watch.ActRebuild},
		{"opened at a time", watch.Position{StartAt: bson.Timestamp{T: 1_800_000_000, I: 1}}, bson.A{}, nil, inv, watch.ActRebuild},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, sent := mockDB(t)
			at := inv // the first batch's postBatchResumeToken: its last event's token, or the start
			if len(c.first) > 0 {
				at = ev[0].Value.(bson.D)
			}
			md.AddResponses(streamReply(true, 42, c.first, at))
			md.AddResponses(c.before...)
			md.AddResponses(commandError(91, "ShutdownInProgress", "shutting down", "ResumableChangeStreamError"),
				bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}},
				commandError(260, "InvalidResumeToken", "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification."))
			st, err := d.Open(context.Background(), c.at)
			if err != nil {
				t.Fatal(err)
			}
			var nerr error
			for range 5 {
				if _, ok, err := st.Next(context.Background()); !ok && err != nil {
					nerr = err
					break
				}
			}
			ctx := context.Background()
			if got := watch.Decide(watch.Classify(ctx, nerr), watch.PhaseStreamNext); got != c.want {
				t.Errorf("Next: %v (class %s): action %s, want %s", nerr, watch.Classify(ctx, nerr), got, c.want)
			}
			// The driver's resume, as read in mongo/change_stream.go
			// replaceOptions: resumeAfter with the cached token, whatever
			// option opened the stream.
			cmds := sent()
			stage, _ := cmds[len(cmds)-1].Lookup("pipeline", "0", "$changeStream").DocumentOK()
			if got, _ := stage.Lookup("resumeAfter").DocumentOK(); !bytes.Equal(got, mustMarshal(t, c.resume)) {
				t.Errorf("the driver's resume sent %s, want resumeAfter %v (the driver changed: revisit Next)", stage, c.resume)
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// monitorMockDB is a DB on the driver's mock deployment (as mockDB) with
// the command monitor mon.
func monitorMockDB(t *testing.T, mon *event.CommandMonitor) (*DB, *drivertest.MockDeployment) {
	t.Helper()
	md := drivertest.NewMockDeployment()
	opts := options.Client().SetMonitor(mon)
	if err := xoptions.SetInternalClientOptions(opts, "deployment", md); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return newDB(client, Config{}.withDefaults()), md
}

// TestGetMoreBound: one Next's getMore is abandoned only well after the
// server's wait for it ends (the configured maxAwaitTimeMS, or the
// server's 1 s default when none is sent), so a healthy quiet stream is
// never cut; and the bound is finite, so a silent server surfaces.
// Seen failing with the bound taken as the server's default whatever
// MaxAwait says.
func TestGetMoreBound(t *testing.T) {
	for _, maxAwait := range []time.Duration{0, 200 * time.Millisecond, 5 * time.Second, time.Minute} {
		wait := maxAwait
		if wait == 0 {
			wait = time.Second // the server's default
		}
		got := getMoreBound(Config{MaxAwait: maxAwait})
		if got < wait+5*time.Second || got > wait+time.Minute {
			t.Errorf("MaxAwait %v: bound %v, want the server's wait %v plus a margin of 5 s to a minute", maxAwait, got, wait)
		}
	}
}
