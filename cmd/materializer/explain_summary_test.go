package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/explain"
)

// TestExplainSummaryRows: explain's summary rows (each entry's and the
// user counts' DRIFT or same, the malformed documents skipped, drift:
// yes or none) and their JSON fields, on variants of the scenario where
// each source of drift is alone: only the entry of a homework the problem
// does not list, only the counts, only a listed entry, none; and with
// malformed submissions. Seen failing with the overall drift leaving out
// unlisted entries (only the unlisted entry drifts: drift none), with the
// counts' mark taken from the overall drift (entries drift: counts DRIFT),
// and with the malformed count printed one short.
func TestExplainSummaryRows(t *testing.T) {
	cleanConfigEnv(t)
	const (
		a1Stale   = `{"score": 100, "problemStatus": 0, "submissionIds": [], "rawScore": 100}`
		a1Derived = `{"score": 90, "problemStatus": 0, "submissionIds": ["65e10000000000000000000a", "65e10000000000000000000c", "65e10000000000000000000f"], "rawScore": 100}`
		c3Stale   = `{"score": 55, "problemStatus": 1, "submissionIds": ["65e10000000000000000000a"], "rawScore": 55}`
		c3Start   = `{"score": 0, "problemStatus": null, "submissionIds": []}`
		userStale = `"submission": 4, "AC_submission": 1, "AC_problem_ids": [8]`
		userRight = `"submission": 5, "AC_submission": 3, "AC_problem_ids": [8, 7]`
		malformed = `{"_id": {"$oid": "65e100000000000000000011"}, "user": "alice", "problem": "seven", "timestamp": {"$date": "2026-02-10T00:00:00Z"}, "status": 0, "score": 100},
  {"_id": {"$oid": "65e100000000000000000012"}, "user": "alice", "problem": 7, "status": 0, "score": 100},
  `
	)
	fix := func(docs string, pairs ...string) string {
		r := strings.NewReplacer(pairs...)
		out := r.Replace(docs)
		for i := 0; i < len(pairs); i += 2 {
			if !strings.Contains(docs, pairs[i]) {
				t.Fatalf("the scenario has no %s", pairs[i])
			}
		}
		return out
	}
	const a, c = "65e0000000000000000000a1", "65e0000000000000000000c3"
	for _, v := range []struct {
		name      string
		docs      string
		a1, c3    bool // entry drift
		counts    bool
		drift     bool
		malformed int
	}{
		{"only the unlisted entry", fix(scenarioDocs, a1Stale, a1Derived, userStale, userRight), false, true, false, true, 0},
		{"only the counts", fix(scenarioDocs, a1Stale, a1Derived, c3Stale, c3Start), false, false, true, true, 0},
		{"only a listed entry", fix(scenarioDocs, c3Stale, c3Start, userStale, userRight), true, false, false, true, 0},
		{"none", fix(scenarioDocs, a1Stale, a1Derived, c3Stale, c3Start, userStale, userRight), false, false, false, false, 0},
		{"none, malformed submissions", fix(scenarioDocs, a1Stale, a1Derived, c3Stale, c3Start, userStale, userRight,
			`"submission": [`, `"submission": [`+"\n  "+malformed), false, false, false, false, 2},
	} {
		t.Run(v.name, func(t *testing.T) {
			dir := writeScenarioDocs(t, v.docs)
			r := runCLI(t, "explain", "--dump", dir, "--user", "alice", "--problem", "7", "--json")
			if r.code != exitOK {
				t.Fatalf("explain --json: want exit 0\n%v", r)
			}
			var ex explain.Explanation
			if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil {
				t.Fatal(err)
			}
			drifts := map[string]bool{}
			for _, e := range ex.Entries {
				drifts[e.Homework] = e.Drift
			}
			if drifts[a] != v.a1 || drifts[c] != v.c3 || ex.UserCounts.Drift != v.counts || ex.Drift != v.drift || len(ex.Malformed) != v.malformed {
				t.Errorf("JSON: entry drift a1 %v c3 %v, counts %v, drift %v, %d malformed; want %v %v, %v, %v, %d",
					drifts[a], drifts[c], ex.UserCounts.Drift, ex.Drift, len(ex.Malformed), v.a1, v.c3, v.counts, v.drift, v.malformed)
			}
			r = runCLI(t, "explain", "--dump", dir, "--user", "alice", "--problem", "7")
			if r.code != exitOK {
				t.Fatalf("explain: want exit 0\n%v", r)
			}
			rows := []string{"homework " + a + "  " + driftMark(v.a1), "homework " + c + "  " + driftMark(v.c3),
				"user alice counts  " + driftMark(v.counts), "drift: none"}
			if v.drift {
				rows[3] = "drift: yes (the running daemon, or 'rebuild', writes the derived values)"
			}
			if v.malformed > 0 {
				rows = append(rows, "malformed documents skipped: "+itoa(v.malformed))
			} else if strings.Contains(r.stdout, "malformed documents skipped") {
				t.Errorf("a malformed row with nothing malformed\n%s", r.stdout)
			}
			for _, row := range rows {
				if !strings.Contains(r.stdout, "\n"+row+"\n") && !strings.Contains(r.stdout, "\n  "+row+"\n") {
					t.Errorf("no row %q\n%s", row, r.stdout)
				}
			}
		})
	}
}
