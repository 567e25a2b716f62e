package main

// seed --out: the demo generator's dump, checked through verify and
// rebuild, and its determinism.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/materialize"
)

// seedArgs are small sizes that keep each run fast.
var seedArgs = []string{"--users", "7", "--problems", "5", "--homeworks", "3", "--submissions", "120"}

func seedDump(t *testing.T, dir string, seed string) cliResult {
	t.Helper()
	args := append(append([]string{"seed"}, seedArgs...), "--seed", seed, "--out", dir)
	r := runCLI(t, args...)
	if r.code != exitOK {
		t.Fatalf("%v: want exit 0\n%v", args, r)
	}
	return r
}

// TestSeedDumpVerifyRebuild: seed --out writes a dump of the sizes asked
// for; verify finds the stale values the demo data carries on purpose
// (exit 1); rebuild --out corrects them (verify exit 0), changing derived
// bytes only, and the corrected values equal an independent derivation of
// the dump's documents.
func TestSeedDumpVerifyRebuild(t *testing.T) {
	cleanConfigEnv(t)
	root := t.TempDir()
	in, out := filepath.Join(root, "seed"), filepath.Join(root, "fixed")
	r := seedDump(t, in, "42")
	if !strings.Contains(r.stdout, in) {
		t.Errorf("seed does not say where it wrote\n%v", r)
	}

	docs := readDumpDocs(t, in)
	if len(docs.Users) != 7 || len(docs.Problems) != 5 || len(docs.Homeworks) != 3 || len(docs.Submissions) != 120 {
		t.Fatalf("seed wrote %d users, %d problems, %d homeworks, %d submissions; want 7, 5, 3, 120",
			len(docs.Users), len(docs.Problems), len(docs.Homeworks), len(docs.Submissions))
	}
	for _, coll := range []string{"user", "problem", "homework", "submission"} {
		if m := regexp.MustCompile(`(\d+) ` + coll + `s`).FindStringSubmatch(r.stdout); m == nil {
			t.Errorf("seed does not report its %ss\n%v", coll, r)
		}
	}

	r = runCLI(t, "verify", "--dump", in)
	if r.code != exitFail {
		t.Fatalf("verify of the seeded dump: want exit 1 (stale demo values)\n%v", r)
	}
	rep := parseReport(t, r)
	if rep.driftedUsers+rep.driftedEntries == 0 {
		t.Errorf("verify exit 1 but reports no drift\n%v", r)
	}
	if rep.submissions != 120 || rep.users != 7 {
		t.Errorf("verify read %d submissions and %d users, want 120 and 7\n%v", rep.submissions, rep.users, r)
	}

	r = runCLI(t, "rebuild", "--dump", in, "--out", out)
	if r.code != exitOK {
		t.Fatalf("rebuild: want exit 0\n%v", r)
	}
	if got := parseReport(t, r); got != rep {
		t.Errorf("rebuild reports %+v, verify reported %+v", got, rep)
	}
	r = runCLI(t, "verify", "--dump", out)
	if r.code != exitOK {
		t.Fatalf("verify of the rebuilt dump: want exit 0\n%v", r)
	}
	if got := parseReport(t, r); got.driftedUsers+got.driftedEntries != 0 || got.users != rep.users || got.entries != rep.entries {
		t.Errorf("verify of the rebuilt dump: %+v (before: %+v)", got, rep)
	}
	checkOnlyDerivedChanged(t, in, out)

	// The corrected values are those of a derivation of the seeded documents.
	fixed := readDumpDocs(t, out)
	want := materialize.Derive(docs)
	if len(want.Malformed) > 0 {
		t.Errorf("the demo data holds malformed documents: %v", want.Malformed)
	}
	for _, u := range fixed.Users {
		name := u.Lookup("_id").StringValue()
		w, ok := want.Users[name]
		if !ok {
			w = materialize.UserStats{ACProblemIDs: []int64{}}
		}
		wd, err := bson.Marshal(w.Fields())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range userDerivedFields {
			got, ok := element(u, f)
			if !ok || !sameValue(got, bson.Raw(wd).Lookup(f)) {
				t.Errorf("user %s: %s = %v, derived %v", name, f, got, bson.Raw(wd).Lookup(f))
			}
		}
	}
	for _, h := range fixed.Homeworks {
		id := h.Lookup("_id").ObjectID()
		ss, ok := h.Lookup("studentStatus").DocumentOK()
		if !ok {
			continue
		}
		users, _ := ss.Elements()
		for _, ue := range users {
			probs, _ := ue.Value().Document().Elements()
			for _, pe := range probs {
				w, ok := want.Entries[id][ue.Key()][pe.Key()]
				if !ok {
					t.Errorf("homework %s entry %s.%s: not derived", id.Hex(), ue.Key(), pe.Key())
					continue
				}
				wd, err := bson.Marshal(w.Doc())
				if err != nil {
					t.Fatal(err)
				}
				if !sameValue(pe.Value(), bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: wd}) {
					t.Errorf("homework %s entry %s.%s: %s, derived %s", id.Hex(), ue.Key(), pe.Key(), pe.Value(), bson.Raw(wd))
				}
			}
		}
	}
}

