package materialize_test

import (
	"reflect"
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

// TestUserTallyOrderIndependent: a user's tally is the same whatever order
// its submissions come in (the Builder feeds groups in problem order; other
// callers do not): AC_problem_ids lists each problem once, ordered by its
// first AC submission by (timestamp, _id), a later AC of the same problem
// changing nothing, and a non-AC or unjudged submission counting only
// towards submission (or nothing).
func TestUserTallyOrderIndependent(t *testing.T) {
	id := func(b byte) bson.ObjectID { return bson.ObjectID{11: b} }
	sub := func(b byte, problem, ts, score int64, status int64) materialize.Submission {
		return materialize.Submission{ID: id(b), User: "u", Problem: problem, Timestamp: ts, Score: score, Status: status}
	}
	subs := []materialize.Submission{
		sub(1, 30, 500, 100, 0), // problem 30: first AC at 500
		sub(2, 10, 700, 100, 0), // problem 10: AC at 700 ...
		sub(3, 10, 600, 100, 0), // ... but an earlier one at 600
		sub(4, 20, 600, 100, 0), // problem 20: AC at 600, _id 4 after _id 3
		sub(5, 20, 900, 100, 0), // a later AC of 20: no change
		sub(6, 40, 100, 50, 0),  // not AC
		sub(7, 50, 50, 100, -2), // not judged
		sub(8, 30, 400, 60, 0),  // judged, not AC
	}
	want := materialize.UserStats{Submission: 7, ACSubmission: 5, ACProblemIDs: []int64{30, 10, 20}}
	orders := [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {7, 6, 5, 4, 3, 2, 1, 0}, {2, 3, 0, 7, 1, 4, 6, 5}, {1, 5, 2, 4, 0, 6, 3, 7}}
	for _, order := range orders {
		var tally materialize.UserTally
		for _, i := range order {
			tally.Add(&subs[i])
		}
		if got := tally.Stats(); !got.Equal(want) {
			t.Errorf("order %v: got %+v, want %+v", order, got, want)
		}
	}
}

// TestDecodeUserSameAsParts: DecodeUser reads what DecodeUserID and
// DecodeUserStats read, on every vector user and on malformed shapes.
func TestDecodeUserSameAsParts(t *testing.T) {
	docs := []bson.Raw{
		mtest.Raw("_id", "a", "submission", int32(3), "submission", int32(4), "AC_submission", int64(1), "AC_problem_ids", bson.A{int32(1), 2.0}),
		mtest.Raw("_id", "a", "AC_problem_ids", bson.A{"x"}),
		mtest.Raw("_id", "a", "AC_problem_ids", "x"),
		mtest.Raw("_id", "a", "submission", nil, "AC_submission", 1.5),
		mtest.Raw("_id", int32(1), "submission", int32(2)),
		mtest.Raw("_id", nil),
		mtest.Raw("submission", int32(2)),
		mtest.Raw("_id", "b", "_id", "c"),
		{5, 0, 0, 0},
		{7, 0, 0, 0, 2, 'x', 0},
	}
	for _, v := range readDeriveVectors(t) {
		docs = append(docs, v.DB.Users...)
	}
	for _, doc := range docs {
		name, st, ok, err := materialize.DecodeUser(doc)
		wantName, wantErr := materialize.DecodeUserID(doc)
		wantSt, wantOK := materialize.DecodeUserStats(doc)
		if name != wantName || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%x: DecodeUser name %q, %v; DecodeUserID %q, %v", []byte(doc), name, err, wantName, wantErr)
		}
		if ok != wantOK || (ok && !reflect.DeepEqual(st, wantSt)) {
			t.Fatalf("%x: DecodeUser stats %+v, %v; DecodeUserStats %+v, %v", []byte(doc), st, ok, wantSt, wantOK)
		}
	}
}
