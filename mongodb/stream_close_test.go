package mongodb

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/normal-oj/noj-materializer/watch"
)

// killLog records the commands a mock deployment answered and every
// killCursors started, as (collection, cursor id).
type killLog struct {
	mu        sync.Mutex
	succeeded []string
	kills     []killCmd
}

type killCmd struct {
	coll string
	id   int64
}

func (l *killLog) monitor(started func(ctx context.Context, name string)) *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "killCursors" {
				coll, _ := e.Command.Lookup("killCursors").StringValueOK()
				id, _ := e.Command.Lookup("cursors", "0").Int64OK()
				l.mu.Lock()
				l.kills = append(l.kills, killCmd{coll, id})
				l.mu.Unlock()
			}
			if started != nil {
				started(ctx, e.CommandName)
			}
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.succeeded = append(l.succeeded, e.CommandName)
		},
	}
}

func (l *killLog) answered() ([]string, []killCmd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.succeeded), slices.Clone(l.kills)
}

var cursorKilled42 = bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}}

// TestCloseWaitsForLeftGetMorePastKillBound: Close waits for the getMore
// a cancelled Next left running for as long as its context allows, not
// only for the killCursors' own bound, and then kills the cursor. A
// maxAwaitTimeMS (MATERIALIZER_BATCH_MAX_WAIT) longer than that bound
// made every stop cut the getMore and leave the cursor on the server.
// Here the bound is 20 ms and the server answers the getMore 200 ms after
// Close started waiting. The driver's killCursors names the collection
// streamCursorColl, which Close's own killCursors of a cut cursor uses.
func TestCloseWaitsForLeftGetMorePastKillBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var log killLog
	d, md := monitorMockDB(t, log.monitor(func(opCtx context.Context, name string) {
		if name == "getMore" {
			cancel() // a stop while the server waits for events
			select {
			case <-opCtx.Done():
			case <-release:
			}
		}
	}))
	md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)),
		streamReply(false, 42, bson.A{}, token(1_800_000_000, 2)), cursorKilled42)
	ws, err := d.Open(context.Background(), watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	st := ws.(*Stream)
	st.killBound = 20 * time.Millisecond
	if _, ok, err := st.Next(ctx); ok || err != nil { // the aggregate's empty first batch
		t.Fatalf("first Next = %v, %v; want no event", ok, err)
	}
	if _, _, err := st.Next(ctx); watch.Classify(ctx, err) != watch.Cancelled {
		t.Fatalf("Next cancelled during its getMore: %v, want a cancelled error", err)
	}
	// The server's reply to the getMore comes well after the kill bound.
	time.AfterFunc(10*st.killBound, func() { close(release) })
	if err := st.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	answered, kills := log.answered()
	if want := []string{"aggregate", "getMore", "killCursors"}; !slices.Equal(answered, want) {
		t.Fatalf("commands answered %v, want %v: the getMore's cursor left on the server", answered, want)
	}
	if want := []killCmd{{streamCursorColl, 42}}; !slices.Equal(kills, want) {
		t.Errorf("killCursors sent %v, want %v", kills, want)
	}
}

// TestCloseKillsCursorCutByGetMoreBound: a getMore cut off by Next's own
// bound (a server silent past maxAwaitTimeMS and the margin) ends under
// an ended context, so the driver closes the cursor sending no
// killCursors and zeroes its id (mongo/change_stream.go:765,
// x/mongo/driver/operation.go:818-819, batch_cursor.go:295-301). Close
// kills that cursor itself. The mock's getMore waits until its context
// ends: the bound is what ends it.
func TestCloseKillsCursorCutByGetMoreBound(t *testing.T) {
	var log killLog
	d, md := monitorMockDB(t, log.monitor(func(opCtx context.Context, name string) {
		if name == "getMore" {
			<-opCtx.Done()
		}
	}))
	md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)), cursorKilled42)
	ws, err := d.Open(context.Background(), watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	st := ws.(*Stream)
	st.wait = 50 * time.Millisecond
	ctx := context.Background()
	if _, ok, err := st.Next(ctx); ok || err != nil {
		t.Fatalf("first Next = %v, %v; want no event", ok, err)
	}
	_, ok, err := st.Next(ctx)
	if ok || err == nil {
		t.Fatalf("Next whose getMore its bound cut = %v, %v; want an error", ok, err)
	}
	if got := watch.Decide(watch.Classify(ctx, err), watch.PhaseStreamNext); got != watch.ActReopen {
		t.Errorf("cut getMore: %v: action %s, want %s", err, got, watch.ActReopen)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	answered, kills := log.answered()
	if !slices.Contains(answered, "killCursors") || !slices.Contains(kills, killCmd{streamCursorColl, 42}) {
		t.Fatalf("commands answered %v, killCursors sent %v: want cursor 42 killed on %s", answered, kills, streamCursorColl)
	}
}
