package main

// The sample outputs in the docs are the commands' output on fixed input:
// each test below runs the command (or the progress reporter on a fake
// clock) and compares its output with the doc's block; go test -run
// TestDocSample -update-docs rewrites the blocks instead.

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/progress"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the docs' sample outputs with what the commands print")

// checkDocSample compares got with the first code block of the doc at
// path (relative to the repository) after the line after, or rewrites
// that block with -update-docs.
func checkDocSample(t *testing.T, path, after, got string) {
	t.Helper()
	file := filepath.Join("..", "..", path)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, after)
	if i < 0 {
		t.Fatalf("%s has no %q", path, after)
	}
	open := strings.Index(text[i:], "```")
	if open < 0 {
		t.Fatalf("%s: no code block after %q", path, after)
	}
	start := i + open + strings.Index(text[i+open:], "\n") + 1
	end := strings.Index(text[start:], "```")
	if end < 0 {
		t.Fatalf("%s: the code block after %q is not closed", path, after)
	}
	end += start
	if sample := text[start:end]; sample != got {
		if *updateDocs {
			if err := os.WriteFile(file, []byte(text[:start]+got+text[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: rewrote the sample after %q", path, after)
			return
		}
		t.Errorf("%s: the sample after %q differs from the output (go test -run %s -update-docs rewrites it):\n--- %s\n%s--- output\n%s",
			path, after, t.Name(), path, sample, got)
	}
}

// TestDocSampleVerify: commands.md's verify output is verify --dump on
// the README's seed.
func TestDocSampleVerify(t *testing.T) {
	cleanConfigEnv(t)
	dir := filepath.Join(t.TempDir(), "demo-dump")
	if r := runCLI(t, "seed", "--users", "100", "--submissions", "5000", "--out", dir); r.code != exitOK {
		t.Fatalf("seed\n%v", r)
	}
	r := runCLI(t, "verify", "--dump", dir, "--max-diffs", "1")
	if r.code != exitFail {
		t.Fatalf("verify of the seed: want exit 1 (it leaves stale values)\n%v", r)
	}
	checkDocSample(t, "docs/commands.md", "## Output of `verify`", r.stdout)
}

// TestDocSampleProgress: commands.md's progress lines are what an
// offline rebuild's reporter prints (5 s interval) for 2,000,000
// submissions read, derived and written at steady rates on a fake clock.
func TestDocSampleProgress(t *testing.T) {
	clock := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	r := progress.New(progress.Text(&out, "rebuild"), func() time.Time { return clock }, 5*time.Second, 0)
	const subs, docBytes = 2_000_000, 640
	r.Begin("reading", progress.Bytes, subs*docBytes)
	r.Phase("reading submission")
	for range subs {
		clock = clock.Add(4 * time.Microsecond)
		r.Add(1)
		r.Advance(docBytes)
	}
	r.Begin("deriving", progress.Documents, subs)
	for range subs / 1000 {
		clock = clock.Add(5 * time.Millisecond)
		r.Advance(1000)
	}
	r.Begin("writing", progress.Bytes, subs*docBytes)
	for range subs * docBytes >> 20 {
		clock = clock.Add(3 * time.Millisecond) // under an interval: its first report only
		r.Advance(1 << 20)
	}
	r.Finish()
	checkDocSample(t, "docs/commands.md", "`rebuild`'s writing (bytes):", out.String())
}

// TestDocSampleExplain: the sample in docs/explain.md is what explain
// prints on the seed data it names (seed --shape stress).
func TestDocSampleExplain(t *testing.T) {
	cleanConfigEnv(t)
	dir := filepath.Join(t.TempDir(), "seed-dump")
	if r := runCLI(t, "seed", "--shape", "stress", "--out", dir); r.code != exitOK {
		t.Fatalf("seed\n%v", r)
	}
	const cmd = "$ bin/materializer explain --dump /tmp/seed-dump --user student0004 --problem 2\n"
	r := runCLI(t, "explain", "--dump", dir, "--user", "student0004", "--problem", "2")
	if r.code != exitOK {
		t.Fatalf("explain\n%v", r)
	}
	checkDocSample(t, "docs/explain.md", "every\nstudent has an entry in every homework):", cmd+strings.ReplaceAll(r.stdout, dir, "/tmp/seed-dump"))
}

// TestDocSampleReadmeQuickstart: the README's offline quick start runs
// as written, each command with the exit status its comment gives (0
// without one), on temporary directories for its /tmp paths.
func TestDocSampleReadmeQuickstart(t *testing.T) {
	cleanConfigEnv(t)
	tmp := t.TempDir()
	exit := regexp.MustCompile(`^exit (\d+)`)
	n := 0
	for _, line := range docBlock(t, filepath.Join("..", "..", "README.md"), "## Try it without Docker") {
		args, comment := shellWords(strings.ReplaceAll(line, "/tmp/", tmp+"/"))
		if len(args) > 0 && args[0] == "make" {
			continue // make build: this test's binary is the build
		}
		if len(args) < 2 || args[0] != "bin/materializer" {
			t.Fatalf("README quick start: %q is not a bin/materializer command", line)
		}
		want := exitOK
		if m := exit.FindStringSubmatch(comment); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		if r := runCLI(t, args[1:]...); r.code != want {
			t.Errorf("README quick start: %s: exit %d, want %d\n%v", line, r.code, want, r)
		}
		n++
	}
	if n < 5 {
		t.Errorf("README quick start: %d commands run, want the 5 (seed, verify, rebuild, verify, explain)", n)
	}
}
