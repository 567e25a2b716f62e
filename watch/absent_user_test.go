package watch_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestUserFieldsAbsentMeanDefault: users from before 2020 lack the three
// derived fields and Back-End can leave AC_* absent; mongoengine reads
// them as 0, 0, []. verify (a dry-run rebuild) reports no drift for them
// when the derived values are the defaults, run writes nothing for them,
// and a user whose derived value differs from the default is still
// reported and written.
func TestUserFieldsAbsentMeanDefault(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hw := bson.NewObjectID()
	users := []bson.Raw{
		mtest.Raw("_id", "old", "username", "old"),          // before 2020, never submitted
		mtest.Raw("_id", "partial", "submission", int32(1)), // AC_* absent, one WA
		mtest.Raw("_id", "solver", "username", "solver"),    // absent, but one AC: drift
		mtest.Raw("_id", "current", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{}),
	}
	must(st.Load(materialize.CollUser, users...))
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D())))
	sub := func(user string, score int32) bson.Raw {
		return mtest.Raw("_id", bson.NewObjectID(), "user", user, "problem", int32(7), "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", map[bool]int32{true: 0, false: 1}[score == 100], "score", score)
	}
	must(st.Load(materialize.CollSubmission, sub("partial", 0), sub("solver", 100)))

	rep, err := watch.Rebuild(ctx, st, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true, MaxDiffs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Users != 4 || rep.DriftedUsers != 1 {
		t.Fatalf("verify compared %d users, %d drifted (%+v); want 4 compared and only solver drifted", rep.Users, rep.DriftedUsers, rep.Diffs)
	}
	if d := rep.Diffs[0]; d.ID != "solver" {
		t.Errorf("drifted user %s, want solver", d.ID)
	}

	// run: the first pass rebuilds (no checkpoint); then Back-End replaces
	// every user document with one lacking the fields again (as a pre-2020
	// document or an update leaving AC_* absent), and the stream recomputes
	// each user: only solver, whose derived value is not the default, is
	// written.
	if err := newEngine(st).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, doc := range users {
		must(st.Replace(materialize.CollUser, doc))
	}
	st.ResetStats()
	if err := newEngine(st).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.UserWrites != 1 {
		t.Errorf("run wrote %d user documents, want 1 (solver only)", s.UserWrites)
	}
	if raw := st.Get(materialize.CollUser, "old"); string(raw) != string(users[0]) {
		t.Errorf("run rewrote a user whose absent fields already equal the defaults: %s", raw)
	}
	checkConverged(t, st, "after run")
}
