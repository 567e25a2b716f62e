package mongodb

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/drivertest"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"

	"github.com/normal-oj/noj-materializer/watch"
)

// mockDB is a DB on the driver's mock deployment
// (x/mongo/driver/drivertest): no server, but every command goes through
// the driver's real command construction, and the command monitor sees it.
func mockDB(t *testing.T) (*DB, *drivertest.MockDeployment, func() []bson.Raw) {
	t.Helper()
	md := drivertest.NewMockDeployment()
	var mu sync.Mutex
	var cmds []bson.Raw
	opts := options.Client().SetMonitor(&event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		cmds = append(cmds, append(bson.Raw(nil), e.Command...))
	}})
	if err := xoptions.SetInternalClientOptions(opts, "deployment", md); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return newDB(client, Config{}.withDefaults()), md, func() []bson.Raw {
		mu.Lock()
		defer mu.Unlock()
		out := cmds
		cmds = nil
		return out
	}
}

func emptyCursor(ns string) bson.D {
	return bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: ns}, {Key: "firstBatch", Value: bson.A{}}}}}
}

// TestReadsMajorityCausallyAfterEvent: the reads
// that decide writes carry readConcern majority and, under a batch
// (watch.WithReadAfter), afterClusterTime = the batch's last event's
// cluster time; the key index lookup too.
func TestReadsMajorityCausallyAfterEvent(t *testing.T) {
	d, md, sent := mockDB(t)
	ev := bson.Timestamp{T: 1_800_000_000, I: 7}
	ctx := watch.WithReadAfter(context.Background(), ev)
	check := func(what string, wantAfter bool) {
		t.Helper()
		cmds := sent()
		if len(cmds) != 1 {
			t.Fatalf("%s: %d commands sent, want 1", what, len(cmds))
		}
		rc, err := cmds[0].LookupErr("readConcern")
		if err != nil {
			t.Fatalf("%s: no readConcern in %s", what, cmds[0])
		}
		if lvl, _ := rc.Document().Lookup("level").StringValueOK(); lvl != "majority" {
			t.Errorf("%s: readConcern %s, want level majority", what, rc)
		}
		after, err := rc.Document().LookupErr("afterClusterTime")
		switch {
		case wantAfter && err != nil:
			t.Errorf("%s: readConcern %s has no afterClusterTime", what, rc)
		case wantAfter:
			if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != ev {
				t.Errorf("%s: afterClusterTime %v, want the event's %v", what, after, ev)
			}
		case err == nil:
			t.Errorf("%s: afterClusterTime %v without a batch", what, after)
		}
	}

	md.AddResponses(emptyCursor("normal-oj.user"))
	if _, err := d.Users(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	check("Users", true)

	md.AddResponses(emptyCursor("normal-oj.homework"))
	if _, _, err := d.EntryKeys(ctx, []bson.ObjectID{bson.NewObjectID()}); err != nil {
		t.Fatal(err)
	}
	check("EntryKeys (aggregate)", true)

	md.AddResponses(emptyCursor("normal-oj.materializer_submission_keys"))
	if _, err := d.LookupKeys(ctx, []bson.ObjectID{bson.NewObjectID()}); err != nil {
		t.Fatal(err)
	}
	check("LookupKeys", true)

	md.AddResponses(emptyCursor("normal-oj.submission"))
	if _, _, err := d.Submissions(context.Background(), []string{"alice"}, nil); err != nil {
		t.Fatal(err)
	}
	check("Submissions outside a batch", false)
}

// TestClusterTimeIsMajorityCommitted: the rebuild's start time comes from
// a majority read (its operationTime is the majority commit point), not
// from a command without read concern (the last applied optime, ahead of
// what the scan's majority reads see: writes in between would be missed
// by both the scan and a stream started there).
func TestClusterTimeIsMajorityCommitted(t *testing.T) {
	d, md, sent := mockDB(t)
	committed := bson.Timestamp{T: 1_800_000_000, I: 3}
	resp := emptyCursor("normal-oj.materializer_checkpoints")
	resp = append(resp,
		bson.E{Key: "operationTime", Value: committed},
		bson.E{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: bson.Timestamp{T: 1_800_000_000, I: 9}}}})
	md.AddResponses(resp)
	got, err := d.ClusterTime(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got != committed {
		t.Errorf("ClusterTime = %v, want the majority read's operationTime %v", got, committed)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("%d commands sent, want 1", len(cmds))
	}
	rc, err := cmds[0].LookupErr("readConcern")
	if err != nil {
		t.Fatalf("ClusterTime sent %s: no readConcern", cmds[0])
	}
	if lvl, _ := rc.Document().Lookup("level").StringValueOK(); lvl != "majority" {
		t.Errorf("ClusterTime sent readConcern %s, want level majority", rc)
	}
}

// TestCheckMajorityReads: a server that refuses majority reads (a 4.4
// replica set with enableMajorityReadConcern=false) is reported by Open
// with a message naming the setting, instead of a stream whose every
// read then fails.
func TestCheckMajorityReads(t *testing.T) {
	d, md, sent := mockDB(t)
	md.AddResponses(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: int32(148)},
		{Key: "codeName", Value: "ReadConcernMajorityNotEnabled"}, {Key: "errmsg", Value: "Majority read concern is not enabled."}})
	err := d.checkMajorityReads(context.Background())
	if err == nil || !strings.Contains(err.Error(), "enableMajorityReadConcern") {
		t.Errorf("refused majority read: %v, want an error naming enableMajorityReadConcern", err)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("%d commands sent, want 1", len(cmds))
	}
	if lvl, _ := cmds[0].Lookup("readConcern", "level").StringValueOK(); lvl != "majority" {
		t.Errorf("probe %s: want readConcern majority", cmds[0])
	}
	md.AddResponses(emptyCursor("normal-oj.materializer_checkpoints"))
	if err := d.checkMajorityReads(context.Background()); err != nil {
		t.Errorf("majority read served: %v", err)
	}
}

// TestCheckMajorityReadsNeedsOnlyReadRole: Open's majority-read probe
// runs for every command, explain included, which docs/explain.md
// says runs with a read-only role (find on submission, problem, homework
// and user). A probe of another collection (the checkpoint collection)
// would fail such a role's Open with Unauthorized (13) before explain
// read anything, so the probe must read one of those four.
func TestCheckMajorityReadsNeedsOnlyReadRole(t *testing.T) {
	readOnlyRole := map[string]bool{"submission": true, "problem": true, "homework": true, "user": true}
	d, md, sent := mockDB(t)
	md.AddResponses(emptyCursor("normal-oj.user"))
	if err := d.checkMajorityReads(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("%d commands sent, want 1", len(cmds))
	}
	coll, ok := cmds[0].Lookup("find").StringValueOK()
	if !ok {
		t.Fatalf("probe %s is not a find", cmds[0])
	}
	if !readOnlyRole[coll] {
		t.Errorf("probe reads %q, which explain's read-only role does not grant (want one of submission, problem, homework, user)", coll)
	}
	if lvl, _ := cmds[0].Lookup("readConcern", "level").StringValueOK(); lvl != "majority" {
		t.Errorf("probe %s: want readConcern majority", cmds[0])
	}
}
