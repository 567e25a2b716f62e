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

// TestRecomputeCorrectsPartlyDecodedUser: a user document whose derived
// fields only partly decode (the counts read, AC_problem_ids not an
// array of integers) is rewritten online, as a rebuild rewrites it, even
// where the part that decodes equals the derived value: the decoder's
// partial result (the counts, and [] for the list) is not a stored
// value. Each case is one write by someone else to the user's derived
// fields, its change event, and the batch it makes.
func TestRecomputeCorrectsPartlyDecodedUser(t *testing.T) {
	for _, c := range partlyDecodedUsers {
		t.Run(c.name, func(t *testing.T) {
			st := partlyDecodedStore(t, c.doc)
			keys := materialize.Extract(materialize.Change{Collection: materialize.CollUser, Op: materialize.OpUpdate, UserID: "w",
				Fields: []string{materialize.FieldACProblemIDs, materialize.FieldACSubmission, materialize.FieldSubmission}})
			ctx := context.Background()
			out, err := watch.Recompute(ctx, st, st, materialize.NewDeriver(), keys)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Apply(ctx, &out.Writes); err != nil {
				t.Fatal(err)
			}
			checkConverged(t, st, "after the batch")
		})
	}
}

// partlyDecodedUsers are user documents of "w" whose derived fields only
// partly decode; what does decode is {1, 0, []}.
var partlyDecodedUsers = []struct {
	name string
	doc  bson.Raw
}{
	{"AC_problem_ids a string", mtest.Raw("_id", "w", "submission", int32(1), "AC_submission", int32(0), "AC_problem_ids", "none")},
	{"AC_problem_ids holding a string", mtest.Raw("_id", "w", "submission", int32(1), "AC_submission", int32(0), "AC_problem_ids", bson.A{"x"})},
	{"AC_submission a string", mtest.Raw("_id", "w", "submission", int32(1), "AC_submission", "0", "AC_problem_ids", bson.A{})},
	{"submission fractional", mtest.Raw("_id", "w", "submission", 1.5, "AC_submission", int32(0), "AC_problem_ids", bson.A{})},
}

// partlyDecodedStore holds the user document doc (one of
// partlyDecodedUsers) and w's one submission, not accepted: the derived
// value is {1, 0, []}, what the readable part of doc holds.
func partlyDecodedStore(t *testing.T, doc bson.Raw) *memstore.Store {
	t.Helper()
	if _, ok := materialize.DecodeUserStats(doc); ok {
		t.Fatalf("%s decodes: not a malformed user", doc)
	}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	st := memstore.New()
	must(st.Load(materialize.CollSubmission, mtest.Raw("_id", bson.NewObjectIDFromTimestamp(end), "user", "w", "problem", int32(1),
		"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(end), "status", int32(1), "score", int32(0))))
	must(st.Load(materialize.CollUser, doc))
	return st
}
