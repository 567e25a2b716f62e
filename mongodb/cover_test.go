package mongodb

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
)

// submissionFields returns the top-level submission fields v reads: the
// field names of query documents (not operators) and, in expressions,
// the first component of field paths ("$a.b"; "$$" variables are not
// fields).
func submissionFields(v any, query bool, out map[string]bool) {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if query && !strings.HasPrefix(e.Key, "$") {
				out[strings.SplitN(e.Key, ".", 2)[0]] = true
			}
			submissionFields(e.Value, query && (strings.HasPrefix(e.Key, "$or") || strings.HasPrefix(e.Key, "$and")), out)
		}
	case bson.A:
		for _, y := range x {
			submissionFields(y, query, out)
		}
	case string:
		if strings.HasPrefix(x, "$") && !strings.HasPrefix(x, "$$") {
			out[strings.SplitN(x[1:], ".", 2)[0]] = true
		}
	}
}

// TestCoverIndexHoldsEveryFieldOfALandingsReads: every field the reads of
// a landing take from submission documents (Submissions' filters and
// projection, userStatsPipeline's stages up to its first $group, the
// last that sees submissions) is a key of the covering index, so the
// server can answer them from its entries; and the cost model
// (memstore.CoveringFields) sizes the same index.
func TestCoverIndexHoldsEveryFieldOfALandingsReads(t *testing.T) {
	read := map[string]bool{}
	for _, f := range submissionFilters([]string{"u"}, []materialize.Pair{{User: "v", Problem: 1}, {User: "w", Problem: 2}}, queryTerms) {
		submissionFields(f, true, read)
	}
	for _, e := range submissionProjection {
		read[e.Key] = true
	}
	for _, stage := range userStatsPipeline([]string{"u"}) {
		st := stage.(bson.D)
		if st[0].Key == "$match" {
			submissionFields(st[0].Value, true, read)
			continue
		}
		submissionFields(st[0].Value, false, read)
		if st[0].Key == "$group" {
			break
		}
	}
	var keys []string
	for _, e := range coverKeys {
		keys = append(keys, e.Key)
	}
	for f := range read {
		if !slices.Contains(keys, f) {
			t.Errorf("a landing's reads use submission field %q, not a key of %s %v: the server would fetch every document", f, coverIndexName, keys)
		}
	}
	if len(read) != len(keys) {
		t.Errorf("the reads use %d fields, the index has %d keys %v: a key no read uses only costs writes", len(read), len(keys), keys)
	}
	if !slices.Equal(keys, memstore.CoveringFields) {
		t.Errorf("memstore.CoveringFields %v, the index's keys %v: the cost model sizes another index", memstore.CoveringFields, keys)
	}
	if name := strings.Join(func() []string {
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"_1")
		}
		return parts
	}(), "_"); name != coverIndexName {
		t.Errorf("index name %q, MongoDB's default for its keys %q", coverIndexName, name)
	}
}

// TestExplainStatsReadsTheWinningPlanOnly: the explain walker of the
// covering tests counts the stages of the plan that ran, not those of
// queryPlanner.rejectedPlans: a pair's find also has a plan on
// {problem: 1, user: 1}, and the rebuild's scan one on an earlier
// {user, problem, timestamp, _id}, both with a FETCH the server
// rejected.
func TestExplainStatsReadsTheWinningPlanOnly(t *testing.T) {
	ixscan := bson.D{{Key: "stage", Value: "IXSCAN"}}
	raw, err := bson.Marshal(bson.D{
		{Key: "queryPlanner", Value: bson.D{
			{Key: "winningPlan", Value: bson.D{{Key: "stage", Value: "PROJECTION_COVERED"}, {Key: "inputStage", Value: ixscan}}},
			{Key: "rejectedPlans", Value: bson.A{bson.D{{Key: "stage", Value: "PROJECTION_SIMPLE"}, {Key: "inputStage", Value: bson.D{{Key: "stage", Value: "FETCH"}, {Key: "inputStage", Value: ixscan}}}}}},
		}},
		{Key: "executionStats", Value: bson.D{
			{Key: "totalKeysExamined", Value: int32(5)}, {Key: "totalDocsExamined", Value: int32(0)},
			{Key: "executionStages", Value: bson.D{{Key: "stage", Value: "PROJECTION_COVERED"}, {Key: "inputStage", Value: ixscan}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var s explainStats
	s.walk(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
	if slices.Contains(s.stages, "FETCH") || s.keys != 5 || s.docs != 0 || s.sections != 1 {
		t.Errorf("stages %v, %d keys, %d documents, %d sections; want no FETCH, 5, 0, 1", s.stages, s.keys, s.docs, s.sections)
	}
}