// TestSeedDeterministic: the same seed gives byte-identical files; another
// seed gives different data.
func TestSeedDeterministic(t *testing.T) {
	cleanConfigEnv(t)
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	seedDump(t, a, "7")
	seedDump(t, b, "7")
	seedDump(t, c, "8")
	fa, fb, fc := treeOf(t, a), treeOf(t, b), treeOf(t, c)
	if len(fa) == 0 {
		t.Fatal("seed wrote no files")
	}
	if string(fa["submission.bson"]) == string(fc["submission.bson"]) {
		t.Errorf("seeds 7 and 8 gave the same submissions")
	}
	if !slices.Equal(sortedKeys(fa), sortedKeys(fb)) {
		t.Fatalf("seed 7 twice: files %v and %v", sortedKeys(fa), sortedKeys(fb))
	}
	var differ []string
	for _, name := range sortedKeys(fa) {
		if !bytes.Equal(fa[name], fb[name]) {
			differ = append(differ, name)
		}
	}
	// Homework ids (and the problem documents listing them) are the known
	// exception, checked last so every other file is still enforced.
	for _, name := range differ {
		if name != "homework.bson" && name != "problem.bson" {
			t.Errorf("seed 7 twice: %s differs", name)
		}
	}
	if len(differ) > 0 && !t.Failed() {
		knownBug(t, "demo.Generate takes homework _ids from bson.NewObjectIDFromTimestamp (process-random and counter bytes), "+
			"so the same seed gives different %v", differ)
	}
}

// TestSeedSizes: the sizes are honoured, zero included, and refused when
// negative.
func TestSeedSizes(t *testing.T) {
	cleanConfigEnv(t)
	for _, n := range []int{0, 1, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			s := strconv.Itoa(n)
			r := runCLI(t, "seed", "--users", s, "--problems", s, "--homeworks", s, "--submissions", s, "--out", dir)
			if r.code != exitOK {
				t.Fatalf("want exit 0\n%v", r)
			}
			if n == 0 && len(treeOf(t, dir)) == 0 {
				knownBug(t, "seed --out with every size 0 reports success but writes no file: %s is not a dump", dir)
			}
			docs := readDumpDocs(t, dir)
			if len(docs.Users) != n || len(docs.Problems) != n || len(docs.Homeworks) != n || len(docs.Submissions) != n {
				t.Errorf("sizes %d: got %d users, %d problems, %d homeworks, %d submissions",
					n, len(docs.Users), len(docs.Problems), len(docs.Homeworks), len(docs.Submissions))
			}
			out := filepath.Join(t.TempDir(), "out")
			if r := runCLI(t, "rebuild", "--dump", dir, "--out", out); r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			want := exitOK
			if n == 0 {
				want = exitUnchecked // nothing to compare
			}
			if r := runCLI(t, "verify", "--dump", out); r.code != want {
				t.Fatalf("verify of the rebuilt dump: want exit %d\n%v", want, r)
			}
		})
	}
	for _, f := range []string{"--users", "--problems", "--homeworks", "--submissions"} {
		dir := filepath.Join(t.TempDir(), "neg")
		r := runCLI(t, "seed", f, "-2", "--out", dir)
		if r.code != exitConfig {
			t.Errorf("seed %s -2: want exit 2\n%v", f, r)
		}
	}
}

