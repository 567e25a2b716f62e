package main

// Offline commands: smaller things an operator meets.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/drift"
)

func TestDatabaseNameRules(t *testing.T) {
	cleanConfigEnv(t)
	dir := cleanVectorDump(t)
	for _, name := range []string{"a.b", "a$b", "a b", `a"b`, "a/b", `a\b`, strings.Repeat("n", 64)} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("MATERIALIZER_DATABASE", name)
			r := runCLI(t, "verify", "--dump", dir)
			if r.code != exitConfig || !strings.Contains(r.stderr, "MATERIALIZER_DATABASE") || !strings.Contains(r.stderr, "database name") {
				t.Errorf("verify --dump: want exit 2 on the database name\n%v", r)
			}
			t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?replicaSet=rs0")
			r = runCLI(t, "status")
			if r.code != exitConfig || !strings.Contains(r.stderr, "MATERIALIZER_DATABASE") {
				t.Errorf("status: want exit 2 naming MATERIALIZER_DATABASE\n%v", r)
			}
		})
	}
}

func TestURIOptionsRefused(t *testing.T) {
	cleanConfigEnv(t)
	for _, c := range []struct{ uri, want string }{
		{"mongodb://127.0.0.1:1/?replicaSet=", "replicaSet"},
		{"mongodb://127.0.0.1:1/?directConnection=true&replicaSet=&w=majority", "replicaSet"},
		{"mongodb://127.0.0.1:1/?replicaSet=rs0&timeoutMS=5000", "timeoutMS"},
		{"mongodb://u:p%3Fx@127.0.0.1:1/db?TIMEOUTMS=0", "timeoutMS"},
		{"mongodb://127.0.0.1:1/?replicaSet=rs0;timeoutms=10", "timeoutMS"},
	} {
		t.Setenv("MATERIALIZER_MONGODB_URI", c.uri)
		r := runCLI(t, "status")
		if r.code != exitConfig || !strings.Contains(r.stderr, "MATERIALIZER_MONGODB_URI") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want exit 2 naming %s\n%v", c.uri, c.want, r)
		}
		if strings.Contains(r.stderr, ":p%3Fx@") || strings.Contains(r.stderr, ":p?x@") {
			t.Errorf("the password is printed\n%v", r)
		}
	}
}

// TestDumpOfAnotherDatabase: a mongodump --out directory holding another
// database's directory names it and MATERIALIZER_DATABASE.
func TestDumpOfAnotherDatabase(t *testing.T) {
	cleanConfigEnv(t)
	root := t.TempDir()
	in := cleanVectorDump(t)
	if err := os.Rename(in, filepath.Join(root, "noj-prod")); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "verify", "--dump", root)
	if r.code != exitConfig || !strings.Contains(r.stderr, "MATERIALIZER_DATABASE") || !strings.Contains(r.stderr, "noj-prod") {
		t.Errorf("want exit 2 naming noj-prod and MATERIALIZER_DATABASE\n%v", r)
	}
	t.Setenv("MATERIALIZER_DATABASE", "noj-prod")
	if r := runCLI(t, "verify", "--dump", root); r.code != exitOK {
		t.Errorf("with MATERIALIZER_DATABASE=noj-prod: %v", r)
	}
}

// TestEmptySubmissionFileWarns: a 0-byte submission.bson while users
// have counts zeroes them all: the command says so on stderr.
func TestEmptySubmissionFileWarns(t *testing.T) {
	cleanConfigEnv(t)
	dir := t.TempDir()
	bigHomeworkDump(t, dir, 1000)
	if err := os.Truncate(filepath.Join(dir, "submission.bson"), 0); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", "--dump", dir}, {"rebuild", "--dump", dir, "--dry-run"}} {
		r := runCLI(t, args...)
		if !strings.Contains(r.stderr, "warning: the dump holds no submission") || !strings.Contains(r.stderr, "1 users") {
			t.Errorf("%q: no warning about the empty submission file\n%v", args, r)
		}
	}
	// A clean dump with submissions: no warning.
	if r := runCLI(t, "verify", "--dump", cleanVectorDump(t)); strings.Contains(r.stderr, "warning") {
		t.Errorf("a warning on a clean dump\n%v", r)
	}
}

