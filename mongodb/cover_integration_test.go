package mongodb

import (
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// explainStats walks an explain reply: the sum of every
// totalDocsExamined and totalKeysExamined in it (a $unionWith's
// sub-pipeline explains its own plan), how many executionStats sections
// it holds, and every stage's name of the plans that ran (not
// rejectedPlans).
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
			case "rejectedPlans", "allPlansExecution":
				continue // plans the server did not run
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

// TestIntegrationScanWithEveryIndexState: the rebuild's scan (one find,
// no hint) works whatever the site's indexes: the earlier release's
// {user, problem, timestamp, _id} only (an upgraded site before the
// covering index is built, or with MATERIALIZER_CREATE_INDEXES=false);
// both, where the planner answers from the covering index (no FETCH, no
// document examined); and the covering index hidden, which listIndexes
// still lists and a hint naming it would fail on (BadValue). Each time
// in SortGrouped order. Skips without a server.
func TestIntegrationScanWithEveryIndexState(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	rush := demo.NewRush(demo.RushParams{Students: 3, Problems: 2, Earlier: 20, InHomework: 4, PastProblems: 2, Seed: 5})
	load(t, db, materialize.Docs{Submissions: rush.Docs[materialize.CollSubmission]})
	var want []materialize.Submission
	for _, raw := range rush.Docs[materialize.CollSubmission] {
		if s, err := materialize.DecodeSubmission(raw); err == nil {
			want = append(want, s)
		}
	}
	materialize.SortGrouped(want)
	scan := func(state string) {
		t.Helper()
		var got []materialize.Submission
		if err := db.ScanSubmissions(ctx, func(s materialize.Submission) error { got = append(got, s); return nil },
			func(*materialize.DecodeError) {}); err != nil {
			t.Fatalf("%s: %v", state, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d submissions, want %d (or order differs)", state, len(got), len(want))
		}
	}
	old := mongo.IndexModel{Keys: scanSort, Options: options.Index().SetName("user_1_problem_1_timestamp_1__id_1")}
	if _, err := db.submissions.Indexes().CreateOne(ctx, old); err != nil {
		t.Fatal(err)
	}
	scan("the earlier index only")
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	scan("both indexes")
	find := bson.D{{Key: "find", Value: db.submissions.Name()}, {Key: "filter", Value: bson.D{}},
		{Key: "sort", Value: scanSort}, {Key: "projection", Value: submissionProjection}}
	raw, err := db.db.RunCommand(ctx, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var s explainStats
	s.walk(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
	if s.docs != 0 || slices.Contains(s.stages, "FETCH") || slices.Contains(s.stages, "SORT") {
		t.Errorf("scan with both indexes: %d documents examined, stages %v; want the covering index alone:\n%s", s.docs, s.stages, raw)
	}
	hide := bson.D{{Key: "collMod", Value: db.submissions.Name()}, {Key: "index", Value: bson.D{{Key: "name", Value: coverIndexName}, {Key: "hidden", Value: true}}}}
	if err := db.db.RunCommand(ctx, hide).Err(); err != nil {
		t.Fatal(err)
	}
	scan("the covering index hidden")
}
