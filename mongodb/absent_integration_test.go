package mongodb

import (
	"bytes"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestIntegrationUserFieldsAbsent: user documents from before 2020 (no
// submission, AC_submission, AC_problem_ids) and one whose AC_* fields
// Back-End left absent read, through the adapter, as mongoengine's
// defaults: verify reports drift only for the user whose derived value is
// not the default, and a rebuild writes only that user, leaving the other
// documents byte for byte as they were.
func TestIntegrationUserFieldsAbsent(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hw := bson.NewObjectID()
	sub := func(user string, status, score int32) bson.Raw {
		return mtest.Raw("_id", bson.NewObjectID(), "user", user, "problem", int32(7), "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", status, "score", score)
	}
	load(t, db, materialize.Docs{
		Users: []bson.Raw{
			mtest.Raw("_id", "old", "username", "old"),
			mtest.Raw("_id", "partial", "submission", int32(1)),
			mtest.Raw("_id", "solver", "username", "solver"),
		},
		Problems:    []bson.Raw{mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})},
		Homeworks:   []bson.Raw{mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D())},
		Submissions: []bson.Raw{sub("partial", 1, 0), sub("solver", 0, 100)},
	})
	before := readAll(t, db).Users

	rep, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true, MaxDiffs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Users != 3 || rep.DriftedUsers != 1 || rep.Diffs[0].ID != "solver" {
		t.Fatalf("verify: %d users compared, %d drifted (%+v); want 3 and only solver", rep.Users, rep.DriftedUsers, rep.Diffs)
	}
	if _, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	after := map[string]bson.Raw{}
	for _, a := range readAll(t, db).Users {
		after[a.Lookup("_id").StringValue()] = a
	}
	for _, b := range before {
		name := b.Lookup("_id").StringValue()
		a := after[name]
		if changed := !bytes.Equal(a, b); changed != (name == "solver") {
			t.Errorf("user %s: rewritten = %v\nbefore %s\nafter  %s", name, changed, b, a)
		}
	}
	if st, ok := materialize.DecodeUserStats(after["solver"]); !ok || st.Submission != 1 || st.ACSubmission != 1 {
		t.Errorf("solver after rebuild: %+v %v", st, ok)
	}
}