func TestRepeatedFlagRefused(t *testing.T) {
	cleanConfigEnv(t)
	dir := cleanVectorDump(t)
	for _, args := range [][]string{
		{"explain", "--dump", dir, "--user", "u", "--problem", "1", "--problem", "2"},
		{"explain", "--dump", dir, "--user=u", "-user", "v", "--problem", "1"},
		{"verify", "--dump", dir, "--max-diffs", "3", "--max-diffs=4"},
	} {
		r := runCLI(t, args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, "more than once") {
			t.Errorf("%q: want exit 2, given more than once\n%v", args, r)
		}
	}
	// A value that looks like a flag is a value.
	if r := runCLI(t, "verify", "--dump", dir, "--max-diffs", "-1"); strings.Contains(r.stderr, "more than once") {
		t.Errorf("%v", r)
	}
}

// TestHelpStreams: --help (any command, or help <command>) prints to
// stdout and exits 0; a usage error prints the usage to stderr, exit 2.
func TestHelpStreams(t *testing.T) {
	cleanConfigEnv(t)
	for _, args := range [][]string{{"--help"}, {"help"}, {"verify", "--help"}, {"rebuild", "-h"}, {"help", "run"}, {"help", "verify"}, {"version", "--help"}} {
		r := runCLI(t, args...)
		if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "Usage: materializer") {
			t.Errorf("%q: want the usage on stdout, exit 0, nothing on stderr\n%v", args, r)
		}
		if len(args) == 2 && args[0] == "help" && !strings.Contains(r.stdout, "Usage: materializer "+args[1]) {
			t.Errorf("%q: not %s's help\n%v", args, args[1], r)
		}
	}
	if r := runCLI(t, "version", "--help"); strings.Contains(r.output(), "MATERIALIZER_") {
		t.Errorf("version --help talks about configuration it does not read\n%v", r)
	}
	for _, args := range [][]string{{"verify", "--bogus"}, {}, {"help", "nosuch"}} {
		r := runCLI(t, args...)
		if r.code != exitConfig || r.stdout != "" || r.stderr == "" {
			t.Errorf("%q: want exit 2, output on stderr only\n%v", args, r)
		}
	}
}

// TestFirstDifferencesIDs: an entry holding hundreds of submission ids
// prints the ids that differ, not all of them.
func TestFirstDifferencesIDs(t *testing.T) {
	ids := func(n int, extra ...string) string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf(`{"$oid":"%024x"}`, i))
		}
		for _, e := range extra {
			s = append(s, fmt.Sprintf(`{"$oid":"%s"}`, e))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	rep := &drift.Report{Diffs: []drift.Diff{{Collection: "homework", ID: "abc", Path: "studentStatus.alice.7",
		Stored:  `{"score":{"$numberInt":"0"},"problemStatus":null,"submissionIds":` + ids(300) + `}`,
		Derived: `{"score":100,"problemStatus":0,"submissionIds":` + ids(300, "ffffffffffffffffffffff01", "ffffffffffffffffffffff02") + `}`}}}
	var b bytes.Buffer
	printReport(&b, rep, "drifted")
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 300 {
			t.Errorf("a line of %d bytes:\n%.300s...", len(line), line)
		}
	}
	for _, want := range []string{"300 ids", "302 ids", "ffffffffffffffffffffff01", "ffffffffffffffffffffff02", `"score":100`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// Few ids: printed as they are.
	rep.Diffs[0].Stored, rep.Diffs[0].Derived = `{"submissionIds":`+ids(1)+`}`, `{"submissionIds":`+ids(2)+`}`
	b.Reset()
	printReport(&b, rep, "drifted")
	if !strings.Contains(b.String(), ids(2)) {
		t.Errorf("a short list was shortened:\n%s", b.String())
	}
}

// TestOfflinePathErrorsNameTheFlag: the offline library's path errors
// name no flag; the command words them with the one that gave the path.
func TestOfflinePathErrorsNameTheFlag(t *testing.T) {
	cleanConfigEnv(t)
	dir := filepath.Join(t.TempDir(), "normal-oj")
	if r := runCLI(t, "seed", "--users", "2", "--submissions", "5", "--out", dir); r.code != exitOK {
		t.Fatalf("seed: %v", r)
	}
	r := runCLI(t, "rebuild", "--dump", dir, "--out", filepath.Join(dir, "out"))
	if r.code != exitConfig || !strings.Contains(r.stderr, "--out") || !strings.Contains(r.stderr, "inside the input dump") {
		t.Fatalf("want exit 2 naming --out and the reason\n%v", r)
	}
}
