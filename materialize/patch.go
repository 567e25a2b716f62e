package materialize

import (
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// PatchUser returns a copy of user document doc with the derived fields set
// to st, with the effect of MongoDB's $set of those three paths: an existing
// field is replaced in place, a missing one appended. Every other element
// is copied byte for byte.
func PatchUser(doc bson.Raw, st UserStats) (bson.Raw, error) {
	return AppendPatchedUser(nil, doc, st)
}

// AppendPatchedUser appends PatchUser(doc, st) to dst, allocating nothing
// beyond dst's growth (a rebuild writes every user that drifted).
func AppendPatchedUser(dst []byte, doc bson.Raw, st UserStats) ([]byte, error) {
	if err := checkBytes(doc); err != nil {
		return nil, fmt.Errorf("patch user: %w", err)
	}
	// The derived fields by index: FieldSubmission, FieldACSubmission,
	// FieldACProblemIDs, appended in that order when missing.
	var seen [3]bool
	// appendField appends field i with its value in st, encoded as
	// UserStats.Fields holds it (intBSON for the counts).
	appendField := func(out []byte, i int) []byte {
		switch i {
		case 0:
			return appendIntElement(out, FieldSubmission, st.Submission)
		case 1:
			return appendIntElement(out, FieldACSubmission, st.ACSubmission)
		}
		aidx, out := bsoncore.AppendArrayElementStart(out, FieldACProblemIDs)
		var key [20]byte
		for j, p := range st.ACProblemIDs {
			out = appendIntElementKey(out, strconv.AppendInt(key[:0], int64(j), 10), p)
		}
		out, _ = bsoncore.AppendArrayEnd(out, aidx)
		return out
	}
	idx, out := bsoncore.AppendDocumentStart(dst)
	length, _, _ := bsoncore.ReadLength(doc) // checked above
	for rem := doc[4 : length-1]; len(rem) > 0; {
		_, key, _, rest, _ := nextElement(rem) // checked above
		el := rem[:len(rem)-len(rest)]
		rem = rest
		// The first element of a derived field is replaced, as $set
		// does; a later duplicate is copied.
		// A switch on string(key) does not allocate (slices.Index of the
		// names did for a key over 32 bytes).
		i := -1
		switch string(key) {
		case FieldSubmission:
			i = 0
		case FieldACSubmission:
			i = 1
		case FieldACProblemIDs:
			i = 2
		}
		if i >= 0 && !seen[i] {
			seen[i] = true
			out = appendField(out, i)
			continue
		}
		out = append(out, el...)
	}
	for i := range seen {
		if !seen[i] {
			out = appendField(out, i)
		}
	}
	return bsoncore.AppendDocumentEnd(out, idx)
}

// PatchHomework returns a copy of homework document doc in which every
// existing entry studentStatus.<user>.<problemKey> named in entries is
// replaced by its derived value. Entries that do not exist are not added
// (the materializer never adds or removes studentStatus keys). Every other
// byte is copied unchanged. changed reports whether any entry differed.
func PatchHomework(doc bson.Raw, entries map[string]map[string]Entry) (out bson.Raw, changed bool, err error) {
	if err := checkBytes(doc); err != nil {
		return nil, false, fmt.Errorf("patch homework: %w", err)
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, false, fmt.Errorf("patch homework %s: %w", docID(doc), err)
	}
	idx, buf := bsoncore.AppendDocumentStart(make([]byte, 0, len(doc)+len(doc)/4))
	for _, el := range elems {
		ss, isDoc := el.Value().DocumentOK()
		if el.Key() != FieldStudentStatus || !isDoc {
			buf = append(buf, el...)
			continue
		}
		users, err := ss.Elements()
		if err != nil {
			return nil, false, fmt.Errorf("patch homework %s: studentStatus: %w", docID(doc), err)
		}
		uidx, b := bsoncore.AppendDocumentElementStart(buf, FieldStudentStatus)
		for _, ue := range users {
			want, ok := entries[ue.Key()]
			ud, isDoc := ue.Value().DocumentOK()
			if !ok || !isDoc {
				b = append(b, ue...)
				continue
			}
			probs, err := ud.Elements()
			if err != nil {
				return nil, false, fmt.Errorf("patch homework %s: studentStatus.%s: %w", docID(doc), ue.Key(), err)
			}
			pidx, bb := bsoncore.AppendDocumentElementStart(b, ue.Key())
			for _, pe := range probs {
				e, ok := want[pe.Key()]
				if !ok || e.MatchesStored(pe.Value()) {
					bb = append(bb, pe...)
					continue
				}
				changed = true
				v, err := bson.Marshal(e.Doc())
				if err != nil {
					return nil, false, err
				}
				bb = bsoncore.AppendDocumentElement(bb, pe.Key(), v)
			}
			if b, err = bsoncore.AppendDocumentEnd(bb, pidx); err != nil {
				return nil, false, err
			}
		}
		if buf, err = bsoncore.AppendDocumentEnd(b, uidx); err != nil {
			return nil, false, err
		}
	}
	buf, err = bsoncore.AppendDocumentEnd(buf, idx)
	return buf, changed, err
}

// appendIntElementKey is appendIntElement with the key as bytes.
func appendIntElementKey(dst, key []byte, n int64) []byte {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		dst = append(dst, byte(bson.TypeInt32))
		dst = append(append(dst, key...), 0)
		return bsoncore.AppendInt32(dst, int32(n))
	}
	dst = append(dst, byte(bson.TypeInt64))
	dst = append(append(dst, key...), 0)
	return bsoncore.AppendInt64(dst, n)
}
