package mongodb

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// explainStats walks an explain reply: the sum of every
// totalDocsExamined and totalKeysExamined in it (a $unionWith's
// sub-pipeline explains its own plan), how many executionStats sections
// it holds, and every plan stage's name.
type explainStats struct {
	docs, keys, sections int64
	stages               []string
}

func (s *explainStats) walk(v bson.RawValue) {
	switch v.Type {
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, x := range vals {
			s.walk(x)
		}
	case bson.TypeEmbeddedDocument:
		elems, _ := v.Document().Elements()
		for _, e := range elems {
			switch e.Key() {
			case "totalDocsExamined":
				n, _ := e.Value().AsInt64OK()
				s.docs += n
			case "totalKeysExamined":
				n, _ := e.Value().AsInt64OK()
				s.keys += n
			case "executionStats":
				s.sections++
			case "stage":
				if name, ok := e.Value().StringValueOK(); ok {
					s.stages = append(s.stages, name)
				}
			}
			s.walk(e.Value())
		}
	}
}

// TestIntegrationLandingReadsAreCovered: on a real server, with the
// indexes EnsureIndexes builds and submissions shaped as Back-End stores
// them (demo.NewRush: tasks with every case's result), the reads of a
// landing on submission (Submissions' find of pairs, userStatsPipeline,
// and both as the parts of Read's one aggregate, the second under
// $unionWith) examine index keys and no document: explain
// (executionStats) reports totalDocsExamined 0 and no FETCH stage in any
// plan. Skips without a server (see mongodb_integration_test.go:
// MATERIALIZER_TEST_MONGODB_URI, or Docker for testcontainers).
func TestIntegrationLandingReadsAreCovered(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	rush := demo.NewRush(demo.RushParams{Students: 4, Problems: 3, Earlier: 60, InHomework: 9, PastProblems: 5, Seed: 4})
	load(t, db, materialize.Docs{Users: rush.Docs[materialize.CollUser], Problems: rush.Docs[materialize.CollProblem],
		Homeworks: rush.Docs[materialize.CollHomework], Submissions: rush.Docs[materialize.CollSubmission]})
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	user := rush.Students[1]
	pairs := []materialize.Pair{{User: user, Problem: rush.Problems[0]}, {User: rush.Students[2], Problem: rush.Problems[1]}}
	filters := submissionFilters(nil, pairs, queryTerms)
	if len(filters) != 1 {
		t.Fatalf("%d filters for 2 pairs", len(filters))
	}
	// The reads return something: what is explained is not an empty scan.
	subs, _, err := db.Submissions(ctx, nil, pairs)
	if err != nil || len(subs) == 0 {
		t.Fatalf("Submissions: %d, %v", len(subs), err)
	}
	parts := []readPart{
		{partSubmissions, "submissions", db.submissions, findStages(filters[0], submissionProjection)},
		{partStats, "user stats", db.submissions, userStatsPipeline([]string{user})},
	}
	for _, c := range []struct {
		name     string
		cmd      bson.D
		sections int64
	}{
		{"find", bson.D{{Key: "find", Value: db.submissions.Name()}, {Key: "filter", Value: filters[0]}, {Key: "projection", Value: submissionProjection}}, 1},
		{"userStatsPipeline", bson.D{{Key: "aggregate", Value: db.submissions.Name()}, {Key: "pipeline", Value: userStatsPipeline([]string{user})}, {Key: "cursor", Value: bson.D{}}}, 1},
		{"Read", bson.D{{Key: "aggregate", Value: db.submissions.Name()}, {Key: "pipeline", Value: readPipeline(parts)}, {Key: "cursor", Value: bson.D{}}}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := db.db.RunCommand(ctx, bson.D{{Key: "explain", Value: c.cmd}, {Key: "verbosity", Value: "executionStats"}}).Raw()
			if err != nil {
				t.Fatal(err)
			}
			var s explainStats
			s.walk(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
			if s.sections < c.sections || s.keys == 0 {
				t.Fatalf("explain holds %d executionStats sections, %d keys examined; want %d sections and keys:\n%s", s.sections, s.keys, c.sections, raw)
			}
			if s.docs != 0 {
				t.Errorf("%d documents examined, want 0 (a covered plan):\n%s", s.docs, raw)
			}
			for _, st := range s.stages {
				if st == "FETCH" {
					t.Errorf("a plan fetches documents (FETCH), want only index entries:\n%s", raw)
					break
				}
			}
		})
	}
	// And the results are the derivation's: Read answers as ReadSeparately.
	r := &watch.Reads{Pairs: pairs, Users: []string{user}}
	at, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Read(watch.WithReadAfter(ctx, at), r)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Submissions) != len(subs) || got.Stats[user].Submission == 0 {
		t.Errorf("Read: %d submissions (find: %d), %+v", len(got.Submissions), len(subs), got.Stats[user])
	}
}
