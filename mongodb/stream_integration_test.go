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
func TestIntegrationNextCancelledKillsCursor(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	// The getMore waits long enough to be cancelled during it (at 300ms),
	// ends well before Close's 5 s bound (Close waits for it, then kills
	// the cursor), and takes longer than the 2 s a Next returning at once
	// may take.
	db.cfg.MaxAwait = 3 * time.Second
	if err := db.db.CreateCollection(ctx, materialize.CollUser); err != nil {
		t.Fatal(err)
	}
	st, err := db.Open(ctx, watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Next(ctx); err != nil { // the aggregate's first batch
		t.Fatal(err)
	}
	id := st.(*Stream).cs.ID()
	if id == 0 {
		t.Fatal("the server closed the stream's cursor")
	}
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
	if err := st.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
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
