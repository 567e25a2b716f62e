package main

// Careless inputs and small inconsistencies an operator meets: each is
// refused or answered the one way the other commands answer it.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestOutTargetsRefused: an output that cannot be what the command writes
// is refused before any work (exit 2), naming what to give instead, and
// nothing is created: no directory named "-", no x.archive directory.
func TestOutTargetsRefused(t *testing.T) {
	cleanConfigEnv(t)
	dir := cleanVectorDump(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"seed --out x.archive", []string{"seed", "--users", "2", "--submissions", "5", "--out", "x.archive"}, []string{"--archive", "x.archive"}},
		{"seed --out x.gz", []string{"seed", "--users", "2", "--submissions", "5", "--out", "x.archive.gz"}, []string{"--archive", "x.archive.gz"}},
		{"seed --out -", []string{"seed", "--users", "2", "--submissions", "5", "--out", "-"}, []string{"--out -", "directory"}},
		{"rebuild directory --out -", []string{"rebuild", "--dump", dir, "--out", "-"}, []string{"--out -", "directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cwd := t.TempDir()
			t.Chdir(cwd)
			r := runCLI(t, c.args...)
			if r.code != exitConfig || r.stdout != "" {
				t.Errorf("want exit 2 and nothing on stdout\n%v", r)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("the refusal does not say %q\n%v", w, r)
				}
			}
			if e, _ := os.ReadDir(cwd); len(e) > 0 {
				t.Errorf("a refused command created %s", e[0].Name())
			}
		})
	}
}

// TestAmbiguousDumpLayoutRefused: a dump folder holding loose collection
// files and a <database>/ folder is refused naming both (which one is the
// dump cannot be told), as X.bson beside X.bson.gz is.
func TestAmbiguousDumpLayoutRefused(t *testing.T) {
	cleanConfigEnv(t)
	vs := readVectors(t)
	root := t.TempDir()
	writeDump(t, root, applyExpected(t, vs[0]), nil)
	writeDump(t, filepath.Join(root, "normal-oj"), vs[0].DB, nil) // beside the loose files
	for _, args := range [][]string{{"verify", "--dump", root}, {"rebuild", "--dump", root, "--dry-run"}} {
		r := runCLI(t, args...)
		if r.code != exitConfig || r.stdout != "" || !strings.Contains(r.stderr, filepath.Join(root, "normal-oj")) || !strings.Contains(r.stderr, "user.bson") {
			t.Errorf("%v: want exit 2 naming %s and the loose files\n%v", args, filepath.Join(root, "normal-oj"), r)
		}
	}
}

// TestMissingTMPDIRNamed: an archive is unpacked under $TMPDIR; a TMPDIR
// that does not exist is a usage error naming the variable and its value.
func TestMissingTMPDIRNamed(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	arch, _ := archiveOfDump(t, dumpColls(v.DB, nil), false)
	file := filepath.Join(t.TempDir(), "in.archive")
	if err := os.WriteFile(file, arch, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-such-tmp")
	t.Setenv("TMPDIR", missing)
	r := runCLI(t, "verify", "--dump", file)
	if r.code != exitConfig || !strings.Contains(r.stderr, "TMPDIR") || !strings.Contains(r.stderr, missing) {
		t.Errorf("want exit 2 naming TMPDIR=%s\n%v", missing, r)
	}
}

// TestStdinTerminalRefused: --dump - reads an archive from standard
// input; at a terminal it would wait silently for one, so it is refused
// at once (exit 2), saying how to give one.
func TestStdinTerminalRefused(t *testing.T) {
	cleanConfigEnv(t)
	tty := openTerminal(t)
	for _, args := range [][]string{{"verify", "--dump", "-"}, {"rebuild", "--dump", "-", "--dry-run"}} {
		var stdout, stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runMain(context.Background(), &environment{stdin: tty, stdout: &stdout, stderr: &stderr}, args)
		}()
		select {
		case code := <-done:
			r := cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
			if r.code != exitConfig || !strings.Contains(r.stderr, "terminal") {
				t.Errorf("%v at a terminal: want exit 2 saying stdin is a terminal\n%v", args, r)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%v at a terminal: still waiting after a minute, having said nothing on stdout or stderr", args)
		}
	}
}
