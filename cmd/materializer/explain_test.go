package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/explain"
	"github.com/normal-oj/noj-materializer/materialize"
)

// storedValues reads every studentStatus entry value of homework documents
// as stored (homework hex → user → problem key → value), whatever it holds.
func storedValues(t testing.TB, hws []bson.Raw) map[string]map[string]map[string]bson.RawValue {
	t.Helper()
	out := map[string]map[string]map[string]bson.RawValue{}
	for _, h := range hws {
		id, ok := h.Lookup("_id").ObjectIDOK()
		if !ok {
			continue
		}
		m := map[string]map[string]bson.RawValue{}
		out[id.Hex()] = m
		ss, ok := h.Lookup("studentStatus").DocumentOK()
		if !ok {
			continue
		}
		users, err := ss.Elements()
		if err != nil {
			t.Fatal(err)
		}
		for _, ue := range users {
			ud, ok := ue.Value().DocumentOK()
			if !ok {
				continue
			}
			probs, err := ud.Elements()
			if err != nil {
				t.Fatal(err)
			}
			m[ue.Key()] = map[string]bson.RawValue{}
			for _, pe := range probs {
				m[ue.Key()][pe.Key()] = pe.Value()
			}
		}
	}
	return out
}

// decodeDerived reads a derived entry of explain's JSON back into an Entry.
func decodeDerived(t testing.TB, raw json.RawMessage) materialize.Entry {
	t.Helper()
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(raw, false, &doc); err != nil {
		t.Fatalf("derived %s: %v", raw, err)
	}
	e, ok := materialize.DecodeEntry(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc})
	if !ok {
		t.Fatalf("derived %s: not an entry", raw)
	}
	return e
}

// explainedPair is a (user, problem) pair holding an entry.
type explainedPair struct {
	user    string
	problem int64
}

// pairsWithEntries lists the (user, problem) pairs holding an entry in
// homework documents (canonical problem keys only: explain takes a
// problemId).
func pairsWithEntries(t testing.TB, hws []bson.Raw) []explainedPair {
	var out []explainedPair
	for _, hw := range storedValues(t, hws) {
		for u, ps := range hw {
			for pk := range ps {
				if p, ok := materialize.ParseProblemKey(pk); ok && !slices.Contains(out, explainedPair{u, p}) {
					out = append(out, explainedPair{u, p})
				}
			}
		}
	}
	return out
}

// explainJSON runs explain --json with args for pr and decodes it.
func explainJSON(t testing.TB, pr explainedPair, args ...string) explain.Explanation {
	t.Helper()
	args = append([]string{"explain", "--user", pr.user, "--problem", strconv.FormatInt(pr.problem, 10), "--json"}, args...)
	r := runCLI(t, args...)
	if r.code != exitOK {
		t.Fatalf("%v: want exit 0\n%v", args, r)
	}
	var ex explain.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, r.stdout)
	}
	return ex
}

// checkExplainedAsRebuilt checks that what explain reported as final for
// pr (before: the documents explain read; after: what rebuild wrote from
// the same documents) is what rebuild wrote: the same homeworks, equal
// entries, the user's counts, and drift marked exactly where rebuild
// changed a value.
func checkExplainedAsRebuilt(t testing.TB, pr explainedPair, ex explain.Explanation, before, after materialize.Docs) {
	t.Helper()
	pk := strconv.FormatInt(pr.problem, 10)
	was, now := storedValues(t, before.Homeworks), storedValues(t, after.Homeworks)
	var want, got []string
	for h, us := range now {
		if _, ok := us[pr.user][pk]; ok {
			want = append(want, h)
		}
	}
	drift := false
	for _, e := range ex.Entries {
		got = append(got, e.Homework)
		written, ok := now[e.Homework][pr.user][pk]
		if !ok {
			continue
		}
		if de := decodeDerived(t, e.Derived); !de.MatchesStored(written) {
			t.Errorf("explain %q %d homework %s: final %s, rebuild wrote %s", pr.user, pr.problem, e.Homework, e.Derived, written)
		}
		old := was[e.Homework][pr.user][pk]
		if changed := old.Type != written.Type || !slices.Equal(old.Value, written.Value); e.Drift != changed {
			t.Errorf("explain %q %d homework %s: drift %v, rebuild changed it: %v", pr.user, pr.problem, e.Homework, e.Drift, changed)
		}
		drift = drift || e.Drift
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("explain %q %d: entries in %v, rebuild's output has them in %v", pr.user, pr.problem, got, want)
	}
	var doc bson.Raw
	for _, u := range after.Users {
		if name, ok := u.Lookup("_id").StringValueOK(); ok && name == pr.user {
			doc = u
		}
	}
	if (doc != nil) != ex.UserCounts.Document {
		t.Errorf("explain %q: user document %v, rebuild's output has one: %v", pr.user, ex.UserCounts.Document, doc != nil)
	} else if doc != nil {
		var d bson.Raw
		if err := bson.UnmarshalExtJSON(ex.UserCounts.Derived, false, &d); err != nil {
			t.Fatal(err)
		}
		st, _ := materialize.DecodeUserStats(d)
		if !st.MatchesStored(doc) {
			t.Errorf("explain %q: derived counts %s, rebuild wrote %s", pr.user, ex.UserCounts.Derived, doc)
		}
		drift = drift || ex.UserCounts.Drift
	}
	if drift != ex.Drift {
		t.Errorf("explain %q %d: drift %v, its parts say %v", pr.user, pr.problem, ex.Drift, drift)
	}
}