// TestSeedShapes: the university shape puts users in courses of
// about --course-size students, a homework's studentStatus holds exactly
// its course's students, a problem belongs to homeworks of one course and
// a student submits only to their course's problems; the stress shape
// enrolls every user in every homework. Both are deterministic and repair
// to a clean dump.
func TestSeedShapes(t *testing.T) {
	cleanConfigEnv(t)
	args := []string{"--users", "300", "--problems", "40", "--homeworks", "12", "--submissions", "3000", "--course-size", "50"}
	for _, shape := range []string{"university", "stress"} {
		t.Run(shape, func(t *testing.T) {
			root := t.TempDir()
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			for _, dir := range []string{a, b} {
				if r := runCLI(t, append(append([]string{"seed", "--shape", shape, "--seed", "5"}, args...), "--out", dir)...); r.code != exitOK {
					t.Fatalf("seed\n%v", r)
				}
			}
			if !mapsEqual(treeOf(t, a), treeOf(t, b)) {
				t.Fatal("the same seed gave different files")
			}
			docs := readDumpDocs(t, a)
			users := map[string]bool{}
			for _, u := range docs.Users {
				users[u.Lookup("_id").StringValue()] = true
			}
			// studentStatus key sets by course, and the course of each problem.
			courseStudents := map[string]map[string]bool{}
			hwCourse := map[bson.ObjectID]string{}
			problemsOfUser := map[string]map[int64]bool{}
			for _, h := range docs.Homeworks {
				id := h.Lookup("_id").ObjectID()
				course := h.Lookup("courseId").StringValue()
				hwCourse[id] = course
				elems, err := h.Lookup("studentStatus").Document().Elements()
				if err != nil {
					t.Fatal(err)
				}
				set := map[string]bool{}
				for _, e := range elems {
					set[e.Key()] = true
					for _, pv := range values(t, h.Lookup("problemIds")) {
						if problemsOfUser[e.Key()] == nil {
							problemsOfUser[e.Key()] = map[int64]bool{}
						}
						problemsOfUser[e.Key()][int64(pv.Int32())] = true
					}
				}
				if prev, ok := courseStudents[course]; ok && !mapsEqualBool(prev, set) {
					t.Fatalf("two homeworks of course %s hold different students", course)
				}
				courseStudents[course] = set
			}
			if shape == "stress" {
				for c, set := range courseStudents {
					if !mapsEqualBool(set, users) {
						t.Errorf("stress: course %s's homeworks do not hold every user", c)
					}
				}
				return
			}
			seen := map[string]string{}
			for c, set := range courseStudents {
				if len(set) < 1 || len(set) > 75 {
					t.Errorf("course %s has %d students, want up to 1.5 x 50", c, len(set))
				}
				for u := range set {
					if prev, ok := seen[u]; ok {
						t.Errorf("%s is in courses %s and %s", u, prev, c)
					}
					seen[u] = c
				}
			}
			if len(courseStudents) < 4 {
				t.Errorf("%d courses for 300 users of about 50", len(courseStudents))
			}
			for _, p := range docs.Problems {
				courses := map[string]bool{}
				for _, h := range values(t, p.Lookup("homeworks")) {
					courses[hwCourse[h.ObjectID()]] = true
				}
				if len(courses) > 1 {
					t.Errorf("problem %v belongs to homeworks of %d courses", p.Lookup("_id"), len(courses))
				}
			}
			inCourse := 0
			for _, s := range docs.Submissions {
				u, p := s.Lookup("user").StringValue(), int64(s.Lookup("problem").Int32())
				if problemsOfUser[u][p] {
					inCourse++
				} else if len(problemsOfUser[u]) > 0 {
					t.Fatalf("%s submitted to problem %d outside their course's homeworks", u, p)
				}
			}
			if inCourse < len(docs.Submissions)*9/10 {
				t.Errorf("only %d of %d submissions go to a homework problem of the student's course", inCourse, len(docs.Submissions))
			}
			out := filepath.Join(root, "fixed")
			if r := runCLI(t, "verify", "--dump", a); r.code != exitFail {
				t.Fatalf("verify of the seeded dump: want exit 1\n%v", r)
			}
			if r := runCLI(t, "rebuild", "--dump", a, "--out", out); r.code != exitOK {
				t.Fatalf("rebuild\n%v", r)
			}
			if r := runCLI(t, "verify", "--dump", out); r.code != exitOK {
				t.Fatalf("verify of the rebuilt dump: want exit 0\n%v", r)
			}
		})
	}
}

