package mongodb

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestIntegrationEnsureIndexesUnusableSameKeys: on a real server an
// index with the covering keys that the planner cannot use (hidden,
// partial, sparse, with a collation) is never taken as the covering
// index: either the server builds ours beside it and a usable one is
// listed, or EnsureIndexes fails naming it and why. Which of the two
// depends on the server's rules for indexes with the same keys.
func TestIntegrationEnsureIndexesUnusableSameKeys(t *testing.T) {
	cases := []struct {
		name string
		opts *options.IndexOptionsBuilder
		why  string
	}{
		{"hidden", options.Index().SetHidden(true), "hidden"},
		{"partial", options.Index().SetPartialFilterExpression(bson.D{{Key: "status", Value: 0}}), "partial"},
		{"sparse", options.Index().SetSparse(true), "sparse"},
		{"collation", options.Index().SetCollation(&options.Collation{Locale: "en", Strength: 2}), `collation "en"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := testDB(t)
			ctx := testCtx(t)
			if _, err := db.submissions.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: coverKeys, Options: c.opts.SetName("cover")}); err != nil {
				t.Fatal(err)
			}
			err := db.EnsureIndexes(ctx, nil)
			if err != nil {
				if !strings.Contains(err.Error(), `"cover" (`+c.why+")") {
					t.Fatalf("EnsureIndexes: %v; want it to name index \"cover\" (%s)", err, c.why)
				}
				return
			}
			specs, err := driverIndexes{db: db.db}.list(ctx, materialize.CollSubmission)
			if err != nil {
				t.Fatal(err)
			}
			if unusable, ok := usableMatch(specs, indexes[0]); !ok {
				t.Errorf("EnsureIndexes succeeded with no usable covering index; listed %v", unusable)
			}
		})
	}
}