// TestExplainMatchesRebuild runs, on every derive vector written as a
// mongodump directory, `rebuild --dump --out` (the real offline rebuild)
// and `explain --dump --json` for every (user, problem) pair holding an
// entry, and checks that what explain reports as final is what rebuild
// wrote (checkExplainedAsRebuilt).
func TestExplainMatchesRebuild(t *testing.T) {
	cleanConfigEnv(t)
	var pairs atomic.Int64
	for _, v := range readVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			staleDir, outDir := filepath.Join(root, "stale"), filepath.Join(root, "out")
			writeDump(t, staleDir, v.DB, nil)
			if r := runCLI(t, "rebuild", "--dump", staleDir, "--out", outDir); r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			out := readDumpDocs(t, outDir)
			for _, pr := range pairsWithEntries(t, v.DB.Homeworks) {
				pairs.Add(1)
				checkExplainedAsRebuilt(t, pr, explainJSON(t, pr, "--dump", staleDir), v.DB, out)
			}
		})
	}
	t.Cleanup(func() {
		if pairs.Load() == 0 {
			t.Errorf("no (user, problem) pair with an entry in any vector")
		}
		t.Logf("%d pairs explained", pairs.Load())
	})
}

// TestExplainUsage: missing or bad flags and an unknown user or problem
// are usage errors (exit 2) with a message naming what is wrong.
func TestExplainUsage(t *testing.T) {
	cleanConfigEnv(t)
	dir := cleanVectorDump(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"explain", "--dump", dir}, "needs --user U and --problem P"},
		{[]string{"explain", "--dump", dir, "--user", "u"}, "needs --user U and --problem P"},
		{[]string{"explain", "--dump", dir, "--user", "u", "--problem", "x1"}, `--problem "x1" is not a problemId`},
		{[]string{"explain", "--dump", dir, "--user", "no-such-user-anywhere", "--problem", "1"}, `unknown user "no-such-user-anywhere"`},
		{[]string{"explain", "--user", "u", "--problem", "1"}, "MATERIALIZER_MONGODB_URI"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want exit 2 and %q on stderr\n%v", c.args, c.want, r)
		}
	}
}

