package watch_test

import (
	"context"
	"testing"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestRebuildCorrectsPartlyDecodedUser: the rebuild rewrites a user
// document whose derived fields only partly decode, and counts it as
// drifted, even where the part that decodes equals the derived value
// (here {1, 0, []}, see partlyDecodedUsers): the decoder's partial
// result is not a stored value.
func TestRebuildCorrectsPartlyDecodedUser(t *testing.T) {
	for _, c := range partlyDecodedUsers {
		t.Run(c.name, func(t *testing.T) {
			st := partlyDecodedStore(t, c.doc)
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
