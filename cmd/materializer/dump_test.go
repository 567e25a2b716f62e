package main

// Offline round trips over mongodump directories built from the derive
// vectors (materialize/testdata/derive.jsonl): verify --dump on clean and
// stale dumps, rebuild --dump --out and the bytes it may change, dry runs,
// layouts and broken dumps. Expected counts come from the vectors' expect
// sections through a comparison written here, independent of the code's
// decoders; expected bytes come from the input dump itself.

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/bsontest"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
)

const vectorsPath = "../../materialize/testdata/derive.jsonl"

var (
	vectorsOnce sync.Once
	vectorsAll  []materializetest.Vector
	vectorsErr  error
)

// readVectors returns every derive vector (read once per test binary).
func readVectors(t testing.TB) []materializetest.Vector {
	t.Helper()
	vectorsOnce.Do(func() { vectorsAll, vectorsErr = materializetest.ReadVectors(vectorsPath) })
	if vectorsErr != nil {
		t.Fatal(vectorsErr)
	}
	if len(vectorsAll) == 0 {
		t.Fatalf("%s: no vectors", vectorsPath)
	}
	return vectorsAll
}

// dumpColls returns the source collections of d, plus extra collections,
// as dump.Write takes them.
func dumpColls(d materialize.Docs, extra map[string][]bson.Raw) map[string][]bson.Raw {
	m := map[string][]bson.Raw{
		materialize.CollUser:       d.Users,
		materialize.CollProblem:    d.Problems,
		materialize.CollHomework:   d.Homeworks,
		materialize.CollSubmission: d.Submissions,
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func writeDump(t testing.TB, dir string, d materialize.Docs, extra map[string][]bson.Raw) {
	t.Helper()
	if err := dump.Write(dir, dumpColls(d, extra)); err != nil {
		t.Fatal(err)
	}
}

// applyExpected returns the vector's documents with its expected derived
// values written in, and checks (independently) that they now match the
// expect section everywhere.
func applyExpected(t testing.TB, v materializetest.Vector) materialize.Docs {
	t.Helper()
	want, err := v.Expected()
	if err != nil {
		t.Fatal(err)
	}
	clean := materializetest.Apply(t, v.DB, want)
	if u, e := independentDrift(t, clean, v); u+e != 0 {
		t.Fatalf("%s: applying the expected values left %d users and %d entries differing from expect", v.Name, u, e)
	}
	return clean
}

// otherCollections are non-source collections a real dump also holds; the
// materializer must copy them untouched.
func otherCollections() map[string][]bson.Raw {
	return map[string][]bson.Raw{
		"course": {
			materializetest.Raw("_id", bson.ObjectID{1, 2, 3}, "courseName", "Public", "studentNicknames", bson.D{{Key: "alice", Value: "A"}}),
			materializetest.Raw("_id", bson.ObjectID{4, 5, 6}, "courseName", "Advanced", "score", 1.5),
		},
		"announcement": {},
	}
}

// ---- an independent reading of the vectors' expectations ----

// number reads a BSON number holding a whole value.
func number(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeInt64:
		return v.Int64(), true
	case bson.TypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return int64(f), true
		}
	}
	return 0, false
}

// sameValue compares two BSON values the way the spec compares derived
// values: numbers by value whatever their type, arrays element-wise,
// documents by key set and values (key order aside), anything else by type
// and bytes.
func sameValue(a, b bson.RawValue) bool {
	if an, ok := number(a); ok {
		bn, ok := number(b)
		return ok && an == bn
	}
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case bson.TypeArray:
		av, err1 := a.Array().Values()
		bv, err2 := b.Array().Values()
		if err1 != nil || err2 != nil || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !sameValue(av[i], bv[i]) {
				return false
			}
		}
		return true
	case bson.TypeEmbeddedDocument:
		ae, err1 := a.Document().Elements()
		be, err2 := b.Document().Elements()
		if err1 != nil || err2 != nil || len(ae) != len(be) {
			return false
		}
		for _, x := range ae {
			y, ok := element(b.Document(), x.Key())
			if !ok || !sameValue(x.Value(), y) {
				return false
			}
		}
		return true
	default:
		return bytes.Equal(a.Value, b.Value)
	}
}

// element returns the value of key in doc, matching the key exactly (a
// username may contain '.').
func element(doc bson.Raw, key string) (bson.RawValue, bool) {
	els, err := doc.Elements()
	if err != nil {
		return bson.RawValue{}, false
	}
	for _, e := range els {
		if e.Key() == key {
			return e.Value(), true
		}
	}
	return bson.RawValue{}, false
}

var userDerivedFields = []string{"submission", "AC_submission", "AC_problem_ids"}

// expectCounts are the counts a verify of docs must print, computed from
// the vector's expect section.
type expectCounts struct {
	users, driftedUsers, entries, driftedEntries int
}