// scenarioDocs is one student's problem in every situation explain
// describes: problem 7 lists homework A, homework B twice and a homework
// that does not exist; homework C holds an entry for the pair but is not
// listed; A halves late gains, B's penalty divides by zero. alice's
// submissions to 7: on time 60, created, on-time rejudge in flight 80,
// handwritten 100, pending, 2.5 days late 100; and one AC of problem 8.
const scenarioDocs = `{
 "problem": [
  {"_id": 7, "homeworks": [{"$oid": "65e0000000000000000000a1"}, {"$oid": "65e0000000000000000000b2"}, {"$oid": "65e0000000000000000000b2"}, {"$oid": "65e0000000000000000000d4"}]},
  {"_id": 8, "homeworks": []}],
 "homework": [
  {"_id": {"$oid": "65e0000000000000000000a1"}, "homeworkName": "A", "duration": {"start": {"$date": "2026-02-01T00:00:00Z"}, "end": {"$date": "2026-03-01T00:00:00Z"}},
   "penalty": "score = score * 0.5", "problemIds": [7],
   "studentStatus": {"alice": {"7": {"score": 100, "problemStatus": 0, "submissionIds": [], "rawScore": 100}}}},
  {"_id": {"$oid": "65e0000000000000000000b2"}, "homeworkName": "B", "duration": {"start": {"$date": "2026-02-01T00:00:00Z"}, "end": {"$date": "2026-03-01T00:00:00Z"}},
   "penalty": "score = 1 / 0", "problemIds": [7],
   "studentStatus": {"alice": {"7": {"score": 80, "problemStatus": 0, "submissionIds": ["65e10000000000000000000a", "65e10000000000000000000c", "65e10000000000000000000f"], "rawScore": 90}}}},
  {"_id": {"$oid": "65e0000000000000000000c3"}, "homeworkName": "C", "duration": {"start": {"$date": "2026-02-01T00:00:00Z"}, "end": {"$date": "2026-03-01T00:00:00Z"}},
   "penalty": "score = 0", "problemIds": [],
   "studentStatus": {"alice": {"7": {"score": 55, "problemStatus": 1, "submissionIds": ["65e10000000000000000000a"], "rawScore": 55}}}}],
 "submission": [
  {"_id": {"$oid": "65e10000000000000000000a"}, "user": "alice", "problem": 7, "languageType": 1, "timestamp": {"$date": "2026-02-28T23:59:59Z"}, "status": 1, "score": 60},
  {"_id": {"$oid": "65e10000000000000000000b"}, "user": "alice", "problem": 7, "languageType": 1, "timestamp": {"$date": "2026-02-28T23:59:59.200Z"}, "status": -2, "score": -1},
  {"_id": {"$oid": "65e10000000000000000000c"}, "user": "alice", "problem": 7, "languageType": 1, "timestamp": {"$date": "2026-02-28T23:59:59.500Z"}, "status": -1, "score": 80},
  {"_id": {"$oid": "65e10000000000000000000d"}, "user": "alice", "problem": 7, "languageType": 3, "timestamp": {"$date": "2026-02-28T23:59:59.800Z"}, "status": 0, "score": 100},
  {"_id": {"$oid": "65e10000000000000000000e"}, "user": "alice", "problem": 7, "languageType": 1, "timestamp": {"$date": "2026-03-01T00:00:00Z"}, "status": -1, "score": -1},
  {"_id": {"$oid": "65e10000000000000000000f"}, "user": "alice", "problem": 7, "languageType": 1, "timestamp": {"$date": "2026-03-03T12:00:00Z"}, "status": 0, "score": 100},
  {"_id": {"$oid": "65e100000000000000000010"}, "user": "alice", "problem": 8, "languageType": 1, "timestamp": {"$date": "2026-02-10T00:00:00Z"}, "status": 0, "score": 100}],
 "user": [{"_id": "alice", "submission": 4, "AC_submission": 1, "AC_problem_ids": [8]}]
}`

