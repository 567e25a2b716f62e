package main

import (
	"bytes"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/explain"
	"github.com/normal-oj/noj-materializer/materialize"
)

// TestIntegrationExplain: online, explain reads only (no document changes,
// no collection appears) and what it reports as final for
// every pair holding an entry is what an online `rebuild` then writes.
func TestIntegrationExplain(t *testing.T) {
	integrationURI(t)
	for _, v := range integrationVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			it := newIntegration(t)
			it.insert(v.DB)
			before := it.read()
			ctx, cancel := it.ctx()
			defer cancel()
			// ListCollectionNames (mongo/database.go:571): the daemon's
			// state collections would show up here.
			names, err := it.db.ListCollectionNames(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			pairs := pairsWithEntries(t, before.Homeworks)
			exs := make([]explain.Explanation, len(pairs))
			for i, pr := range pairs {
				exs[i] = explainJSON(t, pr)
			}
			if !sameDocs(before, it.read()) {
				t.Fatal("explain changed documents")
			}
			after, err := it.db.ListCollectionNames(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(names)
			slices.Sort(after)
			if !slices.Equal(names, after) {
				t.Fatalf("explain created collections: %v, then %v", names, after)
			}
			if r := runCLI(t, "rebuild"); r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			rebuilt := it.read()
			for i, pr := range pairs {
				checkExplainedAsRebuilt(t, pr, exs[i], before, rebuilt)
			}
		})
	}
}

// sameDocs reports whether two reads hold the same documents, byte for byte.
func sameDocs(a, b materialize.Docs) bool {
	eq := func(x, y []bson.Raw) bool {
		return slices.EqualFunc(x, y, func(p, q bson.Raw) bool { return bytes.Equal(p, q) })
	}
	return eq(a.Users, b.Users) && eq(a.Problems, b.Problems) && eq(a.Homeworks, b.Homeworks) && eq(a.Submissions, b.Submissions)
}
