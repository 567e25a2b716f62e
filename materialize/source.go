package materialize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Collection names of Back-End's documents (mongoengine's defaults for the
// Document classes in mongo/engine.py).
const (
	CollSubmission = "submission"
	CollHomework   = "homework"
	CollProblem    = "problem"
	CollUser       = "user"
)

// Status codes of a submission (Back-End mongo/submission.py).
const (
	StatusPending = -1 // queued for judging
	StatusCreated = -2 // created, no code yet; also the default when missing
	StatusAC      = 0
)

// LanguageHandwritten is Submission.language (stored as languageType) of a
// handwritten submission; such submissions never touch studentStatus.
const LanguageHandwritten = 3

// DefaultPenalty is Homework.penalty's mongoengine default, which applies
// when the stored field is missing or null.
const DefaultPenalty = "score = 0"

// DefaultEnd is Duration.end's default, datetime(2111, 10, 10) stored as
// UTC, in milliseconds since the Unix epoch.
var DefaultEnd = time.Date(2111, 10, 10, 0, 0, 0, 0, time.UTC).UnixMilli()

// DecodeError reports a source document the materializer cannot read:
// a required field is missing or a field has a BSON type Back-End's schema
// does not allow. It names the collection, the document's _id (as Extended
// JSON, or "?" when _id itself is unreadable) and the dotted field path.
type DecodeError struct {
	Collection string
	ID         string
	Field      string
	Reason     string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("malformed %s %s: field %q: %s", e.Collection, e.ID, e.Field, e.Reason)
}

// Unreadable reports whether the document's bytes themselves are corrupt
// (rather than a field missing or of the wrong type).
func (e *DecodeError) Unreadable() bool { return e.Field == wholeDocument }

// ErrMalformed is matched by every *DecodeError through errors.Is.
var ErrMalformed = errors.New("malformed source document")

// Is makes errors.Is(err, ErrMalformed) true for decode errors.
func (e *DecodeError) Is(target error) bool { return target == ErrMalformed }

// Submission is the part of a Back-End submission document the derivation
// reads (engine.Submission: _id, user, problem, languageType, timestamp,
// status, score).
type Submission struct {
	ID          bson.ObjectID
	User        string
	Problem     int64
	Handwritten bool  // languageType == 3
	Timestamp   int64 // milliseconds since the Unix epoch (BSON datetime)
	Status      int64 // -2 when missing or null (mongoengine default)
	Score       int64 // -1 when missing or null (mongoengine default)
}

// Judged reports whether s counts in the derivation: finish_judging has run
// for it (its status is neither pending (-1) nor created (-2)), or it is a
// rejudge in flight.
//
// A rejudge in flight is status -1 with a score >= 0: Back-End's
// Submission.rejudge (mongo/submission.py) sets status = -1 and tasks = []
// but keeps the score, while a submission that was never judged has
// score -1 (its default). Counting it keeps the user's counts, its place in
// submissionIds and its homework score stable while the sandbox re-judges;
// its status -1 is what problemStatus shows meanwhile (the value Back-End
// itself writes for a handwritten re-submission). See "Rejudge in flight" in
// docs/derivation-spec.md.
func (s *Submission) Judged() bool {
	switch s.Status {
	case StatusCreated:
		return false
	case StatusPending:
		return s.Score >= 0
	}
	return true
}

// Before orders submissions by (timestamp, _id) ascending, the order in
// which the derivation replays them.
func (s *Submission) Before(t *Submission) bool {
	if s.Timestamp != t.Timestamp {
		return s.Timestamp < t.Timestamp
	}
	return bytes.Compare(s.ID[:], t.ID[:]) < 0
}

// Problem is the part of a Back-End problem document the derivation reads:
// its problemId (_id) and the homeworks listing it, in stored order.
type Problem struct {
	ID        int64
	Homeworks []bson.ObjectID
}

