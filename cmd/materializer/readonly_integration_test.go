package main

import (
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestIntegrationReadOnlyCommandsBuildNoIndex: verify, status and
// rebuild --dry-run write nothing, indexes included (with
// CREATE_INDEXES=true, the default): a createIndexes runs without a
// deadline and needs the createIndex privilege. rebuild, which writes,
// still builds them.
func TestIntegrationReadOnlyCommandsBuildNoIndex(t *testing.T) {
	it := newIntegration(t)
	it.insert(readVectors(t)[0].DB)
	indexNames := func() []string {
		t.Helper()
		ctx, cancel := it.ctx()
		defer cancel()
		var names []string
		for _, coll := range []string{materialize.CollSubmission, materialize.CollProblem} {
			specs, err := it.coll(coll).Indexes().ListSpecifications(ctx)
			if err != nil {
				t.Fatalf("list indexes of %s: %v", coll, err)
			}
			for _, s := range specs {
				if s.Name != "_id_" {
					names = append(names, coll+"."+s.Name)
				}
			}
		}
		return names
	}
	for _, args := range [][]string{{"verify"}, {"status"}, {"rebuild", "--dry-run"}} {
		r := runCLI(t, args...)
		// verify exits 1 on drift; anything else must succeed, so the
		// check below is not passed by a command that never connected.
		if r.code != exitOK && !(args[0] == "verify" && r.code == exitFail && strings.Contains(r.stdout, "drifted")) {
			t.Fatalf("%v: exit %d\n%v", args, r.code, r)
		}
		if got := indexNames(); len(got) > 0 {
			t.Fatalf("%v built %v; a read-only command must write nothing", args, got)
		}
	}
	if r := runCLI(t, "rebuild"); r.code != exitOK {
		t.Fatalf("rebuild: exit %d\n%v", r.code, r)
	}
	if got := indexNames(); len(got) != 3 {
		t.Errorf("after rebuild: indexes %v, want the three the daemon reads with", got)
	}
}
