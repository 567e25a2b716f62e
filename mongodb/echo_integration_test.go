package mongodb

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestIntegrationEchoValues: on a real replica set, the change events of
// Apply's own writes carry (derivedValues) byte for byte the values the
// engine records of them (UserStats.Fields as the driver encodes them,
// Entry.AppendBSON), at cluster times not after the operationTime Apply
// returned; another writer's write of the same values afterwards comes
// at a later cluster time (so it is recomputed, never skipped). Skips
// without a server, as every TestIntegration* test.
func TestIntegrationEchoValues(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	hw := bson.NewObjectID()
	load(t, db, materialize.Docs{
		Users: []bson.Raw{mtest.Raw("_id", "alice", "username", "alice", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})},
		Homeworks: []bson.Raw{mtest.Raw("_id", hw, "penalty", "score = score", "studentStatus", mtest.D("alice", mtest.D("7",
			mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))},
	})
	start, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Open(ctx, watch.Position{StartAt: start})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	stats := materialize.UserStats{Submission: 3, ACSubmission: 1, ACProblemIDs: []int64{7}}
	entry := materialize.Entry{Score: 100, ProblemStatus: 0, HasStatus: true, SubmissionIDs: []string{"s1", "s2"}, RawScore: 100, HasRaw: true}
	at, err := db.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "alice", Stats: stats}},
		Entries: []watch.EntryWrite{{Homework: hw, User: "alice", ProblemKey: "7", Entry: entry}}})
	if err != nil {
		t.Fatal(err)
	}
	if at.IsZero() {
		t.Fatal("Apply returned no operationTime")
	}
	want := map[string][]byte{}
	for _, f := range stats.Fields() {
		tp, data, err := bson.MarshalValue(f.Value)
		if err != nil {
			t.Fatal(err)
		}
		want[f.Key] = append([]byte{byte(tp)}, data...)
	}
	want["studentStatus.alice.7"] = append([]byte{byte(bson.TypeEmbeddedDocument)}, entry.AppendBSON(nil)...)
	check := func(ev watch.Event) {
		t.Helper()
		if at.Before(ev.ClusterTime) {
			t.Errorf("echo at %v, after the write's operationTime %v", ev.ClusterTime, at)
		}
		if len(ev.Values) != len(ev.Change.Fields) {
			t.Errorf("%d values for fields %v: %+v", len(ev.Values), ev.Change.Fields, ev.Values)
		}
		for _, v := range ev.Values {
			got := append([]byte{byte(v.Value.Type)}, v.Value.Value...)
			if !bytes.Equal(got, want[v.Path]) {
				t.Errorf("%s: event value %x, the write's %x", v.Path, got, want[v.Path])
			}
		}
	}
	check(mustEvent(t, st, materialize.CollUser, materialize.OpUpdate))
	check(mustEvent(t, st, materialize.CollHomework, materialize.OpUpdate))
	// The same values by someone else, after the write.
	if _, err := db.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: "alice"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "submission", Value: int32(4)}}}}); err != nil {
		t.Fatal(err)
	}
	mustEvent(t, st, materialize.CollUser, materialize.OpUpdate)
	if _, err := db.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: "alice"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "submission", Value: int32(3)}}}}); err != nil {
		t.Fatal(err)
	}
	ev := mustEvent(t, st, materialize.CollUser, materialize.OpUpdate)
	if !at.Before(ev.ClusterTime) {
		t.Errorf("another writer's later write at %v, not after the daemon's operationTime %v", ev.ClusterTime, at)
	}
}