// Homework is the part of a Back-End homework document the derivation
// reads: the deadline, the penalty program and which studentStatus entries
// exist. Entry values are not read: they are derived.
type Homework struct {
	ID      bson.ObjectID
	End     int64  // duration.end in ms since the Unix epoch
	Penalty string // the penalty program text
	// Students maps username → set of problem keys (decimal strings as
	// Back-End writes them) that have an entry.
	Students map[string]map[string]struct{}
	// Skipped lists parts of studentStatus that could not be read
	// (a user's value that is not a document); they hold no entries.
	Skipped []*DecodeError
}

// HasEntry reports whether studentStatus[user][str(problem)] exists.
func (h *Homework) HasEntry(user string, problem int64) bool {
	var buf [20]byte
	_, ok := h.Students[user][string(strconv.AppendInt(buf[:0], problem, 10))]
	return ok
}

// ProblemKey is str(problemId): the studentStatus key Back-End uses.
func ProblemKey(problem int64) string { return strconv.FormatInt(problem, 10) }

// ParseProblemKey inverts ProblemKey. It accepts only the canonical form
// str(int) produces, since only that form is ever looked up.
func ParseProblemKey(key string) (int64, bool) {
	p, err := strconv.ParseInt(key, 10, 64)
	// Canonical form checked in a stack buffer: Finish parses every
	// stored key, and FormatInt would allocate a string for each.
	var buf [20]byte
	if err != nil || string(strconv.AppendInt(buf[:0], p, 10)) != key {
		return 0, false
	}
	return p, true
}

// wholeDocument is the Field of a DecodeError about the document itself
// (corrupt bytes) rather than one of its fields.
const wholeDocument = "(document)"

// validate reports corrupt bytes as a DecodeError.
func validate(coll string, doc bson.Raw) error {
	if err := checkBytes(doc); err != nil {
		return &DecodeError{Collection: coll, ID: "?", Field: wholeDocument, Reason: fmt.Sprintf("unreadable document: %v", err)}
	}
	return nil
}

// checkBytes validates doc, and also that no top-level element runs past
// the document's declared length, which bson.Raw.Validate lets through.
func checkBytes(doc bson.Raw) error {
	if err := doc.Validate(); err != nil {
		return err
	}
	return scanFields(doc, func([]byte, bson.RawValue) {})
}

// docID renders a document's _id for error messages.
func docID(doc bson.Raw) string {
	v, err := doc.LookupErr("_id")
	if err != nil {
		return "?"
	}
	return v.String()
}

func malformed(coll string, doc bson.Raw, field, format string, args ...any) *DecodeError {
	return &DecodeError{Collection: coll, ID: docID(doc), Field: field, Reason: fmt.Sprintf(format, args...)}
}

// lookup returns the value at key and whether it is present and not null.
func lookup(doc bson.Raw, key ...string) (bson.RawValue, bool) {
	v, err := doc.LookupErr(key...)
	if err != nil || v.Type == bson.TypeNull {
		return bson.RawValue{}, false
	}
	return v, true
}

// IntValue reads a BSON number as an integer: int32, int64 or a double
// holding a whole value in int64 range all mean the same value (as
// mongoengine's IntField loads them); anything else is not an integer.
func IntValue(v bson.RawValue) (int64, bool) { return intValue(v) }

