package main

// The offline mode: it never reports a false success, and
// progress reports on long work.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// bigHomeworkDump writes a dump with one homework of about size bytes
// (padded by its markdown) whose entry for alice on problem 1 is stale:
// repairing it adds 20 submission ids (about 700 bytes).
func bigHomeworkDump(t *testing.T, dir string, size int) bson.ObjectID {
	t.Helper()
	hw := bson.ObjectID{0xab, 0xcd, 1}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	mk := func(pad int) bson.Raw {
		return materializetest.Raw("_id", hw, "markdown", strings.Repeat("x", pad), "duration", materializetest.D("end", bson.NewDateTimeFromTime(end)),
			"penalty", "score = 0", "studentStatus", materializetest.D("alice", materializetest.D("1",
				materializetest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))
	}
	hwDoc := mk(max(size-len(mk(0)), 0))
	var subs []bson.Raw
	for i := range 20 {
		subs = append(subs, materializetest.Raw("_id", bson.ObjectID{0x10, byte(i)}, "user", "alice", "problem", int32(1),
			"languageType", int32(0), "timestamp", bson.NewDateTimeFromTime(end.Add(-time.Duration(i+1)*time.Hour)),
			"status", int32(0), "score", int32(100)))
	}
	writeDump(t, dir, materialize.Docs{
		Users:       []bson.Raw{materializetest.Raw("_id", "alice", "submission", int32(20), "AC_submission", int32(20), "AC_problem_ids", bson.A{int32(1)})},
		Problems:    []bson.Raw{materializetest.Raw("_id", int32(1), "homeworks", bson.A{hw})},
		Homeworks:   []bson.Raw{hwDoc},
		Submissions: subs,
	}, nil)
	return hw
}

// TestOfflineHomeworkOver16MiB: a corrected homework over MongoDB's
// 16 MiB limit fails verify and rebuild (exit 1) naming the homework and
// its size; rebuild leaves no output. Just under the limit, both pass.
func TestOfflineHomeworkOver16MiB(t *testing.T) {
	cleanConfigEnv(t)
	sizeRE := regexp.MustCompile(`homework ([0-9a-f]{24}) would be (\d+) bytes`)
	for _, c := range []struct {
		name string
		size int // stored size of the homework
		over bool
	}{
		{"just under after repair", materialize.MaxDocumentSize - 4096, false},
		{"over after repair", materialize.MaxDocumentSize - 100, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
			hw := bigHomeworkDump(t, in, c.size)
			stored := readBSONFile(t, filepath.Join(in, "homework.bson"))[0]
			rv := runCLI(t, "verify", "--dump", in)
			rr := runCLI(t, "rebuild", "--dump", in, "--out", out)
			if !c.over {
				if rv.code != exitFail || rr.code != exitOK {
					t.Fatalf("verify: want exit 1 (drift)\n%v\nrebuild: want exit 0\n%v", rv, rr)
				}
				if got := readBSONFile(t, filepath.Join(out, "homework.bson"))[0]; len(got) <= len(stored) || len(got) > materialize.MaxDocumentSize {
					t.Errorf("corrected homework is %d bytes (stored %d)", len(got), len(stored))
				}
				return
			}
			for _, r := range []cliResult{rv, rr} {
				if r.code != exitFail {
					t.Fatalf("want exit 1\n%v", r)
				}
				m := sizeRE.FindStringSubmatch(r.stderr)
				if m == nil || m[1] != hw.Hex() {
					t.Fatalf("the message does not name homework %s and its size\n%v", hw.Hex(), r)
				}
				n, _ := strconv.Atoi(m[2])
				if n <= materialize.MaxDocumentSize || n <= len(stored) || n > len(stored)+2000 {
					t.Errorf("reported size %d: stored %d, limit %d", n, len(stored), materialize.MaxDocumentSize)
				}
			}
			if entries, _ := os.ReadDir(root); len(entries) != 1 {
				t.Errorf("a failed rebuild left %v beside its input", entries)
			}
			// Nothing was written: no report on stdout (a cron mail of
			// stdout would read "N corrected" as done).
			if rr.stdout != "" {
				t.Errorf("a rebuild that wrote nothing printed on stdout:\n%v", rr)
			}
		})
	}
}

// TestOnlineHomeworkOver16MiB: online, the server (here memstore, which
// refuses like the server, code 17419) rejects the update; the rebuild
// counts it, names the homework and its size, and the command fails.
func TestOnlineHomeworkOver16MiB(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "in")
	hw := bigHomeworkDump(t, dir, materialize.MaxDocumentSize-100)
	st := loadMemstore(t, dir)
	rep, err := watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rejected != 1 || len(rep.RejectedErrors) != 1 || !strings.Contains(rep.RejectedErrors[0], hw.Hex()) {
		t.Fatalf("rejected %d: %q", rep.Rejected, rep.RejectedErrors)
	}
	err = rejectedWrites(rep)
	if err == nil || !strings.Contains(err.Error(), hw.Hex()) || !regexp.MustCompile(`would be \d+ bytes`).MatchString(err.Error()) {
		t.Fatalf("rebuild outcome: %v", err)
	}
	if rejectedWrites(&drift.Report{}) != nil {
		t.Error("a rebuild with no refused write fails")
	}
}

