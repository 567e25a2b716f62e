package mongodb

import (
	"context"
	"strings"
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
	if err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
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
	// ScanSubmissions: listIndexes (no index), then the find.
	md.AddResponses(emptyCursor("normal-oj.submission"), emptyCursor("normal-oj.submission"))
	if err := d.ScanSubmissions(context.Background(), func(materialize.Submission) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	after := cmds[len(cmds)-1].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != wrote {
		t.Errorf("ScanSubmissions: afterClusterTime %v, want %v", after, wrote)
	}
}

// TestAuthenticationFailedNamesNoPrivilege: 18 AuthenticationFailed (a
// wrong user name or password, a rotated credential: the handshake of a
// new connection fails, and the driver returns the server's error as a
// mongo.CommandError, mongo/errors.go:89-104) is fatal like 13, but no
// privilege is missing: the message must say to check the credentials,
// not name actions to grant.
func TestAuthenticationFailedNamesNoPrivilege(t *testing.T) {
	d, md, _ := mockDB(t)
	md.AddResponses(commandError(18, "AuthenticationFailed", "Authentication failed."))
	_, err := d.Users(context.Background(), []string{"alice"})
	if c := watch.ClassOf(err); c != watch.Unauthorized {
		t.Fatalf("class %s (%v), want unauthorized", c, err)
	}
	if strings.Contains(err.Error(), "needs action") {
		t.Errorf("%v: names privileges to grant for an authentication failure", err)
	}
	if !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("%v: does not say the authentication failed", err)
	}
	// 13 still names the privilege.
	md.AddResponses(unauthorized("find"))
	_, err = d.Users(context.Background(), []string{"alice"})
	if !strings.Contains(err.Error(), `needs action(s) "find"`) {
		t.Errorf("%v: 13 Unauthorized does not name the privilege", err)
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

// TestClusterTimeMissingIsTransient: a replica set member can answer
// without operationTime and $clusterTime for a while after it starts
// (with --keyFile, until its signing keys exist: SERVER-43086), as a
// compose file that starts MongoDB and the daemon together meets on the
// first rebuild. That is worth a retry, not the exit that marking it
// fatal causes (and the restart loop after it). A standalone has no
// cluster time at all and never gets here (Standalone).
func TestClusterTimeMissingIsTransient(t *testing.T) {
	d, md, _ := mockDB(t)
	md.AddResponses(emptyCursor("normal-oj.materializer_checkpoints"))
	_, err := d.ClusterTime(context.Background())
	if c := watch.ClassOf(err); c != watch.Transient {
		t.Errorf("ClusterTime with no operationTime in the reply: class %s (%v), want transient", c, err)
	}
}

// TestOpenUninitiatedReplicaSet: a mongod started with --replSet whose set
// was never initiated (the likeliest mistake when converting Normal-OJ's
// standalone) answers hello with isreplicaset true and no setName. Reached
// with directConnection=true (the demo's URI) it must not be called a
// standalone, for any command: the fix is rs.initiate(), not a conversion.
func TestOpenUninitiatedReplicaSet(t *testing.T) {
	ghost := bson.D{{Key: "isWritablePrimary", Value: false}, {Key: "secondary", Value: false}, {Key: "isreplicaset", Value: true},
		{Key: "info", Value: "Does not have a valid replica set config"}, {Key: "maxWireVersion", Value: int32(21)}}
	for _, cfg := range []Config{{Writes: true}, {}, {AllowStandalone: true, Writes: true}, {AllowStandalone: true}} {
		client, md, _ := mockClient(t)
		md.AddResponses(openReplies(ghost)...)
		_, err := open(context.Background(), client, cfg.withDefaults())
		if err == nil {
			t.Errorf("%+v: open of an uninitiated replica set member succeeded", cfg)
			continue
		}
		if !strings.Contains(err.Error(), "rs.initiate()") || strings.Contains(err.Error(), "is a standalone") {
			t.Errorf("%+v: %v: want rs.initiate() named, not a standalone", cfg, err)
		}
		if c := watch.ClassOf(err); c != watch.NotPrimary {
			t.Errorf("%+v: class %s, want not_primary", cfg, c)
		}
	}
}

// TestScanSubmissionsIndexCheckOutsideTheSession: the listIndexes before
// the scan runs outside the scan's causally consistent session. Its reply
// carries the primary's last applied optime (listIndexes takes no read
// concern), which inside the session would become the find's
// afterClusterTime: a majority read would then wait for the commit point
// to reach a time no write of the daemon needs, for as long as
// replication lags (forever while a majority is down).
func TestScanSubmissionsIndexCheckOutsideTheSession(t *testing.T) {
	d, md, sent := mockDB(t)
	wrote := bson.Timestamp{T: 1_800_000_010, I: 2}
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: wrote}})
	if err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	sent()
	applied := bson.Timestamp{T: 1_800_000_050, I: 1}
	md.AddResponses(append(emptyCursor("normal-oj.submission"), bson.E{Key: "operationTime", Value: applied}), emptyCursor("normal-oj.submission"))
	if err := d.ScanSubmissions(context.Background(), func(materialize.Submission) error { return nil }, nil); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	after := cmds[len(cmds)-1].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != wrote {
		t.Errorf("scan: afterClusterTime %v, want the daemon's write's %v (not listIndexes' %v)", after, wrote, applied)
	}
}

// TestWriteSessionKeepsImplicitSemantics: the explicit session of a bulk
// write exists only to learn the reply's operationTime; it must not be
// causally consistent. The driver sends readConcern.afterClusterTime on
// the writes of a causally consistent session that has an operation time
// (x/mongo/driver/operation.go:1612-1619, DRIVERS-3274): a retry after a
// fail-over would then wait until the new primary's oplog passes the old
// primary's last applied time, which may include writes that roll back,
// holding the write until the periodic no-op or the write deadline.
func TestWriteSessionKeepsImplicitSemantics(t *testing.T) {
	d, md, sent := mockDB(t)
	old := bson.Timestamp{T: 1_800_000_100, I: 1}
	notPrimary := append(commandError(10107, "NotWritablePrimary", "not primary", "RetryableWriteError"), bson.E{Key: "operationTime", Value: old})
	md.AddResponses(notPrimary, bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: bson.Timestamp{T: 1_800_000_090, I: 5}}})
	if err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 2 {
		t.Fatalf("%d commands, want the update and its retry", len(cmds))
	}
	if rc, err := cmds[1].LookupErr("readConcern"); err == nil {
		t.Errorf("retried update carries readConcern %s: the write session is causally consistent", rc)
	}
}