func intValue(v bson.RawValue) (int64, bool) {
	// The little-endian bytes are read directly (RawValue.Int32 and kin
	// convert through bsoncore and panic on short data; this is the
	// hottest read of a rebuild).
	switch v.Type {
	case bson.TypeInt32:
		if len(v.Value) < 4 {
			return 0, false
		}
		return int64(int32(binary.LittleEndian.Uint32(v.Value))), true
	case bson.TypeInt64:
		if len(v.Value) < 8 {
			return 0, false
		}
		return int64(binary.LittleEndian.Uint64(v.Value)), true
	case bson.TypeDouble:
		if len(v.Value) < 8 {
			return 0, false
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(v.Value))
		if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

func objectIDField(coll string, doc bson.Raw) (bson.ObjectID, error) {
	v, ok := lookup(doc, "_id")
	if !ok {
		return bson.ObjectID{}, malformed(coll, doc, "_id", "missing")
	}
	id, ok := v.ObjectIDOK()
	if !ok {
		return bson.ObjectID{}, malformed(coll, doc, "_id", "want an ObjectId, have BSON %s", v.Type)
	}
	return id, nil
}

// DecodeSubmission reads a submission document. user, problem and
// timestamp are required (a submission without them contributes nothing);
// languageType, status and score take mongoengine's defaults when missing
// or null. Errors are *DecodeError. The document is walked once (the
// rebuild decodes every submission), the first occurrence of a key
// winning as with Lookup.
func DecodeSubmission(doc bson.Raw) (Submission, error) {
	return DecodeSubmissionInterned(doc, nil)
}

// DecodeSubmissionInterned is DecodeSubmission with the user name taken
// from intern (given the name's bytes, valid only during the call), so a
// caller reading millions of submissions of a few thousand users can share
// one string per user instead of allocating one per submission. A nil
// intern allocates.
func DecodeSubmissionInterned(doc bson.Raw, intern func([]byte) string) (Submission, error) {
	const c = CollSubmission
	var s Submission
	var id, user, prob, ts, lang, status, score bson.RawValue
	length, rem, ok := bsoncore.ReadLength(doc)
	if !ok || int(length) > len(doc) || length < 5 {
		return s, malformed(c, doc, wholeDocument, "unreadable document: bad document length")
	}
	rem = rem[:length-5]
	for len(rem) > 0 {
		t, key, val, rest, ok := nextElement(rem)
		if !ok {
			return s, malformed(c, doc, wholeDocument, "unreadable document: bad element")
		}
		rem = rest
		var slot *bson.RawValue
		switch string(key) {
		case "_id":
			slot = &id
		case "user":
			slot = &user
		case "problem":
			slot = &prob
		case "timestamp":
			slot = &ts
		case "languageType":
			slot = &lang
		case "status":
			slot = &status
		case "score":
			slot = &score
		default:
			continue
		}
		if slot.Type == 0 {
			*slot = bson.RawValue{Type: t, Value: val}
		}
	}
	present := func(v bson.RawValue) bool { return v.Type != 0 && v.Type != bson.TypeNull }
	if !present(id) {
		return s, malformed(c, doc, "_id", "missing")
	}
	if s.ID, ok = id.ObjectIDOK(); !ok {
		return s, malformed(c, doc, "_id", "want an ObjectId, have BSON %s", id.Type)
	}
	if !present(user) {
		return s, malformed(c, doc, "user", "missing")
	}
	if name, ok := stringBytes(user); !ok {
		return s, malformed(c, doc, "user", "want a string, have BSON %s", user.Type)
	} else if intern != nil {
		s.User = intern(name)
	} else {
		s.User = string(name)
	}
	if !present(prob) {
		return s, malformed(c, doc, "problem", "missing")
	}
	if s.Problem, ok = intValue(prob); !ok {
		return s, malformed(c, doc, "problem", "want an integer, have BSON %s", prob.Type)
	}
	if !present(ts) {
		return s, malformed(c, doc, "timestamp", "missing")
	}
	if s.Timestamp, ok = ts.DateTimeOK(); !ok {
		return s, malformed(c, doc, "timestamp", "want a date, have BSON %s", ts.Type)
	}
	optional := func(field string, v bson.RawValue, def int64) (int64, error) {
		if !present(v) {
			return def, nil
		}
		n, ok := intValue(v)
		if !ok {
			return 0, malformed(c, doc, field, "want an integer, have BSON %s", v.Type)
		}
		return n, nil
	}
	l, err := optional("languageType", lang, 0)
	if err != nil {
		return s, err
	}
	s.Handwritten = l == LanguageHandwritten
	if s.Status, err = optional("status", status, StatusCreated); err != nil {
		return s, err
	}
	if s.Score, err = optional("score", score, -1); err != nil {
		return s, err
	}
	return s, nil
}

// stringBytes returns the bytes of a BSON string value without copying
// them, with the checks of bsoncore's readstring (bsoncore.go:743 in
// mongo-driver v2.10.0), which StringValueOK uses but which allocates.
func stringBytes(v bson.RawValue) ([]byte, bool) {
	if v.Type != bson.TypeString {
		return nil, false
	}
	l, rem, ok := bsoncore.ReadLength(v.Value)
	if !ok || len(v.Value[4:]) < int(l) || l <= 0 {
		return nil, false
	}
	return rem[:l-1], true
}

// scanFields calls fn for each top-level element of doc, without
// allocating (key is valid only during the call), or returns an error for
// a malformed document.
func scanFields(doc bson.Raw, fn func(key []byte, v bson.RawValue)) error {
	length, rem, ok := bsoncore.ReadLength(doc)
	if !ok || int(length) > len(doc) || length < 5 {
		return fmt.Errorf("bad document length")
	}
	rem = rem[:length-5]
	for len(rem) > 0 {
		var t bson.Type
		var key, val []byte
		if t, key, val, rem, ok = nextElement(rem); !ok {
			return fmt.Errorf("bad element")
		}
		fn(key, bson.RawValue{Type: t, Value: val})
	}
	return nil
}

// nextElement reads the first element of rem (the elements of a document
// between its length and its terminator): its type, key and value bytes,
// and the rest. It accepts exactly what bsoncore.ReadElement and
// Element.ValueErr accept (bsoncore.go:102 and valueLength at bsoncore.go:648
// in mongo-driver v2.10.0), in one pass over the key instead of three.
func nextElement(rem []byte) (t bson.Type, key, val, rest []byte, ok bool) {
	if len(rem) < 1 {
		return 0, nil, nil, rem, false
	}
	t = bson.Type(rem[0])
	// Keys are short: a plain loop beats IndexByte's call and setup.
	i := 1
	for i < len(rem) && rem[i] != 0 {
		i++
	}
	if i >= len(rem) {
		return 0, nil, nil, rem, false
	}
	key = rem[1:i]
	v := rem[i+1:]
	var n int64
	switch t {
	case bson.TypeInt32:
		n = 4
	case bson.TypeDateTime, bson.TypeDouble, bson.TypeInt64, bson.TypeTimestamp:
		n = 8
	case bson.TypeObjectID:
		n = 12
	case bson.TypeBoolean:
		n = 1
	case bson.TypeNull, bson.TypeUndefined, bson.TypeMinKey, bson.TypeMaxKey:
		n = 0
	case bson.TypeDecimal128:
		n = 16
	case bson.TypeString, bson.TypeJavaScript, bson.TypeSymbol, bson.TypeArray, bson.TypeEmbeddedDocument,
		bson.TypeCodeWithScope, bson.TypeBinary, bson.TypeDBPointer:
		if len(v) < 4 {
			return 0, nil, nil, rem, false
		}
		n = int64(int32(uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24))
		switch t {
		case bson.TypeString, bson.TypeJavaScript, bson.TypeSymbol:
			n += 4
		case bson.TypeBinary:
			n += 5
		case bson.TypeDBPointer:
			n += 16
		}
		// bsoncore adds the overhead in int32, so a sum past int32 wraps
		// negative and is refused there; ValueErr re-reads the length
		// prefix from the value's own bytes, so they must hold it.
		if n > math.MaxInt32 || n < 4 {
			return 0, nil, nil, rem, false
		}
	case bson.TypeRegex:
		r := bytes.IndexByte(v, 0)
		if r < 0 {
			return 0, nil, nil, rem, false
		}
		p := bytes.IndexByte(v[r+1:], 0)
		if p < 0 {
			return 0, nil, nil, rem, false
		}
		n = int64(r + 1 + p + 1)
	default:
		return 0, nil, nil, rem, false
	}
	if n < 0 || n > int64(len(v)) {
		return 0, nil, nil, rem, false
	}
	return t, key, v[:n], v[n:], true
}

// DecodeProblem reads a problem document: _id (the problemId) and the
// homeworks list (missing or null → empty). Errors are *DecodeError.
func DecodeProblem(doc bson.Raw) (Problem, error) {
	const c = CollProblem
	var p Problem
	if err := validate(c, doc); err != nil {
		return p, err
	}
	v, ok := lookup(doc, "_id")
	if !ok {
		return p, malformed(c, doc, "_id", "missing")
	}
	if p.ID, ok = intValue(v); !ok {
		return p, malformed(c, doc, "_id", "want an integer, have BSON %s", v.Type)
	}
	hv, ok := lookup(doc, "homeworks")
	if !ok {
		return p, nil
	}
	arr, ok := hv.ArrayOK()
	if !ok {
		return p, malformed(c, doc, "homeworks", "want an array, have BSON %s", hv.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return p, malformed(c, doc, "homeworks", "unreadable array: %v", err)
	}
	p.Homeworks = make([]bson.ObjectID, 0, len(vals))
	for i, e := range vals {
		id, ok := e.ObjectIDOK()
		if !ok {
			return p, malformed(c, doc, "homeworks."+strconv.Itoa(i), "want an ObjectId, have BSON %s", e.Type)
		}
		p.Homeworks = append(p.Homeworks, id)
	}
	return p, nil
}

// DecodeHomework reads a homework document: _id, duration.end (missing →
// 2111-10-10), penalty (missing or null → "score = 0") and the key sets of
// studentStatus (missing or null → no entries). A studentStatus that is not
// a document is an error; a single user's value that is not a document is
// recorded in Skipped and holds no entries. Errors are *DecodeError.
func DecodeHomework(doc bson.Raw) (Homework, error) {
	return decodeHomework(doc, nil, nil, true)
}

// BulkHomeworkDecoder decodes homework documents as DecodeHomework does,
// for a caller holding many of them that indexes their studentStatus
// entries itself (the offline path): Homework.Students stays nil, so such
// a Homework serves Deriver.PairIn and BulkDeriver.PairIn, not Pair or
// HasEntry.
type BulkHomeworkDecoder struct {
	// Intern, when set, gives the string of a studentStatus username
	// (from its bytes, valid only during the call), so that one string
	// per distinct name is shared.
	Intern func([]byte) string
	// User, when set, is called for every document-valued
	// studentStatus.<user>, in document order, with the bytes of that
	// document (a slice of doc), a duplicate key once per occurrence: the
	// caller lets the later one replace the earlier, as the key sets do.
	// The user documents are not checked inside.
	User func(user string, entries []byte)
}

// Decode is DecodeHomework without the key sets, with the decoder's
// options.
func (hd BulkHomeworkDecoder) Decode(doc bson.Raw) (Homework, error) {
	return decodeHomework(doc, hd.Intern, hd.User, false)
}

// decodeHomework is DecodeHomework, building the key sets when keySets is
// set; intern (nil: string(b)) and user are BulkHomeworkDecoder's.
func decodeHomework(doc bson.Raw, intern func([]byte) string, userFn func(user string, entries []byte), keySets bool) (Homework, error) {
	if intern == nil {
		intern = func(b []byte) string { return string(b) }
	}
	const c = CollHomework
	h := Homework{End: DefaultEnd, Penalty: DefaultPenalty}
	if err := validate(c, doc); err != nil {
		return h, err
	}
	var err error
	if h.ID, err = objectIDField(c, doc); err != nil {
		return h, err
	}
	if d, ok := lookup(doc, "duration"); ok {
		dd, ok := d.DocumentOK()
		if !ok {
			return h, malformed(c, doc, "duration", "want a document, have BSON %s", d.Type)
		}
		if e, ok := lookup(dd, "end"); ok {
			if h.End, ok = e.DateTimeOK(); !ok {
				return h, malformed(c, doc, "duration.end", "want a date, have BSON %s", e.Type)
			}
		}
	}
	if p, ok := lookup(doc, "penalty"); ok {
		if h.Penalty, ok = p.StringValueOK(); !ok {
			return h, malformed(c, doc, "penalty", "want a string, have BSON %s", p.Type)
		}
	}
	ss, ok := lookup(doc, "studentStatus")
	if !ok {
		return h, nil
	}
	ssd, ok := ss.DocumentOK()
	if !ok {
		return h, malformed(c, doc, "studentStatus", "want a document, have BSON %s", ss.Type)
	}
	// The document was validated whole above, so its elements read; they
	// are walked in place rather than through Elements (a slice per user).
	users := elementBytes(ssd)
	// Sized by a first walk (keys only): growing the map rehashes it
	// several times per homework.
	if keySets {
		n := 0
		for rem := users; len(rem) > 0; n++ {
			_, _, _, rest, ok := nextElement(rem)
			if !ok {
				break
			}
			rem = rest
		}
		h.Students = make(map[string]map[string]struct{}, n)
	}
	for len(users) > 0 {
		t, ukey, uval, rest, ok := nextElement(users)
		if !ok {
			return h, malformed(c, doc, "studentStatus", "unreadable document")
		}
		users = rest
		user := intern(ukey)
		if t != bson.TypeEmbeddedDocument {
			h.Skipped = append(h.Skipped, malformed(c, doc, "studentStatus."+user,
				"want a document, have BSON %s", t))
			continue
		}
		if !keySets {
			if userFn != nil {
				userFn(user, uval)
			}
			continue
		}
		probs := elementBytes(uval)
		set := make(map[string]struct{}, 8)
		for len(probs) > 0 {
			_, pkey, _, rest, ok := nextElement(probs)
			if !ok {
				break
			}
			probs = rest
			set[intern(pkey)] = struct{}{}
		}
		h.Students[user] = set
	}
	return h, nil
}

// EachElement calls fn with the type, key and value bytes of each
// top-level element of document doc, in order, without allocating (the
// slices alias doc). It stops at the first unreadable element, as the key
// sets and LastValue do. A validated top-level document has none, but
// validation (Raw.Validate, the decoders) reads only the length of a
// nested document: one may end early.
func EachElement(doc []byte, fn func(t bson.Type, key, val []byte)) {
	rem := elementBytes(doc)
	for len(rem) > 0 {
		t, k, v, rest, ok := nextElement(rem)
		if !ok {
			return
		}
		rem = rest
		fn(t, k, v)
	}
}

// ElementAt reads the element that starts at b[0] (b runs to the end of
// the enclosing document's elements or beyond): its type, key and value
// bytes, aliasing b; false when it is unreadable.
func ElementAt(b []byte) (t bson.Type, key, val []byte, ok bool) {
	t, key, val, _, ok = nextElement(b)
	return t, key, val, ok
}

// elementBytes returns the elements of a validated document: the bytes
// between its length and its terminator.
func elementBytes(doc []byte) []byte {
	if len(doc) < 5 {
		return nil
	}
	return doc[4 : len(doc)-1]
}

// DecodeUserID reads a user document's _id, the username (engine.User's
// primary key). Errors are *DecodeError.
func DecodeUserID(doc bson.Raw) (string, error) {
	if err := validate(CollUser, doc); err != nil {
		return "", err
	}
	return scanUser(doc).name(doc)
}