// TestOfflineMissingCollection: a dump without one of the four
// collections is a usage error (exit 2) naming it, never "0 compared".
func TestOfflineMissingCollection(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	for _, coll := range dump.Sources {
		t.Run(coll, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			writeDump(t, dir, v.DB, nil)
			if err := os.Remove(filepath.Join(dir, coll+".bson")); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"verify", "--dump", dir}, {"rebuild", "--dump", dir, "--dry-run"}} {
				r := runCLI(t, args...)
				if r.code != exitConfig || !strings.Contains(r.stderr, coll+".bson") || r.stdout != "" {
					t.Errorf("%v: want exit 2 naming %s.bson, no report\n%v", args, coll, r)
				}
			}
		})
	}
}

// TestOfflineEmptyDump: --dump "" (an unset shell variable) is a usage
// error, never an online command against MATERIALIZER_MONGODB_URI.
func TestOfflineEmptyDump(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?replicaSet=rs0&serverSelectionTimeoutMS=100")
	for _, args := range [][]string{
		{"verify", "--dump", ""}, {"verify", "--dump="},
		{"rebuild", "--dump", "", "--dry-run"}, {"rebuild", "--dump", "", "--out", filepath.Join(t.TempDir(), "o")},
		{"explain", "--dump", "", "--user", "u", "--problem", "1"}, {"explain", "--dump=", "--user", "u", "--problem", "1"},
	} {
		r := runCLI(t, args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, "--dump is empty") {
			t.Errorf("%q: want exit 2 saying --dump is empty\n%v", args, r)
		}
	}
}

// TestEmptyOut: --out "" (an unset shell variable) is a usage error, never
// a command that writes to MATERIALIZER_MONGODB_URI instead of files.
func TestEmptyOut(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?replicaSet=rs0&serverSelectionTimeoutMS=100")
	for _, args := range [][]string{
		{"seed", "--out", ""}, {"seed", "--out="}, {"rebuild", "--out", ""}, {"rebuild", "--out="},
	} {
		r := runCLI(t, args...)
		if r.code != exitConfig || !strings.Contains(r.stderr, "--out is empty") || strings.Contains(r.stderr, "connecting") {
			t.Errorf("%q: want exit 2 saying --out is empty, before connecting\n%v", args, r)
		}
	}
}

// TestBadFlagErrorOnce: an unknown flag prints the usage and its error
// once, last.
func TestBadFlagErrorOnce(t *testing.T) {
	cleanConfigEnv(t)
	r := runCLI(t, "verify", "--out", "x")
	const msg = "flag provided but not defined: -out"
	if r.code != exitConfig || strings.Count(r.stderr, msg) != 1 || !strings.Contains(r.stderr, "Usage: materializer verify") ||
		!strings.HasSuffix(strings.TrimSpace(r.stderr), "materializer verify: "+msg) {
		t.Fatalf("want the usage, then the error once\n%v", r)
	}
}

// TestOfflineOutChecked: an --out inside the input or that is a file is
// refused before any work: even on a corrupt dump (which would fail with
// exit 1 once read) the answer is the usage error, and nothing is written.
func TestOfflineOutChecked(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	root := t.TempDir()
	in := filepath.Join(root, "in")
	writeDump(t, filepath.Join(in, "normal-oj"), v.DB, nil)
	p := filepath.Join(in, "normal-oj", "submission.bson")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)-3], 0o644); err != nil { // corrupt: truncated
		t.Fatal(err)
	}
	file := filepath.Join(root, "a-file")
	if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, in)
	for _, c := range []struct{ out, want string }{
		{filepath.Join(in, "fixed"), "inside the input"},
		{filepath.Join(in, "normal-oj", "fixed"), "inside the input"},
		{in, "inside the input"},
		{file, "is a file"},
	} {
		r := runCLI(t, "rebuild", "--dump", in, "--out", c.out)
		if r.code != exitConfig || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, c.out) {
			t.Errorf("--out %s: want exit 2 saying %q\n%v", c.out, c.want, r)
		}
	}
	if !mapsEqual(before, treeOf(t, in)) {
		t.Error("a refused --out changed the input")
	}
	if got, _ := os.ReadFile(file); string(got) != "keep" {
		t.Error("a refused --out file was changed")
	}
}

