package mongodb

// Integration tests of Stream's cursor handling against a real replica
// set; they skip like every TestIntegration* test when none is configured
// (see mongodb_integration_test.go).

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestIntegrationNextCancelledKillsCursor: a Next whose context ends
// while its getMore waits on the server returns at once, and after Close
// the server holds no cursor of the stream ($currentOp with idleCursors).
// Close runs under the engine's bound, maxAwaitTimeMS plus 5 s: with a
// maxAwaitTimeMS past 5 s too (a killCursors bound started before the
// wait for the getMore would cut it).
func TestIntegrationNextCancelledKillsCursor(t *testing.T) {
	// Each getMore waits long enough to be cancelled during it (at
	// 300ms) and takes longer than the 2 s a Next returning at once may
	// take; Close waits for it, then kills the cursor.
	for _, maxAwait := range []time.Duration{3 * time.Second, 6 * time.Second} {
		t.Run(maxAwait.String(), func(t *testing.T) {
			db := testDB(t)
			ctx := testCtx(t)
			db.cfg.MaxAwait = maxAwait
			st, id := openedStream(t, db)
			nctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(300*time.Millisecond, cancel)
			began := time.Now()
			_, ok, err := st.Next(nctx)
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("Next took %v after its context ended at 300ms, want at once", took)
			}
			if ok || watch.Classify(nctx, err) != watch.Cancelled {
				t.Fatalf("cancelled Next = %v, %v; want a cancelled error", ok, err)
			}
			cctx, ccancel := context.WithTimeout(context.Background(), maxAwait+closeTimeout)
			defer ccancel()
			if err := st.Close(cctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			noCursorLeft(t, db, id)
		})
	}
}

// TestIntegrationCutGetMoreCursorKilled: a getMore its own bound cuts
// off (here 1 s, while the server holds the getMore 3 s with the
// failCommand fail point: a live server answers within maxAwaitTimeMS,
// which the driver shortens to the time left, x/mongo/driver/
// batch_cursor.go:403-423) leaves no cursor on the server once the
// stream is closed.
func TestIntegrationCutGetMoreCursorKilled(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	st, id := openedStream(t, db)
	st.wait = time.Second
	faultPoint(t, db, 1, bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 3000}}, "getMore")
	if _, ok, err := st.Next(ctx); ok || err == nil {
		t.Fatalf("Next whose getMore its bound cut = %v, %v; want an error", ok, err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	noCursorLeft(t, db, id)
}

// openedStream opens a change stream on db, reads its first batch and
// returns it with its cursor's id.
func openedStream(t *testing.T, db *DB) (*Stream, int64) {
	t.Helper()
	ctx := testCtx(t)
	if err := db.db.CreateCollection(ctx, materialize.CollUser); err != nil {
		t.Fatal(err)
	}
	ws, err := db.Open(ctx, watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	st := ws.(*Stream)
	if _, _, err := st.Next(ctx); err != nil { // the aggregate's first batch
		t.Fatal(err)
	}
	id := st.cs.ID()
	if id == 0 {
		t.Fatal("the server closed the stream's cursor")
	}
	return st, id
}

// noCursorLeft fails t when the server still holds cursor id ($currentOp
// with idleCursors; skips when the test user may not run it).
func noCursorLeft(t *testing.T, db *DB, id int64) {
	t.Helper()
	ctx := testCtx(t)
	cur, err := db.client.Database("admin").Aggregate(ctx, bson.A{
		bson.D{{Key: "$currentOp", Value: bson.D{{Key: "idleCursors", Value: true}, {Key: "allUsers", Value: true}}}},
		bson.D{{Key: "$match", Value: bson.D{{Key: "cursor.cursorId", Value: id}}}},
	})
	if err != nil {
		t.Skipf("$currentOp unavailable to the test user (needs inprog): %v", err)
	}
	var left []bson.Raw
	if err := cur.All(ctx, &left); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("cursor %d still on the server after Close: %s", id, left[0])
	}
}

// TestIntegrationStartAfterInvalidateResume: a stream opened with
// startAfter at an invalidate event's token (a dropDatabase) whose first
// getMore fails with a resumable error is resumed by the driver with
// resumeAfter, which the server refuses (260); the fault policy reopens
// (not rebuilds), and the reopened stream works.
func TestIntegrationStartAfterInvalidateResume(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	start, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Open(ctx, watch.Position{StartAt: start})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.db.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	var inv bson.Raw
	for inv == nil {
		ev, err := nextEvent(t, st)
		if err != nil {
			t.Fatalf("waiting for the invalidate event: %v", err)
		}
		if ev.Change.Op == materialize.OpInvalidate {
			inv = ev.Token
		}
	}
	_ = st.Close(ctx)

	faultPoint(t, db, 1, bson.D{{Key: "errorCode", Value: 91}, {Key: "errorLabels", Value: bson.A{"ResumableChangeStreamError"}}}, "getMore")
	st, err = db.Open(ctx, watch.Position{Token: inv})
	if err != nil {
		t.Fatalf("open with startAfter at the invalidate token: %v", err)
	}
	var nerr error
	for range 3 {
		if _, ok, err := st.Next(ctx); !ok && err != nil {
			nerr = err
			break
		}
	}
	_ = st.Close(ctx)
	if nerr == nil {
		t.Skip("the driver's resume succeeded: this server or driver resumes with startAfter")
	}
	if a := watch.Decide(watch.Classify(ctx, nerr), watch.PhaseStreamNext); a != watch.ActReopen {
		t.Errorf("first getMore failed, driver resumed: %v (class %s): action %s, want reopen", nerr, watch.Classify(ctx, nerr), a)
	}
	st, err = db.Open(ctx, watch.Position{Token: inv})
	if err != nil {
		t.Fatalf("reopen with startAfter: %v", err)
	}
	defer st.Close(ctx)
	for range 3 {
		if _, _, err := st.Next(ctx); err != nil {
			t.Fatalf("reopened stream: %v", err)
		}
	}
}
