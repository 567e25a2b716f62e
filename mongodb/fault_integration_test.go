package mongodb

// Integration tests of the fault policy, adapter side, against
// a real server; they skip like every TestIntegration* test when none is
// configured (see mongodb_integration_test.go). The ones needing a shape
// the shared one-node test set cannot take (a secondary, a mongos, a
// member down) read their own variable and say how to run them.

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// envURI returns the variable's URI or skips t saying what to set.
func envURI(t *testing.T, name, what string) string {
	t.Helper()
	uri := os.Getenv(name)
	if uri == "" {
		t.Skipf("set %s to %s", name, what)
	}
	return uri
}

// TestIntegrationRecordKeysRefused (defect 3): a key-index write the
// server refuses for good (the key collection's validator) is
// watch.Refused and wraps watch.ErrWriteRejected.
func TestIntegrationRecordKeysRefused(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	validator := bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "required", Value: bson.A{"never"}}}}}
	if err := db.db.CreateCollection(ctx, db.keys.Name(), options.CreateCollection().SetValidator(validator)); err != nil {
		t.Fatal(err)
	}
	err := db.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{bson.NewObjectID(): {{User: "a", Problem: 1}}})
	if watch.ClassOf(err) != watch.Refused || !errors.Is(err, watch.ErrWriteRejected) {
		t.Errorf("RecordKeys refused by the validator: %v (class %s), want refused wrapping ErrWriteRejected", err, watch.ClassOf(err))
	}
}

// TestIntegrationUnauthorizedNamesPrivilege (defect 4): a role without
// update on user gets watch.Unauthorized from Apply, naming the action
// and the collection. Needs a server enforcing authorization, like
// TestIntegrationLeastPrivilege.
func TestIntegrationUnauthorizedNamesPrivilege(t *testing.T) {
	admin := testDB(t)
	ctx := testCtx(t)
	if !authEnforced(ctx, t) {
		t.Skip("the test server does not enforce authorization: start mongod with --auth (and --keyFile for a replica set) and give MATERIALIZER_TEST_MONGODB_URI a user that may create roles")
	}
	role := map[string][]string{}
	for coll, acts := range leastPrivilege {
		if coll != materialize.CollUser {
			role[coll] = acts
		}
	}
	role[materialize.CollUser] = []string{"find"} // no update
	uri := userWithRole(ctx, t, admin, "nojNoUserUpdate", "noj-no-user-update", role)
	db, err := Open(ctx, Config{URI: uri, Database: admin.Database()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := admin.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: materialize.UserStats{ACProblemIDs: []int64{}}}}})
	if watch.ClassOf(err) != watch.Unauthorized || !strings.Contains(err.Error(), `"update"`) || !strings.Contains(err.Error(), admin.Database()+".user") {
		t.Errorf("Apply without update on user: %v (class %s), want unauthorized naming \"update\" on the user collection", err, watch.ClassOf(err))
	}
}

// TestIntegrationDirectSecondaryRefused (defect 5): directConnection=true
// to a secondary is refused by Open for the commands that write, naming
// the replica set URI, and accepted for the read-only ones.
func TestIntegrationDirectSecondaryRefused(t *testing.T) {
	uri := envURI(t, "MATERIALIZER_TEST_MONGODB_SECONDARY_URI", "a URI reaching one secondary of a replica set with directConnection=true, e.g. mongodb://127.0.0.1:27018/?directConnection=true")
	ctx := testCtx(t)
	_, err := Open(ctx, Config{URI: uri, Writes: true})
	if watch.ClassOf(err) != watch.NotPrimary || !strings.Contains(err.Error(), "replicaSet=") {
		t.Errorf("Open for writes of a secondary: %v (class %s), want not_primary naming replicaSet=", err, watch.ClassOf(err))
	}
	db, err := Open(ctx, Config{URI: uri})
	if err != nil {
		t.Fatalf("Open read-only of a secondary: %v", err)
	}
	_ = db.Close(ctx)
}

