package main

// Careless inputs and small inconsistencies an operator meets: each is
// refused or answered the one way the other commands answer it.

import (
	"bytes"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/drift"
)

// TestVersionFlag: --version is the version command, as most tools have it.
func TestVersionFlag(t *testing.T) {
	cleanConfigEnv(t)
	old := version
	version = "v9.8.7-test"
	t.Cleanup(func() { version = old })
	want := runCLI(t, "version")
	for _, arg := range []string{"--version", "-version"} {
		if r := runCLI(t, arg); r.code != exitOK || r.stdout != want.stdout || r.stderr != "" {
			t.Errorf("materializer %s: want exit 0 and %q on stdout\n%v", arg, want.stdout, r)
		}
	}
	if r := runCLI(t, "--version", "now"); r.code != exitConfig {
		t.Errorf("materializer --version now: want exit 2\n%v", r)
	}
}

// TestConsoleLogsNoColourOffTerminal: MATERIALIZER_LOG_FORMAT=console
// writes no ANSI colour codes to a stderr that is not a terminal (a file,
// a pipe to a log collector).
func TestConsoleLogsNoColourOffTerminal(t *testing.T) {
	var stderr bytes.Buffer
	log, err := newLogger(&environment{stderr: &stderr}, &Config{LogLevel: "info", LogFormat: "console"})
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Str("collection", "homework").Msg("something to read")
	if out := stderr.String(); strings.Contains(out, "\x1b[") || !strings.Contains(out, "something to read") {
		t.Errorf("console log off a terminal: %q", out)
	}
}

// TestOfflineFlagsRefused: flags that would be ignored or silently
// changed are refused with exit 2, naming the flag.
func TestOfflineFlagsRefused(t *testing.T) {
	cleanConfigEnv(t)
	dir := cleanVectorDump(t)
	out := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"negative max-diffs verify", []string{"verify", "--dump", dir, "--max-diffs", "-1"}, "--max-diffs"},
		{"negative max-diffs rebuild", []string{"rebuild", "--dump", dir, "--dry-run", "--max-diffs", "-3"}, "--max-diffs"},
		{"negative max-diffs online", []string{"verify", "--max-diffs", "-1"}, "--max-diffs"},
		{"out with dry-run", []string{"rebuild", "--dump", dir, "--dry-run", "--out", out}, "--dry-run"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.args...)
			if r.code != exitConfig || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Errorf("materializer %q: want exit 2 naming %s, nothing on stdout\n%v", c.args, c.want, r)
			}
		})
	}
}

// TestEmptyIDListNotation: an empty submissionIds list prints as [] in
// every difference (as explain prints it), also beside a long list that
// prints as its count.
func TestEmptyIDListNotation(t *testing.T) {
	ids := `[{"$oid":"000000000000000000000001"},{"$oid":"000000000000000000000002"},{"$oid":"000000000000000000000003"},` +
		`{"$oid":"000000000000000000000004"},{"$oid":"000000000000000000000005"},{"$oid":"000000000000000000000006"}]`
	rep := &drift.Report{Diffs: []drift.Diff{
		{Collection: "homework", ID: "a", Path: "studentStatus.alice.7",
			Stored: `{"score":0,"problemStatus":null,"submissionIds":[]}`, Derived: `{"score":100,"problemStatus":0,"submissionIds":` + ids + `}`},
		{Collection: "homework", ID: "b", Path: "studentStatus.bob.7",
			Stored: `{"score":0,"problemStatus":null,"submissionIds":[]}`, Derived: `{"score":0,"problemStatus":-1,"submissionIds":[]}`},
	}}
	var b bytes.Buffer
	printReport(&b, rep, "drifted")
	out := b.String()
	if strings.Contains(out, "[0 ids]") || strings.Count(out, `"submissionIds":[]`) != 3 || !strings.Contains(out, "[6 ids]") {
		t.Errorf("want every empty list as [] and the long one as [6 ids]:\n%s", out)
	}
}
