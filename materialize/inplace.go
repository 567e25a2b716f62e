package materialize

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// MaxDocumentSize is MongoDB's largest document, in bytes (16 MiB,
// BSONObjMaxUserSize): the server refuses an update that grows a document
// past it, and mongorestore refuses to restore a larger one.
const MaxDocumentSize = 16 * 1024 * 1024

// MatchesStored reports whether the stored value v already equals e, in
// which case writing e is skipped. It compares in place in v's bytes,
// without decoding or allocating, with the result of DecodeEntry followed
// by Equal: v must be a document of exactly the derived keys, each once,
// with the derived types.
func (e Entry) MatchesStored(v bson.RawValue) bool {
	if v.Type != bson.TypeEmbeddedDocument {
		return false
	}
	return e.matchesDocument(v.Value)
}

func (e Entry) matchesDocument(doc []byte) bool {
	length, rem, ok := bsoncore.ReadLength(doc)
	if !ok || length < 5 || int(length) > len(doc) || doc[length-1] != 0 {
		return false
	}
	rem = rem[:length-5]
	var haveScore, haveStatus, haveIDs, haveRaw bool
	for len(rem) > 0 {
		var t bson.Type
		var key, data []byte
		if t, key, data, rem, ok = nextElement(rem); !ok {
			return false
		}
		val := bson.RawValue{Type: t, Value: data}
		switch string(key) {
		case "score":
			n, ok := intValue(val)
			if !ok || haveScore || n != e.Score {
				return false
			}
			haveScore = true
		case "problemStatus":
			if haveStatus {
				return false
			}
			haveStatus = true
			if val.Type == bson.TypeNull {
				if e.HasStatus {
					return false
				}
				continue
			}
			n, ok := intValue(val)
			if !ok || !e.HasStatus || n != e.ProblemStatus {
				return false
			}
		case "submissionIds":
			if haveIDs || val.Type != bson.TypeArray || !e.matchesIDs(val.Value) {
				return false
			}
			haveIDs = true
		case "rawScore":
			n, ok := intValue(val)
			if !ok || haveRaw || !e.HasRaw || n != e.RawScore {
				return false
			}
			haveRaw = true
		default:
			return false
		}
	}
	return haveScore && haveStatus && haveIDs && haveRaw == e.HasRaw
}

// matchesIDs compares an array of strings with e.SubmissionIDs.
func (e Entry) matchesIDs(arr []byte) bool {
	length, rem, ok := bsoncore.ReadLength(arr)
	if !ok || length < 5 || int(length) > len(arr) || arr[length-1] != 0 {
		return false
	}
	rem = rem[:length-5]
	i := 0
	for len(rem) > 0 {
		var t bson.Type
		var data []byte
		if t, _, data, rem, ok = nextElement(rem); !ok {
			return false
		}
		s, ok := stringBytes(bson.RawValue{Type: t, Value: data})
		if !ok || i >= len(e.SubmissionIDs) || string(s) != e.SubmissionIDs[i] {
			return false
		}
		i++
	}
	return i == len(e.SubmissionIDs)
}

// AppendBSON appends the entry as the BSON document Doc returns (the same
// bytes bson.Marshal(e.Doc()) gives) to dst.
func (e Entry) AppendBSON(dst []byte) []byte {
	idx, dst := bsoncore.AppendDocumentStart(dst)
	dst = appendIntElement(dst, "score", e.Score)
	if e.HasStatus {
		dst = appendIntElement(dst, "problemStatus", e.ProblemStatus)
	} else {
		dst = bsoncore.AppendNullElement(dst, "problemStatus")
	}
	aidx, dst := bsoncore.AppendArrayElementStart(dst, "submissionIds")
	var key [20]byte
	for i, id := range e.SubmissionIDs {
		dst = append(dst, byte(bson.TypeString))
		dst = append(dst, strconv.AppendInt(key[:0], int64(i), 10)...)
		dst = append(dst, 0)
		dst = bsoncore.AppendString(dst, id)
	}
	dst, _ = bsoncore.AppendArrayEnd(dst, aidx)
	if e.HasRaw {
		dst = appendIntElement(dst, "rawScore", e.RawScore)
	}
	dst, _ = bsoncore.AppendDocumentEnd(dst, idx)
	return dst
}

// EncodedSize is len(e.AppendBSON(nil)), computed without encoding.
func (e Entry) EncodedSize() int {
	n := 4 + 1 // length, terminator
	n += intElementSize("score", e.Score)
	if e.HasStatus {
		n += intElementSize("problemStatus", e.ProblemStatus)
	} else {
		n += 1 + len("problemStatus") + 1
	}
	n += 1 + len("submissionIds") + 1 + 4 + 1
	for i, id := range e.SubmissionIDs {
		n += 1 + decimalLen(i) + 1 + 4 + len(id) + 1
	}
	if e.HasRaw {
		n += intElementSize("rawScore", e.RawScore)
	}
	return n
}