// TestIntegrationCommitQuorumMajority (defect 6): createIndexes carries
// commitQuorum "majority", which a replica set accepts. With
// MATERIALIZER_TEST_MONGODB_MEMBER_DOWN_URI (a set of three data-bearing
// voting members with one stopped) the builds also finish instead of
// waiting for the stopped member.
func TestIntegrationCommitQuorumMajority(t *testing.T) {
	db := testDB(t)
	client, log := monitoredClient(t)
	ctx := testCtx(t)
	mdb := client.Database(db.Database())
	if _, err := mdb.Collection(materialize.CollSubmission).InsertOne(ctx, bson.D{{Key: "user", Value: "a"}, {Key: "problem", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := ensureIndexes(ctx, driverIndexes{db: mdb}, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range log.named("createIndexes") {
		if q, _ := c.Lookup("commitQuorum").StringValueOK(); q != "majority" {
			t.Errorf("createIndexes %s: want commitQuorum majority", c)
		}
	}
	uri := os.Getenv("MATERIALIZER_TEST_MONGODB_MEMBER_DOWN_URI")
	if uri == "" {
		t.Skip("set MATERIALIZER_TEST_MONGODB_MEMBER_DOWN_URI to the URI of a three-member replica set with one data-bearing voting member stopped to check that the builds finish")
	}
	down, err := Open(ctx, Config{URI: uri, Database: db.Database(), Writes: true})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close(context.Background())
	bctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := down.EnsureIndexes(bctx, nil); err != nil {
		t.Errorf("EnsureIndexes with a member down: %v, want the builds committed by a majority", err)
	}
}

// TestIntegrationReadsAfterOwnWrites (defect 8): after Apply, a read under
// a batch whose last event is older than the write carries
// afterClusterTime at least the write's operationTime.
func TestIntegrationReadsAfterOwnWrites(t *testing.T) {
	base := testDB(t)
	client, log := monitoredClient(t)
	ctx := testCtx(t)
	db := newDB(client, Config{Database: base.Database()}.withDefaults())
	if _, err := db.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	old, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: materialize.UserStats{Submission: 1, ACProblemIDs: []int64{}}}}}); err != nil {
		t.Fatal(err)
	}
	wrote := db.written.load()
	if !old.Before(wrote) {
		t.Fatalf("write clock %v not after %v", wrote, old)
	}
	if _, err := db.Users(watch.WithReadAfter(ctx, old), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	finds := log.named("find")
	after := finds[len(finds)-1].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}).Before(wrote) {
		t.Errorf("afterClusterTime %v, want at least the write's operationTime %v", after, wrote)
	}
}

// TestIntegrationClusterTimeThroughMongos (defect 9): through a mongos,
// ClusterTime is the postBatchResumeToken's time: a write acknowledged
// before it is visible to a majority read, and a write after it is
// delivered by a stream started at it.
func TestIntegrationClusterTimeThroughMongos(t *testing.T) {
	uri := envURI(t, "MATERIALIZER_TEST_MONGOS_URI", "a mongos of a sharded cluster (two shards or more), e.g. mongodb://127.0.0.1:27017/")
	ctx := testCtx(t)
	db, err := Open(ctx, Config{URI: uri, Database: "materializer_test_mongos", MaxAwait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.db.Drop(context.Background()); _ = db.Close(context.Background()) }()
	if !db.sharded {
		t.Fatal("hello of a mongos not recognised (msg isdbgrid)")
	}
	before := bson.NewObjectID()
	if _, err := db.submissions.InsertOne(ctx, bson.D{{Key: "_id", Value: before}, {Key: "user", Value: "a"}, {Key: "problem", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	ts, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subs, _, err := db.SubmissionsByID(ctx, []bson.ObjectID{before})
	if err != nil || len(subs) != 1 {
		t.Errorf("a write before ClusterTime is not visible: %v, %v", subs, err)
	}
	after := bson.NewObjectID()
	if _, err := db.submissions.InsertOne(ctx, bson.D{{Key: "_id", Value: after}, {Key: "user", Value: "a"}, {Key: "problem", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	st, err := db.Open(ctx, watch.Position{StartAt: ts})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	for {
		ev, err := nextEvent(t, st)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Change.SubmissionID == after {
			return
		}
	}
}

// TestIntegrationCloseBounded (defect 11): a killCursors the server does
// not answer (failCommand blocking it) does not hold Close longer than
// closeTimeout.
func TestIntegrationCloseBounded(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	st, err := db.Open(ctx, watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	admin := db.client.Database("admin")
	if err := admin.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"killCursors"}}, {Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: 60_000}}}}).Err(); err != nil {
		t.Skipf("failCommand fail point unavailable (start mongod with --setParameter enableTestCommands=1): %v", err)
	}
	defer admin.RunCommand(context.Background(), bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	start := time.Now()
	_ = st.Close(context.WithoutCancel(ctx))
	// The close bound, not the 60 s block: a bound far from both holds
	// on a loaded machine.
	if took := time.Since(start); took > closeTimeout+25*time.Second {
		t.Errorf("Close took %s with killCursors blocked, want at most about %s", took, closeTimeout)
	}
}
