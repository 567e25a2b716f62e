package mongodb

// Integration tests of the fault policy (watch/fault.go, the engine side) against a
// real replica set; they skip like every TestIntegration* test when none
// is configured (see mongodb_integration_test.go). The failCommand fail
// point needs mongod --setParameter enableTestCommands=1 (failPoint skips
// otherwise); blockConnection needs 4.4+.

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// faultPoint sets the failCommand fail point for the next times commands
// named cmds with data's other fields (errorCode, errorLabels,
// blockConnection...), skipping t without test commands; off at cleanup.
func faultPoint(t *testing.T, db *DB, times int, data bson.D, cmds ...string) {
	t.Helper()
	ctx := testCtx(t)
	admin := db.client.Database("admin")
	err := admin.RunCommand(ctx, bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: times}}},
		{Key: "data", Value: append(bson.D{{Key: "failCommands", Value: cmds}}, data...)},
	}).Err()
	if err != nil {
		t.Skipf("failCommand fail point unavailable (start mongod with --setParameter enableTestCommands=1): %v", err)
	}
	t.Cleanup(func() {
		_ = admin.RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}}).Err()
	})
}

// runEngine runs eng until cond holds or it returns, for at most 60 s.
func runEngine(t *testing.T, eng *watch.Engine, cond func() bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(50 * time.Millisecond):
			if cond != nil && cond() {
				cancel()
				return <-done
			}
		}
	}
}

// TestIntegrationFaultUnauthorizedExits (defect 4): a user whose role
// lacks update on user gets 13 Unauthorized on the derived write; Run
// returns that error at once (class unauthorized, no retry) instead of
// retrying it forever.
func TestIntegrationFaultUnauthorizedExits(t *testing.T) {
	admin := testDB(t)
	ctx := testCtx(t)
	if !authEnforced(ctx, t) {
		t.Skip("the test server does not enforce authorization: start mongod with --auth (and --keyFile for a replica set) and give MATERIALIZER_TEST_MONGODB_URI a user that may create roles")
	}
	role := maps.Clone(leastPrivilege)
	role["user"] = slices.DeleteFunc(slices.Clone(role["user"]), func(a string) bool { return a == "update" })
	uri := userWithRole(ctx, t, admin, "nojMaterializerNoUserUpdate", "noj-materializer-no-update", role)
	if _, err := admin.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "alice"}, {Key: "submission", Value: int32(0)},
		{Key: "AC_submission", Value: int32(0)}, {Key: "AC_problem_ids", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.db.Collection(materialize.CollProblem).InsertOne(ctx, bson.D{{Key: "_id", Value: int32(7)}, {Key: "homeworks", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, Config{URI: uri, Database: admin.Database(), MaxAwait: 200 * time.Millisecond, WriteTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("open as the restricted user: %v", err)
	}
	defer db.Close(context.Background())
	m := watch.NewMetrics(nil)
	var sleeps int
	eng := &watch.Engine{Store: db, Feed: db, Checkpoints: db, Log: zerolog.Nop(), Metrics: m,
		Sleep: func(context.Context, time.Duration) { sleeps++ }}
	err = runEngine(t, eng, nil) // the initial rebuild writes alice's counts
	if watch.ClassOf(err) != watch.Unauthorized {
		t.Fatalf("Run = %v (class %s), want an Unauthorized exit", err, watch.ClassOf(err))
	}
	var f *watch.Fault
	if !errors.As(err, &f) || f.Action != watch.ActExit {
		t.Errorf("Run = %v, want a Fault decided exit", err)
	}
	if sleeps != 0 {
		t.Errorf("%d retries of an Unauthorized error, want none", sleeps)
	}
}

// TestIntegrationFaultOverloadedBacksOff (defect 10): getMores failed
// with the labels of a server shedding load (SystemOverloadedError,
// RetryableError) back off and reopen; Run does not return and the
// judged submission is still counted.
func TestIntegrationFaultOverloadedBacksOff(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	if _, err := db.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "alice"}, {Key: "submission", Value: int32(0)},
		{Key: "AC_submission", Value: int32(0)}, {Key: "AC_problem_ids", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Collection(materialize.CollProblem).InsertOne(ctx, bson.D{{Key: "_id", Value: int32(7)}, {Key: "homeworks", Value: bson.A{}}}); err != nil {
		t.Fatal(err)
	}
	m := watch.NewMetrics(nil)
	eng := &watch.Engine{Store: db, Feed: db, Checkpoints: db, Log: zerolog.Nop(), Metrics: m,
		Config: watch.Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}}
	if err := eng.Drain(ctx); err != nil { // the initial rebuild and checkpoint
		t.Fatal(err)
	}
	faultPoint(t, db, 3, bson.D{{Key: "errorCode", Value: 1}, {Key: "errorLabels", Value: bson.A{"SystemOverloadedError", "RetryableError"}}}, "getMore")
	if _, err := db.db.Collection(materialize.CollSubmission).InsertOne(ctx, bson.D{{Key: "_id", Value: bson.NewObjectID()},
		{Key: "user", Value: "alice"}, {Key: "problem", Value: int32(7)}, {Key: "languageType", Value: int32(1)},
		{Key: "timestamp", Value: bson.NewDateTimeFromTime(time.Now())}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}}); err != nil {
		t.Fatal(err)
	}
	counted := func() bool {
		var u bson.M
		if err := db.users.FindOne(ctx, bson.D{{Key: "_id", Value: "alice"}}).Decode(&u); err != nil {
			return false
		}
		n, _ := u["submission"].(int32)
		return n == 1
	}
	if err := runEngine(t, eng, counted); err != nil {
		t.Fatalf("Run = %v, want it to back off and go on", err)
	}
	if !counted() {
		t.Fatal("the submission was not counted")
	}
	if n := testutil.ToFloat64(m.Decisions.WithLabelValues("overloaded", "stream_next", "reopen")); n < 1 {
		t.Errorf("%v overloaded reopen decisions, want the getMore failures decided overloaded", n)
	}
}

// TestIntegrationFaultCloseBounded (defect 11): a killCursors the server
// holds for 20 s does not hold up shutdown: the engine's close gives up
// after 5 s and Run returns.
func TestIntegrationFaultCloseBounded(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	eng := &watch.Engine{Store: db, Feed: db, Checkpoints: db, Log: zerolog.Nop(), Metrics: watch.NewMetrics(nil)}
	if err := eng.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	faultPoint(t, db, 1, bson.D{{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 20_000}}, "killCursors")
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	for deadline := time.Now().Add(time.Minute); testutil.ToFloat64(eng.Metrics.StreamOpen) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream did not open")
		}
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after shutdown = %v", err)
		}
		// The 5 s close bound, not the 60 s block: a bound far from
		// both holds on a loaded machine.
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("shutdown took %s behind a blocked killCursors, want the 5 s close bound", took)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("Run did not return within 45 s of shutdown: the close is not bounded")
	}
}