func intElementSize(key string, v int64) int {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		return 1 + len(key) + 1 + 4
	}
	return 1 + len(key) + 1 + 8
}

func decimalLen(i int) int {
	n := 1
	for i >= 10 {
		i /= 10
		n++
	}
	return n
}

// appendIntElement appends n as pymongo encodes a Python int (intBSON).
func appendIntElement(dst []byte, key string, n int64) []byte {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return bsoncore.AppendInt32Element(dst, key, int32(n))
	}
	return bsoncore.AppendInt64Element(dst, key, n)
}

// EntryLookup returns the derived value of studentStatus.<user>.<problemKey>
// when it is to be written (the caller found it drifted); the byte slices
// are valid only during the call.
type EntryLookup func(user, problemKey []byte) (Entry, bool)

// PatchEntries is PatchHomework for a caller holding the drifted entries
// in its own structure: it appends to dst a copy of homework document doc
// in which every existing entry for which lookup returns a value, and whose
// stored value differs from it, is replaced; every other byte is copied.
// Nothing is allocated beyond dst's growth.
func PatchEntries(dst []byte, doc bson.Raw, lookup EntryLookup) ([]byte, error) {
	if err := checkBytes(doc); err != nil {
		return nil, fmt.Errorf("patch homework: %w", err)
	}
	idx, out := bsoncore.AppendDocumentStart(dst)
	rem := doc[4 : len(doc)-1]
	for len(rem) > 0 {
		el, next, _ := bsoncore.ReadElement(rem) // checked above
		rem = next
		key, _ := el.KeyBytesErr()
		if !bytes.Equal(key, []byte(FieldStudentStatus)) || bson.Type(el[0]) != bson.TypeEmbeddedDocument {
			out = append(out, el...)
			continue
		}
		var err error
		if out, err = patchStudentStatus(out, el[len(key)+2:], lookup); err != nil {
			return nil, fmt.Errorf("patch homework %s: %w", docID(doc), err)
		}
	}
	return bsoncore.AppendDocumentEnd(out, idx)
}

