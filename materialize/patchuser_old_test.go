package materialize

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// oldPatchUser is PatchUser as of 87d3b2c (map of replacements, Elements).
func oldPatchUser(doc bson.Raw, st UserStats) (bson.Raw, error) {
	if err := checkBytes(doc); err != nil {
		return nil, fmt.Errorf("patch user: %w", err)
	}
	intValueBytes := func(n int64) []byte {
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return bsoncore.AppendInt32([]byte{byte(bson.TypeInt32)}, int32(n))
		}
		return bsoncore.AppendInt64([]byte{byte(bson.TypeInt64)}, n)
	}
	idsValueBytes := func(ids []int64) []byte {
		out := []byte{byte(bson.TypeArray)}
		idx, out := bsoncore.AppendArrayStart(out)
		for i, p := range ids {
			out = appendIntElement(out, strconv.Itoa(i), p)
		}
		out, _ = bsoncore.AppendArrayEnd(out, idx)
		return out
	}
	order := []string{FieldSubmission, FieldACSubmission, FieldACProblemIDs}
	repl := map[string][]byte{
		FieldSubmission:   intValueBytes(st.Submission),
		FieldACSubmission: intValueBytes(st.ACSubmission),
		FieldACProblemIDs: idsValueBytes(st.ACProblemIDs),
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	idx, out := bsoncore.AppendDocumentStart(nil)
	seen := make(map[string]bool, len(order))
	for _, el := range elems {
		k := el.Key()
		if v, ok := repl[k]; ok && !seen[k] {
			seen[k] = true
			out = append(out, v[0])
			out = append(out, k...)
			out = append(out, 0)
			out = append(out, v[1:]...)
			continue
		}
		out = append(out, el...)
	}
	for _, k := range order {
		if !seen[k] {
			v := repl[k]
			out = append(out, v[0])
			out = append(out, k...)
			out = append(out, 0)
			out = append(out, v[1:]...)
		}
	}
	return bsoncore.AppendDocumentEnd(out, idx)
}

// TestAppendPatchedUserSameAsOld: the alloc-free user patch writes the
// bytes the previous PatchUser wrote, on documents with the derived fields
// absent, present, duplicated, null or of other types, and after a prefix
// in dst; errors where it erred.
func TestAppendPatchedUserSameAsOld(t *testing.T) {
	b := func() *bsoncore.DocumentBuilder { return bsoncore.NewDocumentBuilder().AppendString("_id", "u") }
	docs := [][]byte{
		b().Build(),
		b().AppendInt32(FieldSubmission, 3).AppendInt64(FieldACSubmission, 1).Build(),
		b().AppendNull(FieldACProblemIDs).AppendInt32("x", 1).AppendInt32(FieldSubmission, 3).Build(),
		b().AppendInt32(FieldSubmission, 3).AppendInt32(FieldSubmission, 4).AppendString(FieldACSubmission, "z").AppendString(FieldACSubmission, "y").Build(),
		b().AppendArray(FieldACProblemIDs, bsoncore.NewArrayBuilder().AppendInt32(1).Build()).AppendArray(FieldACProblemIDs, bsoncore.NewArrayBuilder().Build()).Build(),
		bsoncore.NewDocumentBuilder().AppendInt32(FieldACSubmission, 2).AppendString("", "").AppendString("_id", "u").Build(),
		{5, 0, 0, 0, 0},
		{6, 0, 0, 0, 0},                      // bad length
		{12, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0}, // element past the declared length
		append(b().Build(), 0xff, 0xff),      // trailing bytes after the document
	}
	stats := []UserStats{
		{ACProblemIDs: []int64{}},
		{ACProblemIDs: nil},
		{Submission: 1 << 40, ACSubmission: math.MinInt64, ACProblemIDs: []int64{1, -1, 1 << 33, 0, 5, 6, 7, 8, 9, 10, 11, 12}},
	}
	for i, doc := range docs {
		for _, st := range stats {
			want, werr := oldPatchUser(doc, st)
			got, gerr := AppendPatchedUser([]byte("pre"), doc, st)
			if (werr != nil) != (gerr != nil) {
				t.Errorf("doc %d %+v: error %v, old %v", i, st, gerr, werr)
				continue
			}
			if werr != nil {
				continue
			}
			if !bytes.HasPrefix(got, []byte("pre")) || !bytes.Equal(got[3:], want) {
				t.Errorf("doc %d %+v:\n got %x\nwant %x", i, st, got, want)
			}
		}
	}
}

