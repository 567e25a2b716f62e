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

// TestRecomputeHomeworkReadNotReusedForOtherUsers: the homeworks read
// for a changed student's entry (a studentStatus.<u> key) holds only the
// entries of the users named then. A problem change in the same batch
// makes another student's entry in that homework dirty; derive must read
// the homework again for that student, not reuse the first read, which
// lacks the entry: v's grade would stay stale (here the start value,
// though problem 1 now lists the homework and v solved it).
func TestRecomputeHomeworkReadNotReusedForOtherUsers(t *testing.T) {
	st := memstore.New()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hw := bson.NewObjectIDFromTimestamp(end)
	start := func() bson.D { return mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}) }
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "u", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	must(st.Load(materialize.CollUser, mtest.Raw("_id", "v", "submission", int32(1), "AC_submission", int32(1), "AC_problem_ids", bson.A{int32(1)})))
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(1), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D("u", mtest.D("1", start()), "v", mtest.D("1", start())))))
	must(st.Load(materialize.CollSubmission, mtest.Raw("_id", bson.NewObjectIDFromTimestamp(end.Add(-time.Hour)), "user", "v", "problem", int32(1),
		"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", int32(0), "score", int32(100))))
	// One batch: u's entries in the homework replaced (someone else's
	// write), and problem 1 changed (it now lists the homework).
	keys := materialize.NewKeys()
	keys.Merge(materialize.Extract(materialize.Change{Collection: materialize.CollHomework, Op: materialize.OpUpdate, HomeworkID: hw,
		Fields: []string{materialize.FieldStudentStatus + ".u"}}))
	keys.Merge(materialize.Extract(materialize.Change{Collection: materialize.CollProblem, Op: materialize.OpUpdate, ProblemID: 1,
		Fields: []string{"homeworks"}}))
	if len(keys.HomeworkUsers) != 1 || len(keys.Problems) != 1 {
		t.Fatalf("keys: %d homework users, %d problems; want the batch's one of each", len(keys.HomeworkUsers), len(keys.Problems))
	}
	ctx := context.Background()
	out, err := watch.Recompute(ctx, st, st, materialize.NewDeriver(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, &out.Writes); err != nil {
		t.Fatal(err)
	}
	checkConverged(t, st, "after the batch")
}
