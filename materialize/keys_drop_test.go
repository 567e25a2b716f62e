package materialize_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestKeysMergeDropThenEvents: a drop or rename of a source collection
// asks for a rebuild however many events follow it in the same batch (the
// merged keys keep Rebuild, in either order), and the other events' keys
// are kept beside it; a drop or rename that concerns no source collection
// changes nothing the later events ask for.
func TestKeysMergeDropThenEvents(t *testing.T) {
	sub := bson.ObjectID{11: 0x51}
	pair := materialize.Pair{User: "alice", Problem: 7}
	insert := materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpInsert, SubmissionID: sub, Pair: pair, HasPair: true}
	user := materialize.Change{Collection: materialize.CollUser, Op: materialize.OpInsert, UserID: "bob"}
	for _, c := range []struct {
		name        string
		ddl         materialize.Change
		wantRebuild bool
	}{
		{"drop submission", materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpDrop}, true},
		{"drop homework", materialize.Change{Collection: materialize.CollHomework, Op: materialize.OpDrop}, true},
		{"rename problem away", materialize.Change{Collection: materialize.CollProblem, Op: materialize.OpRename, RenamedTo: "problem_old"}, true},
		{"rename into user", materialize.Change{Collection: "user_new", Op: materialize.OpRename, RenamedTo: materialize.CollUser}, true},
		{"drop another collection", materialize.Change{Collection: "course", Op: materialize.OpDrop}, false},
		{"rename between others", materialize.Change{Collection: "tmp", Op: materialize.OpRename, RenamedTo: "tmp2"}, false},
	} {
		for _, order := range []string{"ddl first", "ddl last", "ddl between"} {
			changes := map[string][]materialize.Change{
				"ddl first":   {c.ddl, insert, user},
				"ddl last":    {insert, user, c.ddl},
				"ddl between": {insert, c.ddl, user},
			}[order]
			k := materialize.NewKeys()
			for _, ch := range changes {
				k.Merge(materialize.Extract(ch))
			}
			if k.Rebuild != c.wantRebuild {
				t.Errorf("%s, %s: Rebuild = %v, want %v", c.name, order, k.Rebuild, c.wantRebuild)
			}
			if ps := k.Submissions[sub]; len(ps) != 1 || ps[0] != pair {
				t.Errorf("%s, %s: submission key %v, want the insert's pair kept", c.name, order, ps)
			}
			if _, ok := k.Users["bob"]; !ok {
				t.Errorf("%s, %s: users %v, want bob's insert kept", c.name, order, k.Users)
			}
			if k.Empty() {
				t.Errorf("%s, %s: merged keys empty", c.name, order)
			}
		}
	}
}