// TestOfflineFailedRunLeavesNoOutput: the copy is written beside --out
// and renamed into place at the end, so a run failing after its partial
// output was created (here a submission file cut short, read after it)
// leaves neither --out nor anything else, and the retry succeeds. A
// dangling symbolic link in the dump, which the copy could not read, is
// refused before anything is created.
func TestOfflineFailedRunLeavesNoOutput(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	root := t.TempDir()
	in, parent := filepath.Join(root, "in"), filepath.Join(root, "outs")
	out := filepath.Join(parent, "fixed")
	writeDump(t, in, v.DB, nil)
	link := filepath.Join(in, "zz-broken.json")
	if err := os.Symlink(filepath.Join(root, "nowhere"), link); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "rebuild", "--dump", in, "--out", out); r.code != exitConfig || !strings.Contains(r.stderr, "zz-broken.json") {
		t.Fatalf("a dangling link in the dump: want exit 2 naming it\n%v", r)
	}
	if _, err := os.Stat(parent); err == nil {
		t.Fatalf("the refused run created %s", parent)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(in, "submission.bson")
	whole, err := os.ReadFile(sub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, append(slices.Clone(whole), 0x40, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "rebuild", "--dump", in, "--out", out)
	if r.code != exitFail {
		t.Fatalf("want exit 1\n%v", r)
	}
	if entries, err := os.ReadDir(parent); err != nil || len(entries) != 0 {
		t.Fatalf("the failed run left %v in %s (%v)", entries, parent, err)
	}
	if err := os.WriteFile(sub, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "rebuild", "--dump", in, "--out", out); r.code != exitOK {
		t.Fatalf("retry: want exit 0\n%v", r)
	}
	if r := runCLI(t, "verify", "--dump", out); r.code != exitOK {
		t.Fatalf("verify of the retried output: want exit 0\n%v", r)
	}
}

// TestOfflineProgress: verify and rebuild report progress on stderr
// (documents read, rate; lines only after the first interval) and
// --quiet silences it; stdout carries the same report either way.
func TestOfflineProgress(t *testing.T) {
	cleanConfigEnv(t)
	root := t.TempDir()
	in := filepath.Join(root, "seed")
	if r := runCLI(t, "seed", "--users", "30", "--problems", "8", "--homeworks", "4", "--submissions", "5000", "--out", in); r.code != exitOK {
		t.Fatalf("seed\n%v", r)
	}
	run := func(args ...string) cliResult {
		var stdout, stderr bytes.Buffer
		env := &environment{stdout: &stdout, stderr: &stderr, progressEvery: time.Nanosecond}
		code := runMain(context.Background(), env, args)
		return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	// Every phase is reported (writing too), the reading
	// phase's total (the files' sizes) is known while the submissions are
	// read, and each document is counted once.
	line := regexp.MustCompile(`(?m)^(verify|rebuild): (reading \w+|deriving|writing): .*/s`)
	reading := regexp.MustCompile(`(?m)^\w+: reading submission: [\d.]+ \S+ of ([\d.]+ \S+) \((\d+)%\)`)
	final := regexp.MustCompile(`(?m)^\w+: (\d+) documents in `)
	const documents = 30 + 8 + 4 + 5000
	for _, what := range []string{"verify", "rebuild"} {
		args := []string{what, "--dump", in}
		if what == "rebuild" {
			args = append(args, "--out", filepath.Join(root, "out"))
		}
		loud := run(args...)
		quiet := run(append(args, "--quiet")...)
		if what == "rebuild" {
			quiet = run(what, "--dump", in, "--out", filepath.Join(root, "out2"), "--quiet")
		}
		if len(line.FindAllString(loud.stderr, -1)) < 2 {
			t.Errorf("%s: no progress lines on stderr\n%v", what, loud)
		}
		if m := reading.FindStringSubmatch(loud.stderr); m == nil || m[2] == "100" {
			t.Errorf("%s: no report with the total while the submissions are read\n%v", what, loud)
		}
		phases := []string{": deriving: "}
		if what == "rebuild" {
			phases = append(phases, ": writing: ")
		}
		for _, p := range phases {
			if !strings.Contains(loud.stderr, p) {
				t.Errorf("%s: the phase %q is not reported\n%v", what, p, loud)
			}
		}
		if m := final.FindStringSubmatch(loud.stderr); m == nil || m[1] != strconv.Itoa(documents) {
			t.Errorf("%s: final count %v, want %d (each document once)\n%v", what, m, documents, loud)
		}
		if quiet.stderr != "" {
			t.Errorf("%s --quiet: stderr not empty\n%v", what, quiet)
		}
		if strings.ReplaceAll(loud.stdout, "out\n", "") != strings.ReplaceAll(quiet.stdout, "out2\n", "") || loud.code != quiet.code {
			t.Errorf("%s: progress changed the report\n%v\n%v", what, loud, quiet)
		}
	}
}

// loadMemstore loads the four collections of a dump into memstore (the
// online path's stand-in for MongoDB).
func loadMemstore(t *testing.T, dir string) *memstore.Store {
	t.Helper()
	d, err := dump.Resolve(dir, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	for _, coll := range dump.Sources {
		docs, err := d.Read(coll)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Load(coll, docs...); err != nil {
			t.Fatal(err)
		}
	}
	return st
}
