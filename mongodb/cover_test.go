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
