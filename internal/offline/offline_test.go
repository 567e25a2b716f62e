package offline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/bsontest"
	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// allDiffs keeps every difference in the reports the parity checks
// compare (a capped list would hold each path's first ones, in its order).
const allDiffs = 1 << 20

// online runs the online rebuild (watch.Rebuild over memstore, the same
// documents) and returns its report and the documents it left.
func online(t *testing.T, docs materialize.Docs) (*drift.Report, *memstore.Store) {
	t.Helper()
	st := loadStore(t, docs)
	rep, err := watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{MaxDiffs: allDiffs})
	if err != nil {
		t.Fatal(err)
	}
	return rep, st
}

// loadStore returns an in-memory store holding docs (one document per
// _id: a later one replaces an earlier one).
func loadStore(t *testing.T, docs materialize.Docs) *memstore.Store {
	t.Helper()
	st := memstore.New()
	for coll, ds := range map[string][]bson.Raw{materialize.CollUser: docs.Users, materialize.CollProblem: docs.Problems,
		materialize.CollHomework: docs.Homeworks, materialize.CollSubmission: docs.Submissions} {
		if err := st.Load(coll, ds...); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// writeTestDump writes docs as a mongodump directory under dir (database
// normal-oj) and returns it.
func writeTestDump(t *testing.T, dir string, docs materialize.Docs) dump.Dir {
	t.Helper()
	if err := dump.Write(dir, map[string][]bson.Raw{materialize.CollUser: docs.Users, materialize.CollProblem: docs.Problems,
		materialize.CollHomework: docs.Homeworks, materialize.CollSubmission: docs.Submissions}); err != nil {
		t.Fatal(err)
	}
	d, err := dump.Resolve(dir, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkSameAsOnline runs Run (verify, with tiny buckets, then with an
// output) on docs and compares its report with the online rebuild's
// (counts, every diff and every malformed document, as multisets: the two
// paths emit them in different orders) and its output with the documents
// the online rebuild left, collection by collection as multisets (a
// document missing from the output fails too). It returns the documents
// the online rebuild left.
func checkSameAsOnline(t *testing.T, docs materialize.Docs) materialize.Docs {
	t.Helper()
	root := t.TempDir()
	d := writeTestDump(t, filepath.Join(root, "in"), docs)
	want, st := online(t, docs)
	diffs := func(rep *drift.Report) []string {
		var out []string
		for _, d := range rep.Diffs {
			out = append(out, fmt.Sprintf("%+v", d))
		}
		slices.Sort(out)
		return out
	}
	out := filepath.Join(root, "out")
	for _, o := range []string{"", filepath.Join(root, "tiny-buckets"), out} {
		opts := Options{Out: o, MaxDiffs: allDiffs}
		if o != out {
			opts.userBits = 1
		}
		got, err := Run(context.Background(), d, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got.Submissions != want.Submissions || got.Users != want.Users || got.Entries != want.Entries ||
			got.DriftedUsers != want.DriftedUsers || got.DriftedEntries != want.DriftedEntries ||
			got.PenaltyErrors != want.PenaltyErrors || len(got.Malformed) != len(want.Malformed) {
			t.Fatalf("out %q: offline report %+v\nonline report %+v", o, got, want)
		}
		if g, w := diffs(got), diffs(want); !slices.Equal(g, w) {
			t.Fatalf("out %q: diffs differ\noffline %q\nonline  %q", o, g, w)
		}
		malformed := func(rep *drift.Report) []string {
			var out []string
			for _, m := range rep.Malformed {
				out = append(out, m.Error())
			}
			slices.Sort(out)
			return out
		}
		if g, w := malformed(got), malformed(want); !slices.Equal(g, w) {
			t.Fatalf("out %q: malformed differ\noffline %q\nonline  %q", o, g, w)
		}
	}
	od, err := dump.Resolve(out, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	for _, coll := range []string{materialize.CollUser, materialize.CollHomework, materialize.CollProblem, materialize.CollSubmission} {
		gotDocs, err := od.Read(coll)
		if err != nil {
			t.Fatal(err)
		}
		wantDocs := st.Collection(coll)
		key := func(ds []bson.Raw) []string {
			out := make([]string, len(ds))
			for i, d := range ds {
				out[i] = string(d)
			}
			slices.Sort(out)
			return out
		}
		if g, w := key(gotDocs), key(wantDocs); !slices.Equal(g, w) {
			for _, doc := range gotDocs {
				if !slices.ContainsFunc(wantDocs, func(w bson.Raw) bool { return bytes.Equal(w, doc) }) {
					t.Errorf("%s: offline wrote %s", coll, doc)
				}
			}
			for _, doc := range wantDocs {
				if !slices.ContainsFunc(gotDocs, func(g bson.Raw) bool { return bytes.Equal(g, doc) }) {
					t.Errorf("%s: online left  %s", coll, doc)
				}
			}
			t.FailNow()
		}
	}
	return materialize.Docs{Users: st.Collection(materialize.CollUser), Problems: st.Collection(materialize.CollProblem),
		Homeworks: st.Collection(materialize.CollHomework), Submissions: st.Collection(materialize.CollSubmission)}
}

// TestRunSameAsOnlineRebuild: on every derive vector, the offline path
// (compact records, in-place comparison, one patch per homework) counts
// what the online rebuild counts and writes the documents it leaves.
func TestRunSameAsOnlineRebuild(t *testing.T) {
	vs, err := mtest.ReadVectors("../../materialize/testdata/derive.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if hasDuplicateIDs(v.DB) {
			continue // memstore keeps one document per _id; a dump keeps both
		}
		t.Run(v.Name, func(t *testing.T) { checkSameAsOnline(t, v.DB) })
	}
}

func hasDuplicateIDs(d materialize.Docs) bool {
	for _, docs := range [][]bson.Raw{d.Users, d.Problems, d.Homeworks, d.Submissions} {
		seen := map[string]bool{}
		for _, doc := range docs {
			id, err := doc.LookupErr("_id")
			if err != nil {
				return true
			}
			k := string(append([]byte{byte(id.Type)}, id.Value...))
			if seen[k] {
				return true
			}
			seen[k] = true
		}
	}
	return false
}

// TestRunWideProblemIDs: problem ids spanning more than 2^32 take the
// comparison sort instead of the packed one, with the same result.
func TestRunWideProblemIDs(t *testing.T) {
	hw := bson.ObjectID{9}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	probs := []int64{-5, 1, 1 << 40}
	var problems, subs []bson.Raw
	entries := bson.D{}
	for _, p := range probs {
		problems = append(problems, mtest.Raw("_id", p, "homeworks", bson.A{hw}))
		entries = append(entries, bson.E{Key: materialize.ProblemKey(p), Value: mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})})
	}
	for i := range 30 {
		p := probs[i%len(probs)]
		subs = append(subs, mtest.Raw("_id", bson.ObjectID{byte(i), 1}, "user", []string{"bob", "al"}[i%2], "problem", p,
			"timestamp", bson.NewDateTimeFromTime(end.Add(time.Duration(i-15)*24*time.Hour)), "status", int32(i%3), "score", int32(i*7%101)))
	}
	checkSameAsOnline(t, materialize.Docs{
		Users:       []bson.Raw{mtest.Raw("_id", "al"), mtest.Raw("_id", "bob")},
		Problems:    problems,
		Homeworks:   []bson.Raw{mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "penalty", "score = score // 2", "studentStatus", mtest.D("al", entries, "bob", entries))},
		Submissions: subs,
	})
}

// TestRunDuplicateKeys: homeworks that name an entry twice (a user key
// holding a document twice, a problem key twice in a user's document, two
// studentStatus documents) are patched by key, every occurrence the online
// rebuild patches; the others by offset. Each homework drifts, so both
// patch paths write, and the output equals the online rebuild's.
func TestRunDuplicateKeys(t *testing.T) {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	stale := mtest.D("score", int32(5), "problemStatus", nil, "submissionIds", bson.A{"x"})
	other := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	hws := []bson.ObjectID{{1}, {2}, {3}, {4}, {5}}
	homework := func(id bson.ObjectID, ss ...any) bson.Raw {
		kv := []any{"_id", id, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "penalty", "score = score // 2"}
		return mtest.Raw(append(kv, ss...)...)
	}
	docs := materialize.Docs{
		Users: []bson.Raw{mtest.Raw("_id", "al"), mtest.Raw("_id", "bo")},
		Problems: []bson.Raw{mtest.Raw("_id", int32(1), "homeworks", bson.A{hws[0], hws[1], hws[2], hws[3], hws[4]}),
			mtest.Raw("_id", int32(2), "homeworks", bson.A{hws[0], hws[1], hws[2], hws[3], hws[4]})},
		Homeworks: []bson.Raw{
			// al twice as a document: the second holds the entries.
			homework(hws[0], "studentStatus", mtest.D("al", mtest.D("1", stale, "2", stale), "bo", mtest.D("1", stale), "al", mtest.D("1", stale))),
			// problem key 1 twice in al's document.
			homework(hws[1], "studentStatus", mtest.D("al", mtest.D("1", stale, "2", other, "1", stale), "bo", mtest.D("2", stale))),
			// two studentStatus documents: the first holds the entries.
			homework(hws[2], "studentStatus", mtest.D("al", mtest.D("1", stale)), "studentStatus", mtest.D("al", mtest.D("1", stale), "bo", mtest.D("1", stale))),
			// al once, a non-document bo after a document one.
			homework(hws[3], "studentStatus", mtest.D("al", mtest.D("1", stale, "2", stale), "bo", mtest.D("1", stale), "bo", int32(3))),
			// every entry once: patched by offset.
			homework(hws[4], "studentStatus", mtest.D("al", mtest.D("1", stale, "2", stale, "x", stale), "bo", mtest.D("1", other, "2", stale))),
		},
	}
	for i := range 12 {
		docs.Submissions = append(docs.Submissions, mtest.Raw("_id", bson.ObjectID{byte(i), 7}, "user", []string{"al", "bo"}[i%2],
			"problem", int32(1+i%3%2), "timestamp", bson.NewDateTimeFromTime(end.Add(time.Duration(i-6)*24*time.Hour)),
			"status", int32(i%2), "score", int32(i*9%101)))
	}
	checkSameAsOnline(t, docs)
}

// TestRunWideValues: statuses and scores outside int32 (kept beside the
// 40-byte records) and handwritten submissions (a flag bit of the record's
// user) derive as the online rebuild derives them.
func TestRunWideValues(t *testing.T) {
	hw := bson.ObjectID{7}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	entry := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	values := []any{int32(100), int64(1) << 40, int64(-1) << 35, int64(math.MaxInt32) + 1, int64(math.MinInt32) - 1, int32(-1), nil, 99.0}
	var subs []bson.Raw
	for i := range 40 {
		kv := []any{"_id", bson.ObjectID{byte(i), 2}, "user", []string{"al", "bo"}[i%2], "problem", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(time.Duration(i-20) * 24 * time.Hour)),
			"status", values[i%len(values)], "score", values[(i/2)%len(values)]}
		if i%5 == 0 {
			kv = append(kv, "languageType", int32(materialize.LanguageHandwritten))
		}
		subs = append(subs, mtest.Raw(kv...))
	}
	checkSameAsOnline(t, materialize.Docs{
		Users:       []bson.Raw{mtest.Raw("_id", "al"), mtest.Raw("_id", "bo")},
		Problems:    []bson.Raw{mtest.Raw("_id", int32(1), "homeworks", bson.A{hw})},
		Homeworks:   []bson.Raw{mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "penalty", "score = score - overtime", "studentStatus", mtest.D("al", mtest.D("1", entry), "bo", mtest.D("1", entry)))},
		Submissions: subs,
	})
}

// TestCompactSizes: the per-submission record and the per-entry index
// element keep the sizes memory is planned by (docs/benchmarks.md).
func TestCompactSizes(t *testing.T) {
	if n := unsafe.Sizeof(record{}); n != 40 {
		t.Errorf("record: %d bytes, want 40", n)
	}
	if n := unsafe.Sizeof(entry{}); n != 16 {
		t.Errorf("entry: %d bytes, want 16", n)
	}
}

// TestRunDottedProblemKey: an entry whose problem key holds a dot (no
// problem renders to it: it keeps the start value) is corrected by the
// offline path; the online rebuild corrects it too (the MongoDB adapter
// writes such keys literally, mongodb/query.go), so the in-memory store
// must not split the key at its dot.
func TestRunDottedProblemKey(t *testing.T) {
	hws := []bson.ObjectID{{3}, {4}}
	stale := mtest.D("score", int32(5), "problemStatus", int32(1), "submissionIds", bson.A{"x"})
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	checkSameAsOnline(t, materialize.Docs{
		Users:    []bson.Raw{mtest.Raw("_id", "al")},
		Problems: []bson.Raw{mtest.Raw("_id", int32(1), "homeworks", bson.A{hws[0], hws[1]})},
		Homeworks: []bson.Raw{
			// The dotted entry is the only one that drifted.
			mtest.Raw("_id", hws[0], "studentStatus", mtest.D("al", mtest.D("1", start, "1.0", stale))),
			// With another drifted entry (the store patches the whole
			// homework then).
			mtest.Raw("_id", hws[1], "studentStatus", mtest.D("al", mtest.D("1.0", stale), "b.o", mtest.D("1", stale, "2.5", stale))),
		},
	})
}

// TestVerifyTooLargeAfterDuplicatePatch: in a homework with two
// studentStatus documents, the patch by key rewrites the entries of both,
// so a verify must measure the patched document (about 21 MiB here), not
// count each drifted entry once (about 13 MiB).
func TestVerifyTooLargeAfterDuplicatePatch(t *testing.T) {
	// 200,000 entries whose stored value is an int32: each becomes the
	// start value {score: 0, problemStatus: null, submissionIds: []}.
	uidx, user := bsoncore.AppendDocumentStart(nil)
	for i := range 200_000 {
		user = bsoncore.AppendInt32Element(user, fmt.Sprintf("k%d", i), 7)
	}
	user, _ = bsoncore.AppendDocumentEnd(user, uidx)
	ssidx, ss := bsoncore.AppendDocumentStart(nil)
	ss = bsoncore.AppendDocumentElement(ss, "al", user)
	ss, _ = bsoncore.AppendDocumentEnd(ss, ssidx)
	hidx, hw := bsoncore.AppendDocumentStart(nil)
	hw = bsoncore.AppendObjectIDElement(hw, "_id", bson.ObjectID{1})
	hw = bsoncore.AppendDocumentElement(hw, materialize.FieldStudentStatus, ss)
	hw = bsoncore.AppendDocumentElement(hw, materialize.FieldStudentStatus, ss)
	hw, _ = bsoncore.AppendDocumentEnd(hw, hidx)
	d := writeTestDump(t, filepath.Join(t.TempDir(), "in"), materialize.Docs{Homeworks: []bson.Raw{hw}})
	_, err := Run(context.Background(), d, Options{})
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || len(tooLarge.Homeworks) != 1 || tooLarge.Homeworks[0].Size <= materialize.MaxDocumentSize {
		t.Fatalf("verify: %v, want a TooLargeError naming the homework", err)
	}
	t.Logf("%d-byte homework: %v", len(hw), err)
}

// largestVectors returns the n derive vectors (without duplicate _ids,
// which memstore cannot hold) with the most homework and user bytes: the
// most stored values to re-encode or rename.
func largestVectors(t *testing.T, n int) []mtest.Vector {
	t.Helper()
	vs, err := mtest.ReadVectors("../../materialize/testdata/derive.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	vs = slices.DeleteFunc(vs, func(v mtest.Vector) bool { return hasDuplicateIDs(v.DB) })
	size := func(v mtest.Vector) int {
		n := 0
		for _, d := range slices.Concat(v.DB.Homeworks, v.DB.Users) {
			n += len(d)
		}
		return n
	}
	slices.SortStableFunc(vs, func(a, b mtest.Vector) int { return size(b) - size(a) })
	return vs[:min(n, len(vs))]
}

// TestRunStoredNumbersOfAnyType: a derived number stored as an int64 or a
// whole double means the value it holds: on the largest vectors with
// their expected values applied and those numbers re-encoded, Run finds
// nothing drifted and writes what the online rebuild leaves (the
// documents as they are).
func TestRunStoredNumbersOfAnyType(t *testing.T) {
	userFields := []string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}
	for _, v := range largestVectors(t, 3) {
		want, err := v.Expected()
		if err != nil {
			t.Fatal(err)
		}
		clean := mtest.Apply(t, v.DB, want)
		for _, typ := range []bson.Type{bson.TypeInt64, bson.TypeDouble} {
			t.Run(v.Name+"/"+typ.String(), func(t *testing.T) {
				conv := materialize.Docs{Problems: clean.Problems, Submissions: clean.Submissions}
				changed := 0
				convert := func(doc bson.Raw, sel func([]string) bool) bson.Raw {
					if !mtest.DeepValidBSON(doc) {
						return doc
					}
					c := bsontest.ConvertNumbers(t, doc, typ, sel)
					if string(c) != string(doc) {
						changed++
					}
					return c
				}
				for _, u := range clean.Users {
					conv.Users = append(conv.Users, convert(u, func(p []string) bool { return slices.Contains(userFields, p[0]) }))
				}
				for _, h := range clean.Homeworks {
					conv.Homeworks = append(conv.Homeworks, convert(h, func(p []string) bool {
						return len(p) >= 4 && p[0] == materialize.FieldStudentStatus
					}))
				}
				if changed == 0 {
					t.Fatal("nothing converted")
				}
				checkSameAsOnline(t, conv)
				rep, err := Run(context.Background(), writeTestDump(t, t.TempDir(), conv), Options{})
				if err != nil {
					t.Fatal(err)
				}
				if rep.DriftedUsers+rep.DriftedEntries != 0 {
					t.Errorf("%d users and %d entries drifted, want none: %+v", rep.DriftedUsers, rep.DriftedEntries, rep.Diffs)
				}
			})
		}
	}
}

// TestRunUsernamesOfAnyShape: the derivation does not depend on what a
// username looks like: on the largest vectors with every user renamed to
// names with '.', a leading '$', spaces, non-ASCII letters or digits only,
// Run counts what it counts on the vector as it is and writes what the
// online rebuild leaves.
func TestRunUsernamesOfAnyShape(t *testing.T) {
	shapes := []func(i int) string{
		func(i int) string { return "a.b." + strconv.Itoa(i) },
		func(i int) string { return "$user" + strconv.Itoa(i) },
		func(i int) string { return "$" + strconv.Itoa(i) + ".x" },
		func(i int) string { return "ユーザー " + strconv.Itoa(i) },
		func(i int) string { return strconv.Itoa(100 + i) },
		func(i int) string { return "..." + strings.Repeat("u", i+1) },
	}
	vs := largestVectors(t, 2)
	for si, shape := range shapes {
		v := vs[si%len(vs)]
		t.Run(shape(0), func(t *testing.T) {
			names := map[string]string{}
			rename := func(u string) {
				if _, ok := names[u]; !ok {
					names[u] = shape(len(names))
				}
			}
			for _, u := range v.DB.Users {
				if n, ok := u.Lookup("_id").StringValueOK(); ok {
					rename(n)
				}
			}
			for _, s := range v.DB.Submissions {
				if n, ok := s.Lookup("user").StringValueOK(); ok {
					rename(n)
				}
			}
			for _, h := range v.DB.Homeworks {
				for _, e := range bsontest.Entries(t, h) {
					rename(e.User)
				}
			}
			r := materialize.Docs{Problems: v.DB.Problems}
			for _, u := range v.DB.Users {
				r.Users = append(r.Users, bsontest.RenameUsers(t, u, names, "_id"))
			}
			for _, s := range v.DB.Submissions {
				r.Submissions = append(r.Submissions, bsontest.RenameUsers(t, s, names, "user"))
			}
			for _, h := range v.DB.Homeworks {
				r.Homeworks = append(r.Homeworks, bsontest.RenameUsers(t, h, names))
			}
			checkSameAsOnline(t, r)
			orig, err := Run(context.Background(), writeTestDump(t, t.TempDir(), v.DB), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Run(context.Background(), writeTestDump(t, t.TempDir(), r), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Submissions != orig.Submissions || got.Users != orig.Users || got.Entries != orig.Entries ||
				got.DriftedUsers != orig.DriftedUsers || got.DriftedEntries != orig.DriftedEntries || got.PenaltyErrors != orig.PenaltyErrors {
				t.Errorf("renamed: %+v\nas it is: %+v", got, orig)
			}
		})
	}
}