func compact(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// writeScenario writes scenarioDocs as a mongodump directory.
func writeScenario(t *testing.T) string {
	t.Helper()
	return writeScenarioDocs(t, scenarioDocs)
}

// writeScenarioDocs writes docs, shaped as scenarioDocs, as a mongodump
// directory.
func writeScenarioDocs(t *testing.T, docs string) string {
	t.Helper()
	var colls map[string][]json.RawMessage
	if err := json.Unmarshal([]byte(docs), &colls); err != nil {
		t.Fatal(err)
	}
	var d materialize.Docs
	for name, docs := range colls {
		for _, j := range docs {
			var raw bson.Raw
			if err := bson.UnmarshalExtJSON(j, false, &raw); err != nil {
				t.Fatal(err)
			}
			switch name {
			case "problem":
				d.Problems = append(d.Problems, raw)
			case "homework":
				d.Homeworks = append(d.Homeworks, raw)
			case "submission":
				d.Submissions = append(d.Submissions, raw)
			case "user":
				d.Users = append(d.Users, raw)
			}
		}
	}
	dir := t.TempDir()
	writeDump(t, dir, d, nil)
	return dir
}

// TestExplainScenario checks every part of an explanation against values
// worked out by hand from docs/derivation-spec.md for scenarioDocs, in
// JSON and in the human-readable form.
func TestExplainScenario(t *testing.T) {
	cleanConfigEnv(t)
	dir := writeScenario(t)
	r := runCLI(t, "explain", "--dump", dir, "--user", "alice", "--problem", "7", "--json")
	if r.code != exitOK {
		t.Fatalf("want exit 0 (drift is not an error)\n%v", r)
	}
	var ex explain.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &ex); err != nil {
		t.Fatal(err)
	}
	const a, b, c, d = "65e0000000000000000000a1", "65e0000000000000000000b2", "65e0000000000000000000c3", "65e0000000000000000000d4"
	var refs []string
	for _, r := range ex.ProblemHomeworks {
		refs = append(refs, r.Homework[22:]+" "+r.Status)
	}
	if want := []string{"a1 visited", "b2 visited", "b2 repeated", "d4 dangling"}; !slices.Equal(refs, want) {
		t.Errorf("problem homeworks %v, want %v", refs, want)
	}
	type subView struct {
		id             string
		judged, counts bool
		steps          int
	}
	var subs []subView
	for _, s := range ex.Submissions {
		subs = append(subs, subView{s.ID[22:], s.Judged, s.CountsForEntries, len(s.Steps)})
	}
	wantSubs := []subView{{"0a", true, true, 2}, {"0b", false, false, 0}, {"0c", true, true, 2}, {"0d", true, false, 0}, {"0e", false, false, 0}, {"0f", true, true, 2}}
	if !slices.Equal(subs, wantSubs) {
		t.Errorf("submissions %+v, want %+v", subs, wantSubs)
	}
	if !strings.Contains(ex.Submissions[2].Note, "rejudge in flight") || !strings.Contains(ex.Submissions[3].Note, "handwritten") {
		t.Errorf("notes %q, %q", ex.Submissions[2].Note, ex.Submissions[3].Note)
	}
	// The late AC: A runs penalty(score=100-80, overtime=2) = 10, 80+10 = 90
	// and carries 90 to B, whose program fails: gains 0, score stays 80.
	late := ex.Submissions[5].Steps
	pa, pb := late[0].Penalty, late[1].Penalty
	if late[0].Homework != a || !late[0].Late || late[0].LateDays != 2 || pa == nil || pa.Score != "20" || pa.Overtime != 2 || pa.Returned != 10 || pa.Error != "" ||
		late[0].ScoreBefore != 80 || late[0].Score != 90 || late[0].RawScore != 100 || !late[0].SetProblemStatus || late[0].Carried != 90 {
		t.Errorf("late step in A: %+v penalty %+v", late[0], pa)
	}
	if late[1].Homework != b || late[1].In != 90 || pb == nil || pb.Score != "10" || pb.Error == "" || pb.Returned != 0 ||
		late[1].Score != 80 || late[1].RawScore != 90 || !late[1].SetProblemStatus || late[1].Carried != 80 || *late[1].ProblemStatus != 0 {
		t.Errorf("late step in B: %+v penalty %+v", late[1], pb)
	}
	rejudge := ex.Submissions[2].Steps[0]
	if rejudge.Score != 80 || rejudge.ProblemStatus == nil || *rejudge.ProblemStatus != -1 || !rejudge.SetProblemStatus {
		t.Errorf("rejudge step in A: %+v", rejudge)
	}
	ids := `["65e10000000000000000000a","65e10000000000000000000c","65e10000000000000000000f"]`
	wantEntries := []struct {
		hw, derived string
		drift       bool
		listed      bool
	}{
		{a, `{"score":90,"problemStatus":0,"submissionIds":` + ids + `,"rawScore":100}`, true, true},
		{b, `{"score":80,"problemStatus":0,"submissionIds":` + ids + `,"rawScore":90}`, false, true},
		{c, `{"score":0,"problemStatus":null,"submissionIds":[]}`, true, false},
	}
	if len(ex.Entries) != len(wantEntries) {
		t.Fatalf("%d entries, want %d: %+v", len(ex.Entries), len(wantEntries), ex.Entries)
	}
	for i, w := range wantEntries {
		e := ex.Entries[i]
		if e.Homework != w.hw || compact(t, e.Derived) != w.derived || e.Drift != w.drift || (e.Position != nil) != w.listed {
			t.Errorf("entry %d: %s %s drift %v listed %v, want %+v", i, e.Homework, e.Derived, e.Drift, e.Position != nil, w)
		}
	}
	if compact(t, ex.UserCounts.Derived) != `{"submission":5,"AC_submission":3,"AC_problem_ids":[8,7]}` || !ex.UserCounts.Drift ||
		compact(t, ex.UserCounts.Stored) != `{"submission":4,"AC_submission":1,"AC_problem_ids":[8]}` {
		t.Errorf("user counts %+v", ex.UserCounts)
	}
	if ex.PenaltyErrors != 1 || !ex.Drift || !ex.ProblemFound {
		t.Errorf("penalty errors %d, drift %v, problem found %v", ex.PenaltyErrors, ex.Drift, ex.ProblemFound)
	}

	r = runCLI(t, "explain", "--dump", dir, "--user", "alice", "--problem", "7")
	if r.code != exitOK {
		t.Fatalf("want exit 0\n%v", r)
	}
	for _, w := range []string{
		"[2] " + b + "  repeated: listed at [1] already, visited once",
		"[3] " + d + "  dangling",
		"homework " + c + " is not listed by the problem",
		"late 2 day(s); brings 100; penalty(score=20, overtime=2) returned 10; score 80 -> 90, rawScore 80 -> 100; sets problemStatus 0; carries 90",
		"penalty(score=10, overtime=2) FAILED",
		"homework " + a + "  DRIFT",
		"homework " + b + "  same",
		"penalty errors: 1",
		"drift: yes",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the explanation lacks %q\n%s", w, r.stdout)
		}
	}
}
