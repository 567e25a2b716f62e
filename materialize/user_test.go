package materialize_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestDecodeUserStatsAbsentIsDefault: a user document from before
// 2020-01-01 lacks submission, AC_submission and AC_problem_ids, and
// Back-End's updates can leave the AC_* fields absent; mongoengine loads
// an absent (or null) IntField(default=0) as 0 and ListField(default=list)
// as [] (Back-End mongo/engine.py, class User). Absent is the default, not
// unreadable; a present field of the wrong type still is.
func TestDecodeUserStatsAbsentIsDefault(t *testing.T) {
	zero := materialize.UserStats{ACProblemIDs: []int64{}}
	cases := []struct {
		name string
		doc  bson.Raw
		want materialize.UserStats
		ok   bool
	}{
		{"before 2020: all three absent", mtest.Raw("_id", "alice", "username", "alice"), zero, true},
		{"AC fields absent", mtest.Raw("_id", "alice", "submission", int32(3)),
			materialize.UserStats{Submission: 3, ACProblemIDs: []int64{}}, true},
		{"AC_problem_ids absent", mtest.Raw("_id", "alice", "submission", int32(3), "AC_submission", int64(2)),
			materialize.UserStats{Submission: 3, ACSubmission: 2, ACProblemIDs: []int64{}}, true},
		{"submission absent", mtest.Raw("_id", "alice", "AC_submission", int32(1), "AC_problem_ids", bson.A{int32(4)}),
			materialize.UserStats{ACSubmission: 1, ACProblemIDs: []int64{4}}, true},
		{"null reads as the default", mtest.Raw("_id", "alice", "submission", nil, "AC_submission", nil, "AC_problem_ids", nil), zero, true},
		{"all present", mtest.Raw("_id", "alice", "submission", int32(5), "AC_submission", 2.0, "AC_problem_ids", bson.A{int32(1), int64(9)}),
			materialize.UserStats{Submission: 5, ACSubmission: 2, ACProblemIDs: []int64{1, 9}}, true},
		{"submission a string", mtest.Raw("_id", "alice", "submission", "5"), materialize.UserStats{}, false},
		{"AC_submission a fraction", mtest.Raw("_id", "alice", "AC_submission", 1.5), materialize.UserStats{}, false},
		{"AC_problem_ids not an array", mtest.Raw("_id", "alice", "AC_problem_ids", int32(1)), materialize.UserStats{}, false},
		{"AC_problem_ids holding a string", mtest.Raw("_id", "alice", "AC_problem_ids", bson.A{"1"}), materialize.UserStats{}, false},
		{"truncated document", mtest.Raw("_id", "alice")[:8], materialize.UserStats{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := materialize.DecodeUserStats(c.doc)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v (got %+v)", ok, c.ok, got)
			}
			if ok && !got.Equal(c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			// The derived value equal to the defaults matches the stored
			// document, so nothing is written.
			if ok && c.want.Equal(zero) && !zero.MatchesStored(c.doc) {
				t.Errorf("the default value does not match a document whose fields are absent")
			}
		})
	}
}
