package mongodb

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestScansCausallyAfterOwnWrites: a rebuild's scans on a replica set
// (no watch.ReadAfter in ctx: the engine sets none for a rebuild) read
// causally after the daemon's own last acknowledged write. A rebuild
// right after a fail-over (history lost, an unresolved batch) otherwise
// reads the new primary's majority snapshot, which can be older than the
// daemon's last write until the new primary commits in its own term, and
// skips a needed write whose derived value equals that stale one.
func TestScansCausallyAfterOwnWrites(t *testing.T) {
	d, md, sent := mockDB(t)
	wrote := bson.Timestamp{T: 1_800_000_010, I: 2}
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: wrote}})
	if _, err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	sent()
	scans := []struct {
		name  string
		reply bson.D
		call  func() error
	}{
		{"AllUsers", emptyCursor("normal-oj.user"), func() error { _, _, err := d.AllUsers(context.Background()); return err }},
		{"AllProblems", emptyCursor("normal-oj.problem"), func() error { _, _, err := d.AllProblems(context.Background()); return err }},
		{"AllHomeworks", emptyCursor("normal-oj.homework"), func() error { _, _, err := d.AllHomeworks(context.Background()); return err }},
	}
	for _, s := range scans {
		md.AddResponses(s.reply)
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		cmds := sent()
		if len(cmds) == 0 {
			t.Fatalf("%s: no command sent", s.name)
		}
		after := cmds[len(cmds)-1].Lookup("readConcern", "afterClusterTime")
		if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != wrote {
			t.Errorf("%s: afterClusterTime %v, want the daemon's own write's operationTime %v", s.name, after, wrote)
		}
	}
	// ScanSubmissions: one find.
	md.AddResponses(emptyCursor("normal-oj.submission"))
	if err := d.ScanSubmissions(context.Background(), func(materialize.Submission) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	after := cmds[len(cmds)-1].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != wrote {
		t.Errorf("ScanSubmissions: afterClusterTime %v, want %v", after, wrote)
	}
}

// TestScansCausallyAfterHandoffOnReplicaSet: on a replica set too, a
// rebuild's scans read causally after the hand-off time ClusterTime
// returned (the majority commit point of the primary that answered). A
// fail-over between ClusterTime and the scans puts them on a new primary
// whose majority-committed snapshot can trail that time; without
// afterClusterTime they would miss the writes in between, which the
// stream started at the hand-off time does not deliver either.
func TestScansCausallyAfterHandoffOnReplicaSet(t *testing.T) {
	d, md, sent := mockDB(t)
	handoff := bson.Timestamp{T: 1_800_000_000, I: 3}
	reply := append(emptyCursor("normal-oj.materializer_checkpoints"), bson.E{Key: "operationTime", Value: handoff})
	md.AddResponses(reply)
	got, err := d.ClusterTime(context.Background())
	if err != nil || got != handoff {
		t.Fatalf("ClusterTime = %v, %v; want %v", got, err, handoff)
	}
	sent()
	md.AddResponses(emptyCursor("normal-oj.user"))
	if _, _, err := d.AllUsers(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	after := cmds[len(cmds)-1].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != handoff {
		t.Errorf("scan after the hand-off on a replica set: afterClusterTime %v, want %v", after, handoff)
	}
}

// TestScanSubmissionsNamesNoIndex: the rebuild's scan is one find with
// no hint, and lists no indexes first. listIndexes also lists an index
// still being built and a hidden one (the server's listIndexesInLock),
// and a find hinted to either fails ("hint provided does not correspond
// to an existing index", BadValue): a rebuild while the covering index
// builds on an upgraded site would fail. Unhinted, the planner takes an
// index whose prefix is the sort (the covering one over an older
// {user, problem, timestamp, _id}: no FETCH), or sorts without one.
func TestScanSubmissionsNamesNoIndex(t *testing.T) {
	d, md, sent := mockDB(t)
	// What a scan that lists first would be answered: a listing naming
	// the covering index (ready, building or hidden look alike), then
	// the find's.
	listing := cursorReply("normal-oj.$cmd.listIndexes.submission",
		bson.D{{Key: "v", Value: 2}, {Key: "key", Value: coverKeys}, {Key: "name", Value: coverIndexName}})
	md.AddResponses(listing, emptyCursor("normal-oj.submission"))
	if err := d.ScanSubmissions(context.Background(), func(materialize.Submission) error { return nil }, func(*materialize.DecodeError) {}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range sent() {
		names = append(names, c.Index(0).Key())
		if h, err := c.LookupErr("hint"); err == nil {
			t.Errorf("%s hinted to %v, want no hint", c.Index(0).Key(), h)
		}
	}
	if len(names) != 1 || names[0] != "find" {
		t.Errorf("commands %v, want one find", names)
	}
}