// oldDecodeUser is DecodeUserID and DecodeUserStats as of 87d3b2c
// (LookupErr per field).
func oldDecodeUser(doc bson.Raw) (name string, u UserStats, ok bool, err error) {
	if err = validate(CollUser, doc); err == nil {
		v, present := lookup(doc, "_id")
		if !present {
			err = malformed(CollUser, doc, "_id", "missing")
		} else if s, sok := v.StringValueOK(); !sok {
			err = malformed(CollUser, doc, "_id", "want a string, have BSON %s", v.Type)
		} else {
			name = s
		}
	}
	u, ok = func() (u UserStats, ok bool) {
		if checkBytes(doc) != nil {
			return u, false
		}
		field := func(key string) (bson.RawValue, bool) {
			v, err := doc.LookupErr(key)
			if err != nil || v.Type == bson.TypeNull {
				return bson.RawValue{}, false
			}
			return v, true
		}
		if v, present := field(FieldSubmission); present {
			if u.Submission, ok = intValue(v); !ok {
				return u, false
			}
		}
		if v, present := field(FieldACSubmission); present {
			if u.ACSubmission, ok = intValue(v); !ok {
				return u, false
			}
		}
		u.ACProblemIDs = []int64{}
		v, present := field(FieldACProblemIDs)
		if !present {
			return u, true
		}
		arr, ok := v.ArrayOK()
		if !ok {
			return u, false
		}
		vals, err := arr.Values()
		if err != nil {
			return u, false
		}
		u.ACProblemIDs = make([]int64, len(vals))
		for i, x := range vals {
			if u.ACProblemIDs[i], ok = intValue(x); !ok {
				return u, false
			}
		}
		return u, true
	}()
	return name, u, ok, err
}

// TestDecodeUserSameAsOld: the one-walk DecodeUser reads what the
// previous per-field lookups read (not only what today's DecodeUserID and
// DecodeUserStats, which now share its walk, read).
func TestDecodeUserSameAsOld(t *testing.T) {
	b := func() *bsoncore.DocumentBuilder { return bsoncore.NewDocumentBuilder() }
	arr := bsoncore.NewArrayBuilder().AppendInt32(1).AppendDouble(2).AppendInt64(1 << 40).Build()
	docs := [][]byte{
		b().AppendString("_id", "a").AppendInt32(FieldSubmission, 3).AppendInt32(FieldSubmission, 4).AppendInt64(FieldACSubmission, 1).AppendArray(FieldACProblemIDs, arr).Build(),
		b().AppendNull("_id").AppendString("_id", "b").Build(),
		b().AppendString("_id", "a").AppendNull(FieldSubmission).AppendInt32(FieldSubmission, 9).Build(),
		b().AppendString("_id", "a").AppendArray(FieldACProblemIDs, bsoncore.NewArrayBuilder().AppendString("x").Build()).Build(),
		b().AppendString("_id", "a").AppendDouble(FieldACSubmission, 1.5).Build(),
		b().AppendString("_id", "a").AppendDouble(FieldACSubmission, 2).AppendDocument(FieldACProblemIDs, bsoncore.NewDocumentBuilder().AppendInt32("0", 1).Build()).Build(),
		b().AppendString("_id", "a").AppendArray(FieldACProblemIDs, []byte{4, 0, 0, 0}).Build(),
		b().AppendString("_id", "a").AppendArray(FieldACProblemIDs, []byte{7, 0, 0, 0, 0x10, 'x', 0}).Build(),
		b().AppendInt32("_id", 1).Build(),
		b().Build(),
		{5, 0, 0, 0},
		{7, 0, 0, 0, 2, 'x', 0},
		append(b().AppendString("_id", "t").Build(), 1, 2, 3),
	}
	for _, doc := range docs {
		name, st, ok, err := DecodeUser(doc)
		wName, wSt, wOK, wErr := oldDecodeUser(doc)
		if name != wName || (err == nil) != (wErr == nil) || (err != nil && err.Error() != wErr.Error()) {
			t.Errorf("%x: DecodeUser name %q, %v; old %q, %v", doc, name, err, wName, wErr)
		}
		if ok != wOK || (ok && (st.Submission != wSt.Submission || st.ACSubmission != wSt.ACSubmission ||
			fmt.Sprint(st.ACProblemIDs) != fmt.Sprint(wSt.ACProblemIDs) || (st.ACProblemIDs == nil) != (wSt.ACProblemIDs == nil))) {
			t.Errorf("%x: DecodeUser stats %+v, %v; old %+v, %v", doc, st, ok, wSt, wOK)
		}
	}
}

// TestAppendPatchedUserAllocs: the patch allocates nothing beyond dst,
// whatever the document's keys (a key over 32 bytes made string(key)
// allocate on HEAD).
func TestAppendPatchedUserAllocs(t *testing.T) {
	doc := bson.Raw(bsoncore.NewDocumentBuilder().AppendString("_id", "u").
		AppendInt32("a key longer than thirty-two bytes, as users may have", 1).AppendInt32(FieldSubmission, 3).Build())
	st := UserStats{Submission: 1, ACProblemIDs: []int64{1, 2, 3}}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf, _ = AppendPatchedUser(buf[:0], doc, st) }); n != 0 {
		t.Errorf("AppendPatchedUser: %v allocations per call, want 0", n)
	}
}