// independentCounts compares docs with the vector's expect section: a user
// (with a document) drifts unless it holds all three derived fields with
// the expected values; an entry drifts unless it equals the expected one.
func independentCounts(t testing.TB, docs materialize.Docs, v materializetest.Vector) expectCounts {
	t.Helper()
	var c expectCounts
	users := map[string]bson.Raw{}
	for _, u := range docs.Users {
		if id, ok := u.Lookup("_id").StringValueOK(); ok {
			users[id] = u
		}
	}
	for _, eu := range v.ExpectUsers {
		id := eu.Lookup("_id").StringValue()
		doc, ok := users[id]
		if !ok {
			continue // no user document: never written, not compared
		}
		c.users++
		for _, f := range userDerivedFields {
			got, ok := element(doc, f)
			if !ok || !sameValue(got, eu.Lookup(f)) {
				c.driftedUsers++
				break
			}
		}
	}
	hws := map[bson.ObjectID]bson.Raw{}
	for _, h := range docs.Homeworks {
		hws[h.Lookup("_id").ObjectID()] = h
	}
	for _, eh := range v.ExpectHWs {
		id := eh.Lookup("_id").ObjectID()
		doc, ok := hws[id]
		if !ok {
			t.Fatalf("%s: expected homework %s not in the documents", v.Name, id.Hex())
		}
		var sss bson.Raw
		if x, ok := element(doc, "studentStatus"); ok {
			sss, _ = x.DocumentOK()
		}
		for _, ep := range bsontest.Entries(t, eh) {
			c.entries++
			var got bson.RawValue
			found := false
			if sss != nil {
				if x, ok := element(sss, ep.User); ok {
					if sprobs, ok := x.DocumentOK(); ok {
						got, found = element(sprobs, ep.Problem)
					}
				}
			}
			if !found || !sameValue(got, ep.Value) {
				c.driftedEntries++
			}
		}
	}
	return c
}

func independentDrift(t testing.TB, docs materialize.Docs, v materializetest.Vector) (users, entries int) {
	c := independentCounts(t, docs, v)
	return c.driftedUsers, c.driftedEntries
}

// ---- reading reports ----

type cliReport struct {
	submissions                                  int
	users, driftedUsers, entries, driftedEntries int
	penaltyErrors, malformed                     int
}

var (
	reSubmissions = regexp.MustCompile(`(?m)^submissions read: (\d+)$`)
	reUsers       = regexp.MustCompile(`(?m)^users: (\d+) compared, (\d+) [a-z ]+$`)
	reEntries     = regexp.MustCompile(`(?m)^entries: (\d+) compared, (\d+) [a-z ]+$`)
	rePenalty     = regexp.MustCompile(`(?m)^penalty errors: (\d+)$`)
	reMalformed   = regexp.MustCompile(`(?m)^malformed documents skipped: (\d+)$`)
)

// parseReport reads the counts a verify or rebuild printed.
func parseReport(t testing.TB, r cliResult) cliReport {
	t.Helper()
	num := func(re *regexp.Regexp, i int) int {
		m := re.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("no line matching %s in the report\n%v", re, r)
		}
		n, err := strconv.Atoi(m[i])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return cliReport{
		submissions:    num(reSubmissions, 1),
		users:          num(reUsers, 1),
		driftedUsers:   num(reUsers, 2),
		entries:        num(reEntries, 1),
		driftedEntries: num(reEntries, 2),
		penaltyErrors:  num(rePenalty, 1),
		malformed:      num(reMalformed, 1),
	}
}

// checkReport compares a printed report with the counts computed from the
// vector.
func checkReport(t testing.TB, what string, r cliResult, v materializetest.Vector, want expectCounts) {
	t.Helper()
	got := parseReport(t, r)
	wantRep := cliReport{
		submissions: len(v.DB.Submissions), // the vectors hold no malformed submission
		users:       want.users, driftedUsers: want.driftedUsers,
		entries: want.entries, driftedEntries: want.driftedEntries,
		penaltyErrors: v.PenaltyErrors,
	}
	if got != wantRep {
		t.Errorf("%s: report %+v, want %+v\n%v", what, got, wantRep, r)
	}
}

// ---- raw BSON, read and rebuilt here ----

// readBSONFile splits a (possibly gzipped) .bson file into documents,
// checking only the length framing.
func readBSONFile(t testing.TB, path string) []bson.Raw {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	var out []bson.Raw
	for len(data) > 0 {
		if len(data) < 5 {
			t.Fatalf("%s: %d trailing bytes", path, len(data))
		}
		n := int(binary.LittleEndian.Uint32(data))
		if n < 5 || n > len(data) {
			t.Fatalf("%s: bad document length %d", path, n)
		}
		out = append(out, bson.Raw(data[:n]))
		data = data[n:]
	}
	return out
}

func keysOf(t testing.TB, doc bson.Raw) []string {
	t.Helper()
	els, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range els {
		ks = append(ks, e.Key())
	}
	return ks
}

