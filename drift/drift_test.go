package drift

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestUserDiff: a user's difference names the three derived fields; an
// unreadable or missing stored value prints as empty.
func TestUserDiff(t *testing.T) {
	derived := materialize.UserStats{Submission: 3, ACSubmission: 1, ACProblemIDs: []int64{7}}
	d := UserDiff("alice", materialize.UserStats{Submission: 2}, true, derived)
	want := Diff{Collection: "user", ID: "alice", Path: "submission,AC_submission,AC_problem_ids",
		Stored:  `{"submission":2,"AC_submission":0,"AC_problem_ids":[]}`,
		Derived: `{"submission":3,"AC_submission":1,"AC_problem_ids":[7]}`}
	if d.Collection != want.Collection || d.ID != want.ID || d.Path != want.Path || d.Stored != want.Stored || d.Derived != want.Derived {
		t.Errorf("UserDiff = %+v\nwant      %+v", d, want)
	}
	if d := UserDiff("alice", materialize.UserStats{Submission: 2}, false, derived); d.Stored != "" {
		t.Errorf("unreadable stored value printed as %q", d.Stored)
	}
}

// TestEntryDiff: an entry's difference is addressed by its path in the
// homework and prints both sides as relaxed Extended JSON.
func TestEntryDiff(t *testing.T) {
	h := bson.NewObjectID()
	doc, _ := bson.Marshal(bson.D{{Key: "score", Value: int32(10)}})
	v := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}
	e := materialize.Entry{Score: 100, ProblemStatus: 0, HasStatus: true}
	d := EntryDiff(h, "alice", "7", v, true, e)
	if d.Collection != "homework" || d.ID != h.Hex() || d.Path != "studentStatus.alice.7" || d.Stored != `{"score":10}` || d.Derived == "" {
		t.Errorf("EntryDiff = %+v", d)
	}
	if d := EntryDiff(h, "alice", "7", bson.RawValue{}, false, e); d.Stored != "" {
		t.Errorf("absent stored value printed as %q", d.Stored)
	}
}
