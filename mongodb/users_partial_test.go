package mongodb

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestUsersPartlyDecodedNotOK: a stored user whose derived fields only
// partly decode is read as not OK, whatever its readable part holds, so
// the engine rewrites it (watch's TestRecomputeCorrectsPartlyDecodedUser
// runs that on memstore); read as OK, a readable part equal to the
// derived value would leave the rest as it is.
func TestUsersPartlyDecodedNotOK(t *testing.T) {
	d, md, _ := mockDB(t)
	md.AddResponses(cursorReply("normal-oj.user",
		bson.D{{Key: "_id", Value: "w"}, {Key: "submission", Value: int32(1)}, {Key: "AC_submission", Value: int32(0)}, {Key: "AC_problem_ids", Value: "none"}},
		bson.D{{Key: "_id", Value: "ok"}, {Key: "submission", Value: int32(1)}, {Key: "AC_submission", Value: int32(0)}, {Key: "AC_problem_ids", Value: bson.A{}}}))
	got, err := d.Users(context.Background(), []string{"w", "ok"})
	if err != nil {
		t.Fatal(err)
	}
	if u, found := got["w"]; !found || u.OK {
		t.Errorf("partly decoded user: %+v (found %v), want found and not OK", u, found)
	}
	if u := got["ok"]; !u.OK || u.Stats.Submission != 1 {
		t.Errorf("well-formed user: %+v, want OK with submission 1", u)
	}
}
