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

// TestRebuildCorrectsPartlyDecodedUser: the rebuild rewrites a user
// document whose derived fields only partly decode, and counts it as
// drifted, even where the part that decodes equals the derived value
// (here {1, 0, []}, see partlyDecodedUsers): the decoder's partial
// result is not a stored value.
func TestRebuildCorrectsPartlyDecodedUser(t *testing.T) {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range partlyDecodedUsers {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := materialize.DecodeUserStats(c.doc); ok {
				t.Fatalf("%s decodes: not a malformed user", c.doc)
			}
			st := memstore.New()
			must(st.Load(materialize.CollSubmission, mtest.Raw("_id", bson.NewObjectIDFromTimestamp(end), "user", "w", "problem", int32(1),
				"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(end), "status", int32(1), "score", int32(0))))
			must(st.Load(materialize.CollUser, c.doc))
			rep, err := watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.DriftedUsers != 1 {
				t.Errorf("%d users drifted, want 1", rep.DriftedUsers)
			}
			checkConverged(t, st, "after the rebuild")
		})
	}
}
