package mongodb

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestApplyModels checks, without a server, the bulk write models Apply
// sends: one UpdateOneModel per write, in order, with the filter and
// update of userWrite / entryWrite (an existing user document; an existing
// entry, by path or, for unsafe names, by pipeline), upsert false, and no
// other option set; and the bulk options: unordered.
func TestApplyModels(t *testing.T) {
	h := bson.ObjectID{1}
	w := &watch.Writes{
		Users: []watch.UserWrite{
			{User: "alice", Stats: materialize.UserStats{Submission: 2, ACSubmission: 1, ACProblemIDs: []int64{7}}},
			{User: "a.b", Stats: materialize.UserStats{ACProblemIDs: []int64{}}},
		},
		Entries: []watch.EntryWrite{
			{Homework: h, User: "alice", ProblemKey: "7", Entry: testEntry},
			{Homework: h, User: "$x.y", ProblemKey: "7", Entry: materialize.StartEntry()},
		},
	}
	users, entries := applyModels(w)
	if len(users) != 2 || len(entries) != 2 {
		t.Fatalf("%d user and %d entry models, want 2 and 2", len(users), len(entries))
	}
	check := func(what string, m mongo.WriteModel, wantFilter bson.D, wantUpdate any) {
		t.Helper()
		um, ok := m.(*mongo.UpdateOneModel)
		if !ok {
			t.Fatalf("%s: model %T, want *mongo.UpdateOneModel", what, m)
		}
		if um.Upsert == nil {
			t.Errorf("%s: upsert unset, want explicitly false", what)
		} else if *um.Upsert {
			t.Errorf("%s: upsert true, want false", what)
		}
		if got, want := extJSON(t, um.Filter), extJSON(t, wantFilter); got != want {
			t.Errorf("%s: filter %s, want %s", what, got, want)
		}
		if got, want := extJSON(t, um.Update), extJSON(t, wantUpdate); got != want {
			t.Errorf("%s: update %s, want %s", what, got, want)
		}
		if um.Collation != nil || um.ArrayFilters != nil || um.Hint != nil || um.Sort != nil {
			t.Errorf("%s: unexpected options %+v", what, um)
		}
	}
	f, u := userWrite(w.Users[0])
	check("user alice", users[0], f, u)
	if got, want := extJSON(t, f), `{"v":{"_id":"alice"}}`; got != want {
		t.Errorf("user filter %s, want %s (the existing document only)", got, want)
	}
	if got, want := extJSON(t, u), `{"v":{"$set":{"submission":2,"AC_submission":1,"AC_problem_ids":[7]}}}`; got != want {
		t.Errorf("user update %s, want %s (the derived fields only)", got, want)
	}
	f, u = userWrite(w.Users[1])
	check("user a.b", users[1], f, u)
	fe, ue := entryWrite(w.Entries[0])
	check("entry alice.7", entries[0], fe, ue)
	if got, want := extJSON(t, fe), `{"v":{"_id":{"$oid":"010000000000000000000000"},"studentStatus.alice.7":{"$exists":true}}}`; got != want {
		t.Errorf("entry filter %s, want %s (an existing entry only)", got, want)
	}
	fp, up := entryWriteByPipeline(w.Entries[1])
	check("entry $x.y.7", entries[1], fp, up)

	var opts options.BulkWriteOptions
	for _, set := range bulkWriteOptions().List() {
		if err := set(&opts); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Ordered == nil || *opts.Ordered {
		t.Error("bulk writes are ordered, want unordered")
	}

	users, entries = applyModels(&watch.Writes{})
	if len(users) != 0 || len(entries) != 0 {
		t.Errorf("empty writes built %d and %d models", len(users), len(entries))
	}
}
