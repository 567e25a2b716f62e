package mongodb

import (
	"bytes"
	"slices"
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
	wantOf := func(stats materialize.UserStats, entry materialize.Entry) map[string][]byte {
		want := map[string][]byte{}
		for _, f := range stats.Fields() {
			tp, data, err := bson.MarshalValue(f.Value)
			if err != nil {
				t.Fatal(err)
			}
			want[f.Key] = append([]byte{byte(tp)}, data...)
		}
		want["studentStatus.alice.7"] = append([]byte{byte(bson.TypeEmbeddedDocument)}, entry.AppendBSON(nil)...)
		return want
	}
	check := func(ev watch.Event, want map[string][]byte, fields ...string) {
		t.Helper()
		if at.Before(ev.ClusterTime) {
			t.Errorf("echo at %v, after the write's operationTime %v", ev.ClusterTime, at)
		}
		got := slices.Sorted(slices.Values(ev.Change.Fields)) // the server's order is its own
		if !slices.Equal(got, slices.Sorted(slices.Values(fields))) {
			t.Errorf("changed fields %v, want %v (each $set path whole, the unchanged ones left out)", ev.Change.Fields, fields)
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
	want := wantOf(stats, entry)
	check(mustEvent(t, st, materialize.CollUser, materialize.OpUpdate), want,
		materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs)
	check(mustEvent(t, st, materialize.CollHomework, materialize.OpUpdate), want, "studentStatus.alice.7")
	// A second write that grows the array by one element and changes one
	// field of the entry: a modifier-style $set logs the whole value at
	// its path ($v:1 on 4.4, the delta oplog's update node from 5.0), not
	// AC_problem_ids.1 or studentStatus.alice.7.score, and leaves out the
	// path whose value did not change (AC_submission).
	stats = materialize.UserStats{Submission: 4, ACSubmission: 1, ACProblemIDs: []int64{7, 3}}
	entry.Score, entry.SubmissionIDs = 90, slices.Clone(entry.SubmissionIDs)
	if at, err = db.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "alice", Stats: stats}},
		Entries: []watch.EntryWrite{{Homework: hw, User: "alice", ProblemKey: "7", Entry: entry}}}); err != nil {
		t.Fatal(err)
	}
	want = wantOf(stats, entry)
	check(mustEvent(t, st, materialize.CollUser, materialize.OpUpdate), want, materialize.FieldSubmission, materialize.FieldACProblemIDs)
	check(mustEvent(t, st, materialize.CollHomework, materialize.OpUpdate), want, "studentStatus.alice.7")
	// An update of more than watch.MaxDerivedValues fields carries no
	// values (the event stays within the server's own size).
	set := bson.D{}
	for _, p := range []string{"7", "8", "9", "10"} {
		set = append(set, bson.E{Key: "studentStatus.alice." + p, Value: materialize.StartEntry().Doc()})
	}
	if _, err := db.homeworks.UpdateOne(ctx, bson.D{{Key: "_id", Value: hw}}, bson.D{{Key: "$set", Value: set}}); err != nil {
		t.Fatal(err)
	}
	if ev := mustEvent(t, st, materialize.CollHomework, materialize.OpUpdate); len(ev.Change.Fields) != 4 || ev.Values != nil {
		t.Errorf("an update of 4 entries: fields %v, values %+v, want 4 fields and no values", ev.Change.Fields, ev.Values)
	}
	// The same values by someone else, after the write.
	if _, err := db.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: "alice"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "submission", Value: int32(5)}}}}); err != nil {
		t.Fatal(err)
	}
	mustEvent(t, st, materialize.CollUser, materialize.OpUpdate)
	if _, err := db.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: "alice"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "submission", Value: int32(4)}}}}); err != nil {
		t.Fatal(err)
	}
	ev := mustEvent(t, st, materialize.CollUser, materialize.OpUpdate)
	if !at.Before(ev.ClusterTime) {
		t.Errorf("another writer's later write at %v, not after the daemon's operationTime %v", ev.ClusterTime, at)
	}
}
