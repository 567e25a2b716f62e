package mongodb

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestIntegrationScansAfterOwnWritesAndHandoff: on a real replica set a
// rebuild's scans (no ReadAfter) carry afterClusterTime at least the
// hand-off time ClusterTime returned and the daemon's own last write, and
// the server accepts it. (The fail-over that makes it matter cannot be
// staged on the shared one-node set; TestScansCausallyAfterOwnWrites and
// TestScansCausallyAfterHandoffOnReplicaSet pin the commands.)
func TestIntegrationScansAfterOwnWritesAndHandoff(t *testing.T) {
	base := testDB(t)
	client, log := monitoredClient(t)
	ctx := testCtx(t)
	db := newDB(client, Config{Database: base.Database()}.withDefaults())
	if _, err := db.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	handoff, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.AllUsers(ctx); err != nil {
		t.Fatal(err)
	}
	finds := log.named("find")
	if len(finds) == 0 {
		t.Fatal("AllUsers sent no find")
	}
	if tt, ti, _ := finds[len(finds)-1].Lookup("readConcern", "afterClusterTime").TimestampOK(); (bson.Timestamp{T: tt, I: ti}).Before(handoff) {
		t.Errorf("scan: afterClusterTime %v.%v, want at least the hand-off time %v", tt, ti, handoff)
	}
	if _, err := db.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: materialize.UserStats{Submission: 1, ACProblemIDs: []int64{}}}}}); err != nil {
		t.Fatal(err)
	}
	wrote := db.written.load()
	if _, _, err := db.AllUsers(ctx); err != nil {
		t.Fatal(err)
	}
	finds = log.named("find")
	if tt, ti, _ := finds[len(finds)-1].Lookup("readConcern", "afterClusterTime").TimestampOK(); (bson.Timestamp{T: tt, I: ti}).Before(wrote) {
		t.Errorf("scan after a write: afterClusterTime %v.%v, want at least the write's operationTime %v", tt, ti, wrote)
	}
}
