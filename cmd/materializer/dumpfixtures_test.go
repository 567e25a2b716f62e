package main

// Fixtures of the dump tests (dump_test.go, dump_random_test.go): the
// derive vectors written as mongodump directories, an independent
// reading of their expectations, the CLI's report read back, and raw BSON
// read and rewritten byte for byte.

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

// renameVector renames users throughout a vector, its expectation included.
func renameVector(t testing.TB, v materializetest.Vector, names map[string]string) materializetest.Vector {
	t.Helper()
	r := materializetest.Vector{Name: v.Name, PenaltyErrors: v.PenaltyErrors, DB: materialize.Docs{Problems: v.DB.Problems}}
	for _, u := range v.DB.Users {
		r.DB.Users = append(r.DB.Users, bsontest.RenameUsers(t, u, names, "_id"))
	}
	for _, s := range v.DB.Submissions {
		r.DB.Submissions = append(r.DB.Submissions, bsontest.RenameUsers(t, s, names, "user"))
	}
	for _, h := range v.DB.Homeworks {
		r.DB.Homeworks = append(r.DB.Homeworks, bsontest.RenameUsers(t, h, names))
	}
	for _, u := range v.ExpectUsers {
		r.ExpectUsers = append(r.ExpectUsers, bsontest.RenameUsers(t, u, names, "_id"))
	}
	for _, h := range v.ExpectHWs {
		r.ExpectHWs = append(r.ExpectHWs, bsontest.RenameUsers(t, h, names))
	}
	return r
}
