package materialize_test

import (
	"math"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestEntryEqual: two entries are equal exactly when every derived key
// holds the same value; each field, rawScore and the presence of
// problemStatus and rawScore included, makes them differ on its own. The
// value a field holds when its presence flag is off does not count.
func TestEntryEqual(t *testing.T) {
	base := materialize.Entry{Score: 92, ProblemStatus: 0, HasStatus: true, SubmissionIDs: []string{"a", "b"}, RawScore: 100, HasRaw: true}
	cases := []struct {
		name  string
		edit  func(e *materialize.Entry)
		equal bool
	}{
		{"same", func(e *materialize.Entry) {}, true},
		{"score", func(e *materialize.Entry) { e.Score = 91 }, false},
		{"problemStatus value", func(e *materialize.Entry) { e.ProblemStatus = 1 }, false},
		{"problemStatus null", func(e *materialize.Entry) { e.HasStatus = false }, false},
		{"rawScore value", func(e *materialize.Entry) { e.RawScore = 99 }, false},
		{"rawScore absent", func(e *materialize.Entry) { e.HasRaw = false }, false},
		{"submissionIds order", func(e *materialize.Entry) { e.SubmissionIDs = []string{"b", "a"} }, false},
		{"submissionIds shorter", func(e *materialize.Entry) { e.SubmissionIDs = []string{"a"} }, false},
		{"submissionIds longer", func(e *materialize.Entry) { e.SubmissionIDs = []string{"a", "b", "b"} }, false},
		{"submissionIds element", func(e *materialize.Entry) { e.SubmissionIDs = []string{"a", "c"} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := base
			e.SubmissionIDs = append([]string(nil), base.SubmissionIDs...)
			c.edit(&e)
			if got := base.Equal(e); got != c.equal {
				t.Errorf("base.Equal(%+v) = %v, want %v", e, got, c.equal)
			}
			if got := e.Equal(base); got != c.equal {
				t.Errorf("%+v.Equal(base) = %v, want %v", e, got, c.equal)
			}
		})
	}
	// Unset fields: their stale values do not count.
	a := materialize.Entry{Score: 0, ProblemStatus: 5, SubmissionIDs: []string{}, RawScore: 7}
	b := materialize.StartEntry()
	if !a.Equal(b) || !b.Equal(a) {
		t.Errorf("entries differing only in unset fields are not equal: %+v, %+v", a, b)
	}
	// nil and empty submissionIds are both [].
	if !(materialize.Entry{}).Equal(materialize.StartEntry()) {
		t.Error("nil and empty submissionIds differ")
	}
}

// TestEntryMatchesStored: a stored entry matches the derived one when it
// holds the same values, whatever their BSON numeric types and key order;
// one differing value (rawScore included), a missing or extra key, or a
// fractional number does not.
func TestEntryMatchesStored(t *testing.T) {
	e := materialize.Entry{Score: 92, ProblemStatus: 0, HasStatus: true, SubmissionIDs: []string{"a"}, RawScore: 100, HasRaw: true}
	cases := []struct {
		name  string
		doc   bson.D
		match bool
	}{
		{"int32", mtest.D("score", int32(92), "problemStatus", int32(0), "submissionIds", bson.A{"a"}, "rawScore", int32(100)), true},
		{"int64", mtest.D("score", int64(92), "problemStatus", int64(0), "submissionIds", bson.A{"a"}, "rawScore", int64(100)), true},
		{"double, reordered", mtest.D("rawScore", 100.0, "submissionIds", bson.A{"a"}, "problemStatus", 0.0, "score", 92.0), true},
		{"rawScore differs", mtest.D("score", int32(92), "problemStatus", int32(0), "submissionIds", bson.A{"a"}, "rawScore", int32(99)), false},
		{"rawScore missing", mtest.D("score", int32(92), "problemStatus", int32(0), "submissionIds", bson.A{"a"}), false},
		{"score differs", mtest.D("score", int32(93), "problemStatus", int32(0), "submissionIds", bson.A{"a"}, "rawScore", int32(100)), false},
		{"status null", mtest.D("score", int32(92), "problemStatus", nil, "submissionIds", bson.A{"a"}, "rawScore", int32(100)), false},
		{"fractional score", mtest.D("score", 92.5, "problemStatus", int32(0), "submissionIds", bson.A{"a"}, "rawScore", int32(100)), false},
		{"extra key", mtest.D("score", int32(92), "problemStatus", int32(0), "submissionIds", bson.A{"a"}, "rawScore", int32(100), "late", true), false},
		{"ids differ", mtest.D("score", int32(92), "problemStatus", int32(0), "submissionIds", bson.A{"a", "a"}, "rawScore", int32(100)), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, err := bson.Marshal(mtest.D("v", c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := e.MatchesStored(bson.Raw(raw).Lookup("v")); got != c.match {
				t.Errorf("MatchesStored = %v, want %v", got, c.match)
			}
		})
	}
}

// TestUserStatsEqual: each derived user field counts, AC_problem_ids in
// order.
func TestUserStatsEqual(t *testing.T) {
	base := materialize.UserStats{Submission: 3, ACSubmission: 2, ACProblemIDs: []int64{7, 8}}
	for _, c := range []struct {
		name  string
		other materialize.UserStats
		equal bool
	}{
		{"same", materialize.UserStats{Submission: 3, ACSubmission: 2, ACProblemIDs: []int64{7, 8}}, true},
		{"submission", materialize.UserStats{Submission: 4, ACSubmission: 2, ACProblemIDs: []int64{7, 8}}, false},
		{"AC_submission", materialize.UserStats{Submission: 3, ACSubmission: 1, ACProblemIDs: []int64{7, 8}}, false},
		{"order", materialize.UserStats{Submission: 3, ACSubmission: 2, ACProblemIDs: []int64{8, 7}}, false},
		{"element", materialize.UserStats{Submission: 3, ACSubmission: 2, ACProblemIDs: []int64{7, 9}}, false},
		{"shorter", materialize.UserStats{Submission: 3, ACSubmission: 2, ACProblemIDs: []int64{7}}, false},
	} {
		if got := base.Equal(c.other); got != c.equal {
			t.Errorf("%s: Equal = %v, want %v", c.name, got, c.equal)
		}
	}
}

// TestIntEncoding: derived numbers are encoded as pymongo encodes a Python
// int: int32 when the value fits, int64 otherwise (both ends of the int32
// range), in entries and in user fields alike.
func TestIntEncoding(t *testing.T) {
	cases := []struct {
		n    int64
		want bson.Type
	}{
		{0, bson.TypeInt32}, {-1, bson.TypeInt32},
		{math.MaxInt32, bson.TypeInt32}, {math.MinInt32, bson.TypeInt32},
		{math.MaxInt32 + 1, bson.TypeInt64}, {math.MinInt32 - 1, bson.TypeInt64},
		{math.MaxInt64, bson.TypeInt64}, {math.MinInt64, bson.TypeInt64},
	}
	for _, c := range cases {
		e := materialize.Entry{Score: c.n, ProblemStatus: c.n, HasStatus: true, SubmissionIDs: []string{}, RawScore: c.n, HasRaw: true}
		raw, err := bson.Marshal(e.Doc())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"score", "problemStatus", "rawScore"} {
			v := bson.Raw(raw).Lookup(k)
			if v.Type != c.want {
				t.Errorf("entry %s = %d encoded as %s, want %s", k, c.n, v.Type, c.want)
			}
			if got, ok := materialize.IntValue(v); !ok || got != c.n {
				t.Errorf("entry %s = %d reads back as %d", k, c.n, got)
			}
		}
		u := materialize.UserStats{Submission: c.n, ACSubmission: c.n, ACProblemIDs: []int64{c.n}}
		raw, err = bson.Marshal(u.Fields())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"submission", "AC_submission", "AC_problem_ids.0"} {
			v, err := bson.Raw(raw).LookupErr(strings.Split(k, ".")...)
			if err != nil || v.Type != c.want {
				t.Errorf("user %s = %d encoded as %s, want %s", k, c.n, v.Type, c.want)
			}
		}
	}
}
