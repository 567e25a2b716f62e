package materialize_test

import (
	"bytes"
	"math"
	"testing"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// referenceMatches is the decoding comparison MatchesStored replaced:
// DecodeEntry, then Equal.
func referenceMatches(e materialize.Entry, v bson.RawValue) bool {
	f, ok := materialize.DecodeEntry(v)
	return ok && e.Equal(f)
}

func rawValue(t testing.TB, v any) bson.RawValue {
	t.Helper()
	typ, data, err := bson.MarshalValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return bson.RawValue{Type: typ, Value: data}
}

// storedShapes are stored entry values of every shape the comparison must
// tell apart: derived keys in other orders and numeric types, duplicates,
// extra and missing keys, wrong types.
func storedShapes(t testing.TB) []bson.RawValue {
	ids := bson.A{"a", "b"}
	docs := []any{
		mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", int64(70), "problemStatus", float64(1), "submissionIds", ids, "rawScore", float64(70)),
		mtest.D("submissionIds", ids, "rawScore", int32(70), "problemStatus", int32(1), "score", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", ids),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", bson.A{"a"}, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", bson.A{"a", "b", "c"}, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", bson.A{"a", int32(2)}, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70), "x", int32(1)),
		mtest.D("score", int32(70), "score", int32(70), "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", ids, "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70), "rawScore", int32(70)),
		mtest.D("score", 70.5, "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", "70", "problemStatus", int32(1), "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", "1", "submissionIds", ids, "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "submissionIds", "a", "rawScore", int32(70)),
		mtest.D("score", int32(70), "problemStatus", int32(1), "rawScore", int32(70)),
		mtest.D("problemStatus", int32(1), "submissionIds", ids),
		mtest.D("score", int32(70), "submissionIds", ids),
		mtest.D("score", math.Pow(2, 63), "problemStatus", nil, "submissionIds", bson.A{}),
		mtest.D("score", int64(math.MaxInt64), "problemStatus", nil, "submissionIds", bson.A{}),
		mtest.D(),
	}
	out := make([]bson.RawValue, 0, len(docs)+3)
	for _, d := range docs {
		out = append(out, rawValue(t, d))
	}
	return append(out, bson.RawValue{Type: bson.TypeNull}, rawValue(t, int32(3)), rawValue(t, bson.A{}))
}

func derivedShapes() []materialize.Entry {
	return []materialize.Entry{
		materialize.StartEntry(),
		{Score: 70, ProblemStatus: 1, HasStatus: true, SubmissionIDs: []string{"a", "b"}, RawScore: 70, HasRaw: true},
		{Score: 70, ProblemStatus: 1, HasStatus: true, SubmissionIDs: []string{"a", "b"}},
		{Score: 70, ProblemStatus: 1, HasStatus: true, SubmissionIDs: []string{"a"}, RawScore: 70, HasRaw: true},
		{Score: 70, ProblemStatus: 2, HasStatus: true, SubmissionIDs: []string{"a", "b"}, RawScore: 70, HasRaw: true},
		{Score: 70, SubmissionIDs: []string{"a", "b"}, RawScore: 70, HasRaw: true},
		{Score: math.MaxInt64, SubmissionIDs: []string{}},
		{Score: 0, SubmissionIDs: nil},
	}
}

// TestMatchesStoredInPlace: the in-place comparison agrees with decoding
// and comparing, on every pair of shapes and on every stored entry of the
// derive vectors against its derived value.
func TestMatchesStoredInPlace(t *testing.T) {
	matches := 0
	for _, v := range storedShapes(t) {
		for _, e := range derivedShapes() {
			got, want := e.MatchesStored(v), referenceMatches(e, v)
			if got != want {
				t.Errorf("%+v vs stored %s: MatchesStored %v, decoding %v", e, v, got, want)
			}
			if want {
				matches++
			}
		}
	}
	if matches < 4 {
		t.Fatalf("only %d matching pairs: the table does not exercise equality", matches)
	}
	for _, vec := range readDeriveVectors(t) {
		res := materialize.Derive(vec.DB)
		for _, raw := range vec.DB.Homeworks {
			h, err := materialize.DecodeHomework(raw)
			if err != nil {
				continue
			}
			ss, err := raw.LookupErr(materialize.FieldStudentStatus)
			if err != nil {
				continue
			}
			ssd, ok := ss.DocumentOK()
			if !ok {
				continue
			}
			users, _ := ssd.Elements()
			for _, ue := range users {
				ud, ok := ue.Value().DocumentOK()
				if !ok {
					continue
				}
				probs, _ := ud.Elements()
				for _, pe := range probs {
					e, ok := res.Entries[h.ID][ue.Key()][pe.Key()]
					if !ok {
						continue
					}
					if got, want := e.MatchesStored(pe.Value()), referenceMatches(e, pe.Value()); got != want {
						t.Errorf("%s: %s.%s: MatchesStored %v, decoding %v", vec.Name, ue.Key(), pe.Key(), got, want)
					}
				}
			}
		}
	}
}

// TestAppendBSON: the hand encoder writes the bytes bson.Marshal writes.
func TestAppendBSON(t *testing.T) {
	for _, e := range append(derivedShapes(), materialize.Entry{Score: -1 << 40, HasStatus: true, ProblemStatus: 1 << 33, RawScore: math.MinInt64, HasRaw: true,
		SubmissionIDs: []string{"0123456789abcdef01234567", "", "x", "y", "z", "a", "b", "c", "d", "e", "f", "g"}}) {
		want, err := bson.Marshal(e.Doc())
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendBSON([]byte("prefix")); !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Errorf("%+v:\n got %x\nwant %x", e, got[6:], want)
		}
		if e.EncodedSize() != len(want) {
			t.Errorf("%+v: EncodedSize %d, encoded %d", e, e.EncodedSize(), len(want))
		}
	}
}

// TestPatchEntriesEqualsPatchHomework: patching through a lookup gives the
// bytes PatchHomework gives, on every homework of every derive vector
// (duplicate user keys, non-document users, foreign keys included).
func TestPatchEntriesEqualsPatchHomework(t *testing.T) {
	patched := 0
	for _, vec := range readDeriveVectors(t) {
		res := materialize.Derive(vec.DB)
		for _, raw := range vec.DB.Homeworks {
			h, err := materialize.DecodeHomework(raw)
			if err != nil {
				continue
			}
			entries := res.Entries[h.ID]
			want, changed, err := materialize.PatchHomework(raw, entries)
			if err != nil {
				t.Fatalf("%s: %v", vec.Name, err)
			}
			got, err := materialize.PatchEntries(nil, raw, func(user, pk []byte) (materialize.Entry, bool) {
				e, ok := entries[string(user)][string(pk)]
				return e, ok
			})
			if err != nil {
				t.Fatalf("%s: %v", vec.Name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: homework %s: PatchEntries differs from PatchHomework", vec.Name, h.ID.Hex())
			}
			if changed {
				patched++
			}
		}
	}
	if patched == 0 {
		t.Fatal("no vector homework changed: the comparison is empty")
	}
}

// TestUserValueEncoding: the hand-encoded derived user fields are the
// bytes the reflection-based encoder gives for UserStats.Fields.
func TestUserValueEncoding(t *testing.T) {
	for _, st := range []materialize.UserStats{
		{ACProblemIDs: []int64{}},
		{Submission: 12, ACSubmission: 3, ACProblemIDs: []int64{7, 1, 1 << 40, -2}},
		{Submission: 1 << 33, ACSubmission: math.MinInt64, ACProblemIDs: make([]int64, 12)},
	} {
		doc := mtest.Raw("_id", "u", "x", int32(1))
		got, err := materialize.PatchUser(doc, st)
		if err != nil {
			t.Fatal(err)
		}
		want, err := bson.Marshal(append(bson.D{{Key: "_id", Value: "u"}, {Key: "x", Value: int32(1)}}, st.Fields()...))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%+v:\n got %x\nwant %x", st, got, want)
		}
	}
}

// TestLastValue: the last element of a key wins (as a map built from the
// elements holds it); absent keys, empty and nil documents find nothing.
func TestLastValue(t *testing.T) {
	dup := bsoncore.NewDocumentBuilder().AppendInt32("7", 1).AppendString("8", "x").AppendInt32("7", 2).Build()
	cases := []struct {
		name string
		doc  []byte
		key  string
		want bson.RawValue
		ok   bool
	}{
		{"duplicate: the last", dup, "7", bson.RawValue{Type: bson.TypeInt32, Value: bsoncore.AppendInt32(nil, 2)}, true},
		{"single", dup, "8", bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, "x")}, true},
		{"absent", dup, "9", bson.RawValue{}, false},
		{"prefix of a key", dup, "", bson.RawValue{}, false},
		{"empty document", bsoncore.NewDocumentBuilder().Build(), "7", bson.RawValue{}, false},
		{"nil", nil, "7", bson.RawValue{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := materialize.LastValue(c.doc, c.key)
			if ok != c.ok || got.Type != c.want.Type || !bytes.Equal(got.Value, c.want.Value) {
				t.Errorf("got %v %v, want %v %v", got, ok, c.want, c.ok)
			}
		})
	}
}