// filesOf lists the regular files of dir by name.
func filesOf(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// treeOf lists every file under dir (relative path → bytes).
func treeOf(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkOnlyDerivedChanged compares a dump directory (stale) with its
// corrected copy (out): the same files; every file but user and homework
// BSON byte-identical; the same documents in the same order, equal byte for
// byte once the derived values are removed; user documents with the same
// keys in the same order.
func checkOnlyDerivedChanged(t testing.TB, stale, out string) {
	t.Helper()
	sf, of := filesOf(t, stale), filesOf(t, out)
	if !slices.Equal(sortedKeys(sf), sortedKeys(of)) {
		t.Fatalf("files differ: %v in the dump, %v in the copy", sortedKeys(sf), sortedKeys(of))
	}
	for name, sb := range sf {
		base := strings.TrimSuffix(name, ".gz")
		switch base {
		case "user.bson", "homework.bson":
			sdocs, odocs := readBSONFile(t, filepath.Join(stale, name)), readBSONFile(t, filepath.Join(out, name))
			if len(sdocs) != len(odocs) {
				t.Errorf("%s: %d documents, the copy has %d", name, len(sdocs), len(odocs))
				continue
			}
			for i := range sdocs {
				var s, o bson.Raw
				if base == "user.bson" {
					s, o = bsontest.Without(t, sdocs[i], userDerivedFields...), bsontest.Without(t, odocs[i], userDerivedFields...)
					if sk, ok := keysOf(t, sdocs[i]), keysOf(t, odocs[i]); !slices.Equal(sk, ok) {
						t.Errorf("%s document %d: keys %v became %v", name, i, sk, ok)
					}
				} else {
					s, o = bsontest.NullEntries(t, sdocs[i]), bsontest.NullEntries(t, odocs[i])
				}
				if !bytes.Equal(s, o) {
					t.Errorf("%s document %d: non-derived bytes changed\n stale: %s\n   out: %s", name, i, s, o)
				}
			}
		default:
			if !bytes.Equal(sb, of[name]) {
				t.Errorf("%s: not copied byte for byte", name)
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// readDumpDocs reads the four source collections of a flat dump directory
// with the reader above.
func readDumpDocs(t testing.TB, dir string) materialize.Docs {
	t.Helper()
	get := func(coll string) []bson.Raw {
		for _, name := range []string{coll + ".bson", coll + ".bson.gz"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				return readBSONFile(t, filepath.Join(dir, name))
			}
		}
		return nil
	}
	return materialize.Docs{
		Users: get(materialize.CollUser), Problems: get(materialize.CollProblem),
		Homeworks: get(materialize.CollHomework), Submissions: get(materialize.CollSubmission),
	}
}

// hasDottedUser reports whether a vector names a user with a '.'.
func hasDottedUser(v materializetest.Vector) bool {
	for _, u := range v.ExpectUsers {
		if strings.Contains(u.Lookup("_id").StringValue(), ".") {
			return true
		}
	}
	for _, h := range v.ExpectHWs {
		if ss, ok := h.Lookup("studentStatus").DocumentOK(); ok {
			els, _ := ss.Elements()
			for _, e := range els {
				if strings.Contains(e.Key(), ".") {
					return true
				}
			}
		}
	}
	return false
}

// ---- the tests ----

// TestDumpVectorRoundTrip runs, for every derive vector:
// (a) verify --dump on the clean dump (expected values applied): exit 0,
// nothing drifted; (b) verify --dump on the stale dump (the vector's db as
// is): exit 1 when anything drifted, with the drifted-user and
// drifted-entry counts of an independent comparison with expect; (c)
// rebuild --dump --out, then verify --dump of the output: exit 0, the
// derived values equal expect, and every non-derived byte unchanged; (d)
// rebuild --dump --dry-run: writes nothing, reports verify's counts.
func TestDumpVectorRoundTrip(t *testing.T) {
	cleanConfigEnv(t)
	vs := readVectors(t)
	dotted := 0
	for _, v := range vs {
		if hasDottedUser(v) {
			dotted++
		}
		t.Run(v.Name, func(t *testing.T) {
			// Parallel subtests still run while the parent's environment
			// (set above) is in force, and no other top-level test runs.
			t.Parallel()
			root := t.TempDir()
			cleanDir, staleDir, outDir := filepath.Join(root, "clean"), filepath.Join(root, "stale"), filepath.Join(root, "out")
			extra := otherCollections()

			// (a) clean
			clean := applyExpected(t, v)
			writeDump(t, cleanDir, clean, nil)
			want := independentCounts(t, clean, v)
			r := runCLI(t, "verify", "--dump", cleanDir)
			if r.code != exitOK {
				t.Fatalf("verify of the clean dump: want exit 0\n%v", r)
			}
			checkReport(t, "verify of the clean dump", r, v, want)

			// (b) stale
			writeDump(t, staleDir, v.DB, extra)
			want = independentCounts(t, v.DB, v)
			if d := materializetest.DiffStored(v, v.DB); len(d) != want.driftedUsers+want.driftedEntries {
				t.Fatalf("cross-check: materializetest.DiffStored finds %d differences, the comparison here %d+%d:\n%s",
					len(d), want.driftedUsers, want.driftedEntries, strings.Join(d, "\n"))
			}
			before := treeOf(t, staleDir)
			r = runCLI(t, "verify", "--dump", staleDir)
			wantCode := exitFail
			if want.driftedUsers+want.driftedEntries == 0 {
				wantCode = exitOK
			}
			if r.code != wantCode {
				t.Fatalf("verify of the stale dump (%d users, %d entries drifted): want exit %d\n%v", want.driftedUsers, want.driftedEntries, wantCode, r)
			}
			checkReport(t, "verify of the stale dump", r, v, want)
			verifyReport := parseReport(t, r)

			// (d) dry run: same counts, nothing written
			r = runCLI(t, "rebuild", "--dump", staleDir, "--dry-run")
			if r.code != exitOK {
				t.Fatalf("rebuild --dry-run: want exit 0\n%v", r)
			}
			if got := parseReport(t, r); got != verifyReport {
				t.Errorf("rebuild --dry-run reports %+v, verify %+v", got, verifyReport)
			}
			if after := treeOf(t, staleDir); !mapsEqual(before, after) {
				t.Errorf("verify or rebuild --dry-run changed the dump directory")
			}

			// (c) rebuild to out, verify out
			r = runCLI(t, "rebuild", "--dump", staleDir, "--out", outDir)
			if r.code != exitOK {
				t.Fatalf("rebuild --dump --out: want exit 0\n%v", r)
			}
			checkReport(t, "rebuild --dump --out", r, v, want)
			if after := treeOf(t, staleDir); !mapsEqual(before, after) {
				t.Errorf("rebuild --out changed its input dump")
			}
			r = runCLI(t, "verify", "--dump", outDir)
			if r.code != exitOK {
				t.Fatalf("verify of the rebuilt dump: want exit 0\n%v", r)
			}
			outDocs := readDumpDocs(t, outDir)
			if u, e := independentDrift(t, outDocs, v); u+e != 0 {
				t.Errorf("the rebuilt dump differs from expect in %d users and %d entries", u, e)
			}
			if d := materializetest.DiffStored(v, outDocs); len(d) > 0 {
				t.Errorf("the rebuilt dump differs from expect:\n%s", strings.Join(d, "\n"))
			}
			if d := reference.Check(refDB(outDocs)); len(d) > 0 {
				t.Errorf("the rebuilt dump differs from the reference derivation:\n%s", strings.Join(d, "\n"))
			}
			checkOnlyDerivedChanged(t, staleDir, outDir)
		})
	}
	if dotted == 0 {
		t.Errorf("no vector has a username containing '.'")
	}
}

func mapsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// driftiestVector returns a vector whose stale dump drifts in both users
// and entries, including a dotted username when one does.
func driftiestVector(t *testing.T) (materializetest.Vector, expectCounts) {
	t.Helper()
	var best materializetest.Vector
	var bestC expectCounts
	score := -1
	for _, v := range readVectors(t) {
		c := independentCounts(t, v.DB, v)
		if c.driftedUsers == 0 || c.driftedEntries == 0 {
			continue
		}
		s := c.driftedUsers + c.driftedEntries
		if hasDottedUser(v) {
			s += 1000
		}
		if s > score {
			best, bestC, score = v, c, s
		}
	}
	if score < 0 {
		t.Fatal("no vector drifts in both users and entries")
	}
	return best, bestC
}

// gzipDir rewrites every file of dir as name.gz, as mongodump --gzip does.
func gzipDir(t *testing.T, dir string) {
	t.Helper()
	for name, b := range filesOf(t, dir) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".gz"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDumpLayouts: --dump takes DIR/<database>/ (mongodump --out DIR) or
// the database directory itself, plain or gzipped; MATERIALIZER_DATABASE
// picks the database directory.
func TestDumpLayouts(t *testing.T) {
	cleanConfigEnv(t)
	v, want := driftiestVector(t)
	cases := []struct {
		name     string
		database string // MATERIALIZER_DATABASE ("" = default)
		sub      string // where the .bson files go under the --dump directory
		others   []string
		gz       bool
	}{
		{name: "flat", sub: "."},
		{name: "nested default database", sub: "normal-oj"},
		{name: "nested beside other databases", sub: "normal-oj", others: []string{"admin", "config", "normal-oj-old"}},
		{name: "nested named database", database: "school", sub: "school", others: []string{"normal-oj-archive"}},
		{name: "flat gzip", sub: ".", gz: true},
		{name: "nested gzip", sub: "normal-oj", gz: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.database != "" {
				t.Setenv("MATERIALIZER_DATABASE", c.database)
			}
			root := t.TempDir()
			in := filepath.Join(root, "in")
			dbDir := filepath.Join(in, c.sub)
			writeDump(t, dbDir, v.DB, otherCollections())
			for _, o := range c.others {
				// A different database with clean-looking data: must not be read.
				writeDump(t, filepath.Join(in, o), applyExpected(t, v), nil)
			}
			if c.gz {
				gzipDir(t, dbDir)
			}
			r := runCLI(t, "verify", "--dump", in)
			if r.code != exitFail {
				t.Fatalf("verify: want exit 1\n%v", r)
			}
			checkReport(t, "verify", r, v, want)

			out := filepath.Join(root, "out")
			r = runCLI(t, "rebuild", "--dump", in, "--out", out)
			if r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			r = runCLI(t, "verify", "--dump", out)
			if r.code != exitOK {
				t.Fatalf("verify of the output: want exit 0\n%v", r)
			}
			// The corrected files are where the input layout puts them.
			outDB := filepath.Join(out, c.sub)
			hwFile := "homework.bson"
			if c.gz {
				hwFile += ".gz"
			}
			_, layoutErr := os.Stat(filepath.Join(outDB, hwFile))
			if layoutErr != nil {
				if c.sub == "." {
					t.Fatalf("the output has no %s: %v; files: %v", hwFile, layoutErr, sortedKeys(treeOf(t, out)))
				}
				outDB = out // check the bytes wherever they went, then report the layout
			}
			checkOnlyDerivedChanged(t, dbDir, outDB)
			if c.gz {
				for name := range filesOf(t, outDB) {
					if !strings.HasSuffix(name, ".gz") {
						t.Errorf("gzipped input, but the output holds %s", name)
					}
				}
			}
			if layoutErr != nil && !t.Failed() {
				knownBug(t, "rebuild --dump DIR --out OUT with DIR/%s/ writes OUT flat, not in the input's layout (OUT/%s/): files %v",
					c.sub, c.sub, sortedKeys(treeOf(t, out)))
			}
		})
	}
}

// TestDumpErrors: a dump that cannot be used fails with a clear message:
// a missing, empty or non-directory --dump is a usage error (exit 2); a
// truncated or corrupt BSON file fails (exit 1) naming the file; an --out
// that is not empty is refused and left as it was.
func TestDumpErrors(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	root := t.TempDir()
	good := filepath.Join(root, "good")
	writeDump(t, good, v.DB, nil)

	t.Run("missing directory", func(t *testing.T) {
		missing := filepath.Join(root, "no-such-dump")
		for _, args := range [][]string{{"verify", "--dump", missing}, {"rebuild", "--dump", missing, "--out", filepath.Join(root, "o1")}, {"rebuild", "--dump", missing, "--dry-run"}} {
			r := runCLI(t, args...)
			if r.code != exitConfig {
				t.Errorf("%v: want exit 2\n%v", args, r)
			}
			if !strings.Contains(r.stderr, missing) {
				t.Errorf("%v: the message does not name %s\n%v", args, missing, r)
			}
		}
		if _, err := os.Stat(filepath.Join(root, "o1")); err == nil {
			t.Errorf("rebuild of a missing dump created its --out directory")
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		empty := filepath.Join(root, "empty")
		if err := os.Mkdir(empty, 0o755); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "verify", "--dump", empty)
		if r.code != exitConfig {
			t.Fatalf("want exit 2\n%v", r)
		}
		if !strings.Contains(r.stderr, empty) || !strings.Contains(r.stderr, "normal-oj") {
			t.Errorf("the message names neither the directory nor what was looked for\n%v", r)
		}
	})
	t.Run("directory of unrelated files", func(t *testing.T) {
		dir := filepath.Join(root, "unrelated")
		writeDump(t, dir, materialize.Docs{}, nil)
		for _, c := range dump.Sources {
			os.Remove(filepath.Join(dir, c+".bson"))
		}
		if err := os.WriteFile(filepath.Join(dir, "course.bson"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "verify", "--dump", dir)
		if r.code != exitConfig {
			t.Fatalf("want exit 2\n%v", r)
		}
	})
	t.Run("a file, not a directory", func(t *testing.T) {
		f := filepath.Join(good, "user.bson")
		r := runCLI(t, "verify", "--dump", f)
		if r.code != exitConfig {
			t.Fatalf("want exit 2\n%v", r)
		}
		if !strings.Contains(r.stderr, f) {
			t.Errorf("the message does not name %s\n%v", f, r)
		}
	})
	corrupt := []struct {
		name string
		coll string
		edit func([]byte) []byte
	}{
		{"truncated mid-document", "homework", func(b []byte) []byte { return b[:len(b)-7] }},
		{"truncated mid-length", "submission", func(b []byte) []byte {
			return append(slices.Clone(b), 0x10, 0x00)
		}},
		{"length beyond the end", "user", func(b []byte) []byte {
			b = slices.Clone(b)
			binary.LittleEndian.PutUint32(b, uint32(len(b)+100))
			return b
		}},
		{"bad terminator", "problem", func(b []byte) []byte {
			b = slices.Clone(b)
			n := binary.LittleEndian.Uint32(b)
			b[n-1] = 0x7f
			return b
		}},
	}
	for _, c := range corrupt {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			writeDump(t, dir, v.DB, nil)
			p := filepath.Join(dir, c.coll+".bson")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < 16 {
				t.Skipf("%s holds no document to break", p)
			}
			if err := os.WriteFile(p, c.edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			for _, args := range [][]string{{"verify", "--dump", dir}, {"rebuild", "--dump", dir, "--out", out}} {
				r := runCLI(t, args...)
				if r.code != exitFail {
					t.Errorf("%v: want exit 1\n%v", args, r)
				}
				if !strings.Contains(r.stderr, p) {
					t.Errorf("%v: the message does not name %s\n%v", args, p, r)
				}
				if r.stdout != "" {
					t.Errorf("%v: a report was printed for a corrupt dump\n%v", args, r)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("rebuild of a corrupt dump wrote %s", out)
			}
		})
	}
	t.Run("truncated gzip", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "d")
		writeDump(t, dir, v.DB, nil)
		gzipDir(t, dir)
		p := filepath.Join(dir, "homework.bson.gz")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "verify", "--dump", dir)
		if r.code != exitFail {
			t.Errorf("want exit 1\n%v", r)
		}
		if !strings.Contains(r.stderr, p) {
			t.Errorf("the message does not name %s\n%v", p, r)
		}
	})
	t.Run("out not empty", func(t *testing.T) {
		out := filepath.Join(root, "busy")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(out, "user.bson")
		if err := os.WriteFile(keep, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "rebuild", "--dump", good, "--out", out)
		if r.code == exitOK {
			t.Fatalf("rebuild into a non-empty --out succeeded\n%v", r)
		}
		if !strings.Contains(r.stderr, out) || !strings.Contains(r.stderr, "not empty") {
			t.Errorf("the message does not say %s is not empty\n%v", out, r)
		}
		if got := treeOf(t, out); len(got) != 1 || string(got["user.bson"]) != "precious" {
			t.Errorf("the refused --out was changed: %v", sortedKeys(got))
		}
		// --out equal to the dump itself is refused too, and the dump kept.
		before := treeOf(t, good)
		r = runCLI(t, "rebuild", "--dump", good, "--out", good)
		if r.code == exitOK {
			t.Fatalf("rebuild --out onto its own dump succeeded\n%v", r)
		}
		if !mapsEqual(before, treeOf(t, good)) {
			t.Errorf("rebuild --out onto its own dump changed it")
		}
	})
	t.Run("dry run with out writes nothing", func(t *testing.T) {
		out := filepath.Join(root, "dry-out")
		r := runCLI(t, "rebuild", "--dump", good, "--dry-run", "--out", out)
		if r.code != exitOK {
			t.Fatalf("want exit 0\n%v", r)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("rebuild --dry-run created %s", out)
		}
	})
}

// TestDumpNumericTypes: numbers stored as int32, int64 or whole doubles
// mean the same value, so a clean dump whose derived numbers are stored in
// another BSON numeric type verifies clean, and a rebuild leaves it as is.
func TestDumpNumericTypes(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	clean := applyExpected(t, v)
	for _, typ := range []bson.Type{bson.TypeInt64, bson.TypeDouble} {
		t.Run(typ.String(), func(t *testing.T) {
			conv := materialize.Docs{Problems: clean.Problems, Submissions: clean.Submissions}
			for _, u := range clean.Users {
				conv.Users = append(conv.Users, convertNumbers(t, u, typ, func(path []string) bool {
					return len(path) >= 1 && slices.Contains(userDerivedFields, path[0])
				}))
			}
			for _, h := range clean.Homeworks {
				conv.Homeworks = append(conv.Homeworks, convertNumbers(t, h, typ, func(path []string) bool {
					return len(path) >= 4 && path[0] == "studentStatus"
				}))
			}
			if bytes.Equal(conv.Homeworks[0], clean.Homeworks[0]) && bytes.Equal(conv.Users[0], clean.Users[0]) {
				t.Fatal("nothing converted")
			}
			root := t.TempDir()
			in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
			writeDump(t, in, conv, nil)
			want := independentCounts(t, conv, v)
			r := runCLI(t, "verify", "--dump", in)
			if r.code != exitOK {
				t.Fatalf("want exit 0\n%v", r)
			}
			checkReport(t, "verify", r, v, want)
			r = runCLI(t, "rebuild", "--dump", in, "--out", out)
			if r.code != exitOK {
				t.Fatalf("want exit 0\n%v", r)
			}
			// Nothing drifted, so nothing was rewritten.
			if !mapsEqual(filesOf(t, in), filesOf(t, out)) {
				t.Errorf("rebuild of a clean dump changed bytes")
			}
		})
	}
}

// convertNumbers re-encodes the int32 values at paths sel accepts as typ.
func convertNumbers(t testing.TB, doc bson.Raw, typ bson.Type, sel func(path []string) bool) bson.Raw {
	t.Helper()
	var conv func(doc bson.Raw, path []string) bson.Raw
	conv = func(doc bson.Raw, path []string) bson.Raw {
		els, err := doc.Elements()
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, e := range els {
			p := append(slices.Clone(path), e.Key())
			val := e.Value()
			switch {
			case val.Type == bson.TypeInt32 && sel(p):
				n := val.Int32()
				if typ == bson.TypeInt64 {
					out = append(out, bsontest.Element(typ, e.Key(), binary.LittleEndian.AppendUint64(nil, uint64(int64(n)))))
				} else {
					out = append(out, bsontest.Element(typ, e.Key(), binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(n)))))
				}
			case val.Type == bson.TypeEmbeddedDocument || val.Type == bson.TypeArray:
				sub := conv(bson.Raw(val.Value), p)
				out = append(out, bsontest.Element(val.Type, e.Key(), sub))
			default:
				out = append(out, e)
			}
		}
		return bsontest.Doc(out...)
	}
	return conv(doc, nil)
}

// TestDumpMissingAndForeignDerivedValues: user documents without the
// derived fields, entries that are not derived values (a string, a
// document with a foreign key), and a student whose value is not a
// document. verify counts every such user and entry as drifted and reports
// the unreadable student as malformed; rebuild --out appends the missing
// user fields after the others (as $set does), replaces the foreign entries
// and leaves the unreadable student as it was.
func TestDumpMissingAndForeignDerivedValues(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	clean := applyExpected(t, v)
	d := materialize.Docs{Problems: clean.Problems, Submissions: clean.Submissions}
	for _, u := range clean.Users {
		d.Users = append(d.Users, bsontest.Without(t, u, userDerivedFields...))
	}
	// Homework 0: its first entry becomes a string, its second gains a
	// foreign key; a student "ghost" with a non-document value is added.
	foreign := 0
	for i, h := range clean.Homeworks {
		if i > 0 {
			d.Homeworks = append(d.Homeworks, h)
			continue
		}
		els, err := h.Elements()
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, e := range els {
			ss, ok := e.Value().DocumentOK()
			if e.Key() != "studentStatus" || !ok {
				out = append(out, e)
				continue
			}
			users, _ := ss.Elements()
			var us [][]byte
			for _, u := range users {
				probs, ok := u.Value().DocumentOK()
				if !ok {
					us = append(us, u)
					continue
				}
				pels, _ := probs.Elements()
				var ps [][]byte
				for _, p := range pels {
					switch foreign {
					case 0:
						_, val, _ := bson.MarshalValue("oops")
						ps = append(ps, bsontest.Element(bson.TypeString, p.Key(), val))
					case 1:
						entry := append(slices.Clone([]byte(p.Value().Value)[:len(p.Value().Value)-1]),
							bsontest.Element(bson.TypeBoolean, "late", []byte{1})...)
						entry = append(entry, 0)
						binary.LittleEndian.PutUint32(entry, uint32(len(entry)))
						ps = append(ps, bsontest.Element(bson.TypeEmbeddedDocument, p.Key(), entry))
					default:
						ps = append(ps, p)
					}
					foreign++
				}
				us = append(us, bsontest.Element(bson.TypeEmbeddedDocument, u.Key(), bsontest.Doc(ps...)))
			}
			_, ghost, _ := bson.MarshalValue("not a document")
			us = append(us, bsontest.Element(bson.TypeString, "ghost", ghost))
			out = append(out, bsontest.Element(bson.TypeEmbeddedDocument, "studentStatus", bsontest.Doc(us...)))
		}
		d.Homeworks = append(d.Homeworks, bsontest.Doc(out...))
	}
	if foreign < 2 {
		t.Skipf("%s: the first homework has %d entries, 2 needed", v.Name, foreign)
	}
	want := independentCounts(t, d, v)
	if want.driftedUsers != want.users || want.driftedEntries != 2 {
		t.Fatalf("setup: %+v, want every user and 2 entries drifted", want)
	}

	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeDump(t, in, d, nil)
	r := runCLI(t, "verify", "--dump", in)
	if r.code != exitFail {
		t.Fatalf("verify: want exit 1\n%v", r)
	}
	got := parseReport(t, r)
	wantRep := cliReport{submissions: len(d.Submissions), users: want.users, driftedUsers: want.driftedUsers,
		entries: want.entries, driftedEntries: want.driftedEntries, penaltyErrors: v.PenaltyErrors, malformed: 1}
	if got != wantRep {
		t.Errorf("verify reports %+v, want %+v\n%v", got, wantRep, r)
	}
	if !strings.Contains(r.stdout, "ghost") {
		t.Errorf("the malformed student is not named\n%v", r)
	}

	r = runCLI(t, "rebuild", "--dump", in, "--out", out)
	if r.code != exitOK {
		t.Fatalf("rebuild: want exit 0\n%v", r)
	}
	if r := runCLI(t, "verify", "--dump", out); r.code != exitOK {
		t.Fatalf("verify of the output: want exit 0 (a malformed student is no drift)\n%v", r)
	} else if rep := parseReport(t, r); rep.driftedUsers+rep.driftedEntries != 0 || rep.malformed != 1 {
		t.Errorf("verify of the output: %+v, want no drift and the 1 malformed student", rep)
	}
	fixed := readDumpDocs(t, out)
	if u, e := independentDrift(t, fixed, v); u+e != 0 {
		t.Errorf("the output differs from expect in %d users and %d entries", u, e)
	}
	if d := reference.Check(refDB(fixed)); len(d) > 0 {
		t.Errorf("the output differs from the reference derivation:\n%s", strings.Join(d, "\n"))
	}
	for i, u := range fixed.Users {
		if !bytes.Equal(bsontest.Without(t, u, userDerivedFields...), d.Users[i]) {
			t.Errorf("user %d: non-derived bytes changed", i)
		}
		ks := keysOf(t, u)
		if n := len(ks); n < 3 || !slices.Equal(keysOf(t, d.Users[i]), ks[:n-3]) {
			t.Errorf("user %d: keys %v, want %v then the derived fields", i, ks, keysOf(t, d.Users[i]))
		}
	}
	for i, h := range fixed.Homeworks {
		if !bytes.Equal(bsontest.NullEntries(t, h), bsontest.NullEntries(t, d.Homeworks[i])) {
			t.Errorf("homework %d: non-derived bytes changed", i)
		}
	}
	if g, ok := element(fixed.Homeworks[0].Lookup("studentStatus").Document(), "ghost"); !ok || g.StringValue() != "not a document" {
		t.Errorf("the unreadable student became %v", g)
	}
}

// renameValue replaces a string value found in names.
func renameValue(v bson.RawValue, names map[string]string) (bson.Type, []byte) {
	if s, ok := v.StringValueOK(); ok {
		if n, ok := names[s]; ok {
			_, b, _ := bson.MarshalValue(n)
			return bson.TypeString, b
		}
	}
	return v.Type, v.Value
}

// renameUsers returns doc with the string value of each field in fields
// and the keys of studentStatus renamed by names.
func renameUsers(t testing.TB, doc bson.Raw, names map[string]string, fields ...string) bson.Raw {
	t.Helper()
	els, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range els {
		switch {
		case slices.Contains(fields, e.Key()):
			typ, val := renameValue(e.Value(), names)
			out = append(out, bsontest.Element(typ, e.Key(), val))
		case e.Key() == "studentStatus" && e.Value().Type == bson.TypeEmbeddedDocument:
			users, err := e.Value().Document().Elements()
			if err != nil {
				t.Fatal(err)
			}
			var us [][]byte
			for _, u := range users {
				k := u.Key()
				if n, ok := names[k]; ok {
					k = n
				}
				us = append(us, bsontest.Element(u.Value().Type, k, u.Value().Value))
			}
			out = append(out, bsontest.Element(bson.TypeEmbeddedDocument, "studentStatus", bsontest.Doc(us...)))
		default:
			out = append(out, e)
		}
	}
	return bsontest.Doc(out...)
}

// renameVector renames users throughout a vector, its expectation included.
func renameVector(t testing.TB, v materializetest.Vector, names map[string]string) materializetest.Vector {
	t.Helper()
	r := materializetest.Vector{Name: v.Name, PenaltyErrors: v.PenaltyErrors, DB: materialize.Docs{Problems: v.DB.Problems}}
	for _, u := range v.DB.Users {
		r.DB.Users = append(r.DB.Users, renameUsers(t, u, names, "_id"))
	}
	for _, s := range v.DB.Submissions {
		r.DB.Submissions = append(r.DB.Submissions, renameUsers(t, s, names, "user"))
	}
	for _, h := range v.DB.Homeworks {
		r.DB.Homeworks = append(r.DB.Homeworks, renameUsers(t, h, names))
	}
	for _, u := range v.ExpectUsers {
		r.ExpectUsers = append(r.ExpectUsers, renameUsers(t, u, names, "_id"))
	}
	for _, h := range v.ExpectHWs {
		r.ExpectHWs = append(r.ExpectHWs, renameUsers(t, h, names))
	}
	return r
}

// TestDumpUsernames: the derivation does not depend on what usernames
// look like, so a vector whose users are renamed to names with '.', a
// leading '$', spaces, non-ASCII letters or digits only has the renamed
// expectation: verify counts it the same, and rebuild --out writes every
// entry under the right (renamed) key, never a wrong path.
func TestDumpUsernames(t *testing.T) {
	cleanConfigEnv(t)
	shapes := []func(i int) string{
		func(i int) string { return "a.b." + strconv.Itoa(i) },
		func(i int) string { return "$user" + strconv.Itoa(i) },
		func(i int) string { return "$" + strconv.Itoa(i) + ".x" },
		func(i int) string { return "ユーザー " + strconv.Itoa(i) },
		func(i int) string { return strconv.Itoa(100 + i) },
		func(i int) string { return "..." + strings.Repeat("u", i+1) },
	}
	// Vectors with the most users and entries.
	vs := slices.Clone(readVectors(t))
	size := map[string]int{}
	for _, v := range vs {
		c := independentCounts(t, v.DB, v)
		size[v.Name] = c.users + c.entries
	}
	slices.SortStableFunc(vs, func(a, b materializetest.Vector) int { return size[b.Name] - size[a.Name] })
	for si, shape := range shapes {
		v := vs[si%4]
		t.Run(shape(0), func(t *testing.T) {
			names := map[string]string{}
			for i, u := range v.ExpectUsers {
				names[u.Lookup("_id").StringValue()] = shape(i)
			}
			// Users with entries or submissions but no document too.
			for _, s := range v.DB.Submissions {
				if u, ok := s.Lookup("user").StringValueOK(); ok {
					if _, ok := names[u]; !ok {
						names[u] = shape(len(names))
					}
				}
			}
			rv := renameVector(t, v, names)
			want := independentCounts(t, rv.DB, rv)
			if orig := independentCounts(t, v.DB, v); orig != want {
				t.Fatalf("setup: renaming changed the counts: %+v vs %+v", orig, want)
			}
			root := t.TempDir()
			in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
			writeDump(t, in, rv.DB, nil)
			r := runCLI(t, "verify", "--dump", in)
			if want.driftedUsers+want.driftedEntries > 0 && r.code != exitFail {
				t.Fatalf("verify: want exit 1\n%v", r)
			}
			checkReport(t, "verify", r, rv, want)
			r = runCLI(t, "rebuild", "--dump", in, "--out", out)
			if r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			fixed := readDumpDocs(t, out)
			if u, e := independentDrift(t, fixed, rv); u+e != 0 {
				t.Errorf("the output differs from the renamed expectation in %d users and %d entries", u, e)
			}
			if d := reference.Check(refDB(fixed)); len(d) > 0 {
				t.Errorf("the output differs from the reference derivation:\n%s", strings.Join(d, "\n"))
			}
			checkOnlyDerivedChanged(t, in, out)
			if r := runCLI(t, "verify", "--dump", out); r.code != exitOK {
				t.Errorf("verify of the output: want exit 0\n%v", r)
			}
		})
	}
}