// patchStudentStatus appends the studentStatus element whose document is
// ss, patched.
func patchStudentStatus(out, ss []byte, lookup EntryLookup) ([]byte, error) {
	uidx, out := bsoncore.AppendDocumentElementStart(out, FieldStudentStatus)
	users, err := elementsOf(ss)
	if err != nil {
		return nil, fmt.Errorf("studentStatus: %w", err)
	}
	var scratch []byte
	for len(users) > 0 {
		var ue bsoncore.Element
		ue, users, _ = bsoncore.ReadElement(users)
		user, _ := ue.KeyBytesErr()
		if bson.Type(ue[0]) != bson.TypeEmbeddedDocument {
			out = append(out, ue...)
			continue
		}
		probs, err := elementsOf(ue[len(user)+2:])
		if err != nil {
			return nil, fmt.Errorf("studentStatus.%s: %w", user, err)
		}
		out = append(out, ue[:len(user)+2]...) // type, key, NUL
		lenAt := int32(len(out))
		out = append(out, 0, 0, 0, 0)
		for len(probs) > 0 {
			var pe bsoncore.Element
			pe, probs, _ = bsoncore.ReadElement(probs)
			pk, _ := pe.KeyBytesErr()
			want, ok := lookup(user, pk)
			if ok {
				cv, _ := pe.ValueErr()
				ok = !want.MatchesStored(bson.RawValue{Type: bson.Type(cv.Type), Value: cv.Data})
			}
			if !ok {
				out = append(out, pe...)
				continue
			}
			out = append(out, byte(bson.TypeEmbeddedDocument))
			out = append(out, pk...)
			out = append(out, 0)
			scratch = want.AppendBSON(scratch[:0])
			out = append(out, scratch...)
		}
		out = append(out, 0)
		n := int32(len(out)) - lenAt
		out[lenAt], out[lenAt+1], out[lenAt+2], out[lenAt+3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	}
	return bsoncore.AppendDocumentEnd(out, uidx)
}

// ValueAt is a new value for the element at byte offset Elem of a homework
// document (the offset of its type byte): Value is a BSON document, e.g.
// Entry.AppendBSON's.
type ValueAt struct {
	Elem  int
	Value []byte
}

// PatchAt appends to dst a copy of homework document doc in which the
// value of each studentStatus.<user>.<problemKey> element at the offset of
// one of at (sorted by Elem, each once) is replaced by that Value, as an
// embedded document; every other byte is copied, and the lengths of the
// enclosing documents follow. It is the positional form of PatchEntries
// for a caller that indexed the entries' offsets (the offline path): it
// matches no keys and compares nothing, so it allocates nothing beyond
// dst's growth. An offset naming no entry element of doc is an error, and
// so is a malformed studentStatus or studentStatus.<user> document (as in
// PatchEntries); dst is then not returned.
func PatchAt(dst []byte, doc bson.Raw, at []ValueAt) ([]byte, error) {
	if err := checkBytes(doc); err != nil {
		return nil, fmt.Errorf("patch homework: %w", err)
	}
	length, _, _ := bsoncore.ReadLength(doc) // checked above
	idx, out := bsoncore.AppendDocumentStart(dst)
	for rem := doc[4 : length-1]; len(rem) > 0; {
		t, key, val, rest, _ := nextElement(rem) // checked above
		el := rem[:len(rem)-len(rest)]
		if t != bson.TypeEmbeddedDocument || string(key) != FieldStudentStatus {
			out = append(out, el...)
			rem = rest
			continue
		}
		// The users and entries of this studentStatus, with their
		// offsets in doc.
		out = append(out, el[:len(key)+2]...) // type, key, NUL
		uidx := len(out)
		out = append(out, 0, 0, 0, 0)
		base := int(length) - 1 - len(rem) + len(key) + 2 + 4 // offset of the first user element
		// The nested documents are not checked by checkBytes (Raw.Validate
		// reads only their lengths): a malformed one is an error, as in
		// PatchEntries, not a slice out of range or an endless walk.
		// Their elements are checked by the walk itself.
		users, err := innerElements(val)
		if err != nil {
			return nil, fmt.Errorf("patch homework %s: studentStatus: %w", docID(doc), err)
		}
		for off := base; len(users) > 0; {
			ut, ukey, uval, urest, ok := nextElement(users)
			if !ok {
				return nil, fmt.Errorf("patch homework %s: studentStatus: bad element", docID(doc))
			}
			uel := users[:len(users)-len(urest)]
			if ut != bson.TypeEmbeddedDocument {
				out = append(out, uel...)
			} else {
				out = append(out, uel[:len(ukey)+2]...)
				pidx := len(out)
				out = append(out, 0, 0, 0, 0)
				poff := off + len(ukey) + 2 + 4
				probs, err := innerElements(uval)
				if err != nil {
					return nil, fmt.Errorf("patch homework %s: studentStatus.%s: %w", docID(doc), ukey, err)
				}
				for len(probs) > 0 {
					_, pkey, _, prest, ok := nextElement(probs)
					if !ok {
						return nil, fmt.Errorf("patch homework %s: studentStatus.%s: bad element", docID(doc), ukey)
					}
					pel := probs[:len(probs)-len(prest)]
					if len(at) > 0 && at[0].Elem == poff {
						out = append(out, byte(bson.TypeEmbeddedDocument))
						out = append(out, pkey...)
						out = append(out, 0)
						out = append(out, at[0].Value...)
						at = at[1:]
					} else {
						out = append(out, pel...)
					}
					poff += len(pel)
					probs = prest
				}
				out = append(out, 0)
				putLength(out[pidx:], len(out)-pidx)
			}
			off += len(uel)
			users = urest
		}
		out = append(out, 0)
		putLength(out[uidx:], len(out)-uidx)
		rem = rest
	}
	if len(at) > 0 {
		return nil, fmt.Errorf("patch homework %s: offset %d is not an entry of studentStatus (or offsets not sorted)", docID(doc), at[0].Elem)
	}
	return bsoncore.AppendDocumentEnd(out, int32(idx))
}

// innerElements returns the element bytes of v, a document value as
// nextElement returns it (its declared length is len(v)): the walk over
// them checks each element itself (nextElement's ok), so only the frame
// is checked here, in place of elementsOf's second pass.
func innerElements(v []byte) ([]byte, error) {
	if len(v) < 5 || v[len(v)-1] != 0 {
		return nil, fmt.Errorf("bad document length")
	}
	return v[4 : len(v)-1], nil
}

// putLength writes n as a BSON length at b[0:4].
func putLength(b []byte, n int) {
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
}

// elementsOf returns the element bytes of document doc (between its
// length and its terminator), checked to be well formed.
func elementsOf(doc []byte) ([]byte, error) {
	length, _, ok := bsoncore.ReadLength(doc)
	if !ok || length < 5 || int(length) > len(doc) || doc[length-1] != 0 {
		return nil, fmt.Errorf("bad document length")
	}
	body := doc[4 : length-1]
	for rem := body; len(rem) > 0; {
		var el bsoncore.Element
		el, rem, ok = bsoncore.ReadElement(rem)
		if !ok {
			return nil, fmt.Errorf("bad element")
		}
		if _, err := el.KeyBytesErr(); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// LastValue returns the value of the last top-level element of document
// doc named key (the one a map built from its elements would hold),
// without allocating; false when there is none. doc is read up to the
// first unreadable element (a validated document has none).
func LastValue(doc []byte, key string) (bson.RawValue, bool) {
	var out bson.RawValue
	found := false
	EachElement(doc, func(t bson.Type, k, v []byte) {
		if string(k) == key {
			out, found = bson.RawValue{Type: t, Value: v}, true
		}
	})
	return out, found
}