// TestPatchAtEqualsPatchEntries: replacing entries by their offsets gives
// the bytes PatchEntries gives when looking them up by key, on every
// homework of every derive vector whose entries each appear once, for
// every entry and for every other one; an offset that is not an entry is
// an error.
func TestPatchAtEqualsPatchEntries(t *testing.T) {
	compared := 0
	for _, vec := range readDeriveVectors(t) {
		for _, raw := range vec.DB.Homeworks {
			type at struct {
				user, pk string
				elem     int
			}
			var entries []at
			seen := map[[2]string]bool{}
			unique, sections := true, 0
			base := uintptr(unsafe.Pointer(&raw[0]))
			materialize.EachElement(raw, func(t bson.Type, key, val []byte) {
				if string(key) != materialize.FieldStudentStatus || t != bson.TypeEmbeddedDocument {
					return
				}
				sections++
				materialize.EachElement(val, func(ut bson.Type, user, uval []byte) {
					if ut != bson.TypeEmbeddedDocument {
						return
					}
					materialize.EachElement(uval, func(_ bson.Type, pk, _ []byte) {
						k := [2]string{string(user), string(pk)}
						unique = unique && !seen[k]
						seen[k] = true
						entries = append(entries, at{k[0], k[1], int(uintptr(unsafe.Pointer(unsafe.SliceData(pk))) - base - 1)})
					})
				})
			})
			if !unique || sections > 1 || len(entries) == 0 || raw.Validate() != nil {
				continue
			}
			for _, every := range []int{1, 2} {
				want := map[string]map[string]materialize.Entry{}
				var fixes []materialize.ValueAt
				for i, e := range entries {
					if i%every != 0 {
						continue
					}
					// A value no stored entry holds, different per entry.
					d := materialize.Entry{Score: int64(1000 + i), SubmissionIDs: []string{e.user, e.pk}, HasRaw: i%3 == 0}
					if want[e.user] == nil {
						want[e.user] = map[string]materialize.Entry{}
					}
					want[e.user][e.pk] = d
					fixes = append(fixes, materialize.ValueAt{Elem: e.elem, Value: d.AppendBSON(nil)})
				}
				wantDoc, err := materialize.PatchEntries(nil, raw, func(user, pk []byte) (materialize.Entry, bool) {
					d, ok := want[string(user)][string(pk)]
					return d, ok
				})
				if err != nil {
					t.Fatalf("%s: PatchEntries: %v", vec.Name, err)
				}
				got, err := materialize.PatchAt([]byte("prefix"), raw, fixes)
				if err != nil {
					t.Fatalf("%s: PatchAt: %v", vec.Name, err)
				}
				if !bytes.Equal(got[6:], wantDoc) || string(got[:6]) != "prefix" {
					t.Fatalf("%s: PatchAt (every %d) differs from PatchEntries", vec.Name, every)
				}
				compared++
			}
			if _, err := materialize.PatchAt(nil, raw, []materialize.ValueAt{{Elem: 4, Value: materialize.StartEntry().AppendBSON(nil)}}); err == nil {
				t.Fatalf("%s: PatchAt at the first top-level element: no error", vec.Name)
			}
		}
	}
	if compared < 100 {
		t.Fatalf("only %d homeworks compared", compared)
	}
	t.Logf("%d patched homeworks compared", compared)
}