func mapsEqualBool(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func values(t *testing.T, v bson.RawValue) []bson.RawValue {
	t.Helper()
	vs, err := v.Array().Values()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestSeedArchive: seed --archive writes the seed as a mongodump archive
// (gzip-compressed when its name ends in .gz) that the test's own reader
// parses into the documents seed --out writes for the same seed, byte for
// byte; verify, rebuild --dry-run and explain report on it exactly what
// they report on the directory; its corrected copy verifies clean.
func TestSeedArchive(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	dir := filepath.Join(root, "seed")
	seedDump(t, dir, "42")
	for _, name := range []string{"seed.archive", "seed.archive.gz"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(root, name)
			args := append(append([]string{"seed"}, seedArgs...), "--seed", "42", "--archive", file)
			r := runCLI(t, args...)
			if r.code != exitOK || !strings.Contains(r.stdout, file) || !strings.Contains(r.stdout, "120 submissions") {
				t.Fatalf("%v: want exit 0 saying what it wrote where\n%v", args, r)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := readArchive(t, b)
			if got.gzip != strings.HasSuffix(name, ".gz") {
				t.Errorf("gzip-compressed: %v", got.gzip)
			}
			for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
				want := concatRaw(readBSONFile(t, filepath.Join(dir, c+".bson")))
				if !bytes.Equal(got.data[archNS{"normal-oj", c}], want) {
					t.Errorf("normal-oj.%s: %d bytes of documents, the directory's file %d", c, len(got.data[archNS{"normal-oj", c}]), len(want))
				}
			}
			for _, cmd := range [][]string{{"verify", "--dump"}, {"rebuild", "--dry-run", "--dump"}} {
				rd, ra := runCLI(t, append(cmd, dir)...), runCLI(t, append(cmd, file)...)
				if rd.code != ra.code || rd.stdout != ra.stdout || rd.stdout == "" {
					t.Errorf("%v of the archive:\n%v\nof the directory:\n%v", cmd, ra, rd)
				}
			}
			fixed := filepath.Join(root, "fixed-"+name)
			if r := runCLI(t, "rebuild", "--dump", file, "--out", fixed); r.code != exitOK {
				t.Fatalf("rebuild of the archive: %v", r)
			}
			if r := runCLI(t, "verify", "--dump", fixed); r.code != exitOK {
				t.Errorf("verify of the corrected archive: want exit 0\n%v", r)
			}
		})
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"both outputs", []string{"--out", filepath.Join(root, "d2"), "--archive", filepath.Join(root, "a2.archive")}, "--archive"},
		{"existing file", []string{"--archive", filepath.Join(root, "seed.archive")}, "exists"},
		{"standard output", []string{"--archive", "-"}, "--archive -"},
		{"empty", []string{"--archive", ""}, "--archive"},
	} {
		r := runCLI(t, append([]string{"seed", "--users", "2", "--submissions", "3"}, c.args...)...)
		if r.code != exitConfig || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want exit 2 saying %q\n%v", c.name, c.want, r)
		}
	}
}

