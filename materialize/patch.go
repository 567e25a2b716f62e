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
	if err := checkBytes(doc); err != nil {
		return nil, fmt.Errorf("patch user: %w", err)
	}
	// The values as st.Fields() holds them, encoded by hand (type byte,
	// then value bytes): the reflection-based encoder dominated a
	// rebuild's output of every user.
	order := []string{FieldSubmission, FieldACSubmission, FieldACProblemIDs}
	repl := map[string][]byte{
		FieldSubmission:   intValueBytes(st.Submission),
		FieldACSubmission: intValueBytes(st.ACSubmission),
		FieldACProblemIDs: idsValueBytes(st.ACProblemIDs),
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, fmt.Errorf("patch user %s: %w", docID(doc), err)
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
	out, err = bsoncore.AppendDocumentEnd(out, idx)
	return out, err
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

// intValueBytes is the type byte and value bytes of n as intBSON encodes it.
func intValueBytes(n int64) []byte {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return bsoncore.AppendInt32([]byte{byte(bson.TypeInt32)}, int32(n))
	}
	return bsoncore.AppendInt64([]byte{byte(bson.TypeInt64)}, n)
}

// idsValueBytes is the type byte and value bytes of an array of problem ids
// as UserStats.Fields encodes it.
func idsValueBytes(ids []int64) []byte {
	out := []byte{byte(bson.TypeArray)}
	idx, out := bsoncore.AppendArrayStart(out)
	for i, p := range ids {
		out = appendIntElement(out, strconv.Itoa(i), p)
	}
	out, _ = bsoncore.AppendArrayEnd(out, idx)
	return out
}