// TestSeedProgress: a long seed reports its progress on stderr with the
// total of documents it writes (known from the sizes) and the time left,
// to a directory and to an archive; --quiet keeps stderr empty.
func TestSeedProgress(t *testing.T) {
	cleanConfigEnv(t)
	root := t.TempDir()
	run := func(args ...string) cliResult {
		var stdout, stderr bytes.Buffer
		env := &environment{stdout: &stdout, stderr: &stderr, progressEvery: time.Nanosecond}
		code := runMain(context.Background(), env, args)
		return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	sizes := []string{"seed", "--users", "30", "--problems", "8", "--homeworks", "4", "--submissions", "3000"}
	total := regexp.MustCompile(`seed: \d+ of 3042 documents \(\d+%\), writing`)
	for _, out := range [][]string{{"--out", filepath.Join(root, "d")}, {"--archive", filepath.Join(root, "a.archive.gz")}} {
		r := run(append(sizes, out...)...)
		if r.code != exitOK || !total.MatchString(r.stderr) {
			t.Errorf("%v: no progress with the total on stderr\n%v", out, r)
		}
	}
	if r := run(append(sizes, "--out", filepath.Join(root, "q"), "--quiet")...); r.code != exitOK || r.stderr != "" {
		t.Errorf("--quiet: stderr not empty\n%v", r)
	}
}

// TestSeedSizesBounded: a size above its bound (a typo such as --users
// 99999999999) is a usage error naming the flag and the bound, before
// anything is generated, written or connected to; a file output allows
// more submissions (streamed) than an insert (held in memory). Seen
// failing: --users and --homeworks of 9223372036854775807 panicked in
// the generator (makeslice: len out of range); 99999999999 ran out of
// memory.
func TestSeedSizesBounded(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=1")
	over := func(n int) string { return strconv.Itoa(n + 1) }
	for _, c := range []struct {
		flag, value string
		to          string // "", --out or --archive
	}{
		{"--users", "99999999999", "--out"},
		{"--users", "9223372036854775807", "--archive"},
		{"--users", over(maxSeedUsers), ""},
		{"--problems", over(maxSeedProblems), "--out"},
		{"--homeworks", over(maxSeedHomeworks), "--archive"},
		{"--course-size", over(maxSeedCourseSize), "--out"},
		{"--submissions", over(maxSeedSubmissionsTo), "--out"},
		{"--submissions", over(maxSeedSubmissions), ""},
	} {
		t.Run(c.flag+" "+c.value+" "+c.to, func(t *testing.T) {
			args := []string{"seed", c.flag, c.value}
			dir := t.TempDir()
			switch c.to {
			case "--out":
				args = append(args, "--out", filepath.Join(dir, "d"))
			case "--archive":
				args = append(args, "--archive", filepath.Join(dir, "a.archive"))
			}
			r := runCLI(t, args...)
			if r.code != exitConfig || !strings.Contains(r.stderr, c.flag+" "+c.value+": at most ") {
				t.Fatalf("%v: want exit 2 naming %s and its bound\n%v", args, c.flag, r)
			}
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("%v: the refused seed wrote %s", args, left[0].Name())
			}
		})
	}
	// An insert's bound is below a file's: the same size goes to a file.
	if maxSeedSubmissions >= maxSeedSubmissionsTo {
		t.Fatalf("an insert allows %d submissions, a file %d", maxSeedSubmissions, maxSeedSubmissionsTo)
	}
	if err := seedSizesBounded(demo.Params{Submissions: maxSeedSubmissions + 1, CourseSize: 80}, true); err != nil {
		t.Errorf("%d submissions to a file: %v", maxSeedSubmissions+1, err)
	}
}

// TestSeedFilesLateCancel: an interrupt arriving after the last document
// was generated, before the output is closed and moved into place, still
// stops seed --out and --archive: the error is the context's (exit 130
// or 143) and no output, partial or whole, is left. Seen failing with the
// check after the generation removed: nil error, the output committed.
func TestSeedFilesLateCancel(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(ctx context.Context, path string, gen func(emit func(string, bson.Raw) error) error) error
	}{
		{"--out", seedDir},
		{"--archive", func(ctx context.Context, path string, gen func(emit func(string, bson.Raw) error) error) error {
			return seedArchive(ctx, path+".archive.gz", "normal-oj", gen)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			emitted := 0
			gen := func(emit func(string, bson.Raw) error) error {
				err := demo.GenerateTo(demo.Params{Users: 3, Problems: 2, Homeworks: 1, Submissions: 10, Seed: 1}, func(coll string, doc bson.Raw) error {
					emitted++
					return emit(coll, doc)
				})
				cancel(&interruptedError{os.Interrupt}) // after the last document
				return err
			}
			dir := t.TempDir()
			err := c.write(ctx, filepath.Join(dir, "seeded"), gen)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("after %d documents and a late interrupt: error %v, want the context's", emitted, err)
			}
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("a late interrupt left %s", left[0].Name())
			}
		})
	}
}
