package materialize

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Derived field names on Back-End's documents (mongo/engine.py).
const (
	FieldSubmission    = "submission"
	FieldACSubmission  = "AC_submission"
	FieldACProblemIDs  = "AC_problem_ids"
	FieldStudentStatus = "studentStatus"
)

// intBSON encodes n the way pymongo encodes a Python int: int32 when it
// fits, int64 otherwise, so derived values look like Back-End's own.
func intBSON(n int64) any {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// Doc returns the entry as the document Back-End stores, keys in the
// order Back-End creates them: score, problemStatus, submissionIds, then
// rawScore when present.
func (e Entry) Doc() bson.D {
	d := make(bson.D, 0, 4)
	d = append(d, bson.E{Key: "score", Value: intBSON(e.Score)})
	if e.HasStatus {
		d = append(d, bson.E{Key: "problemStatus", Value: intBSON(e.ProblemStatus)})
	} else {
		d = append(d, bson.E{Key: "problemStatus", Value: nil})
	}
	ids := e.SubmissionIDs
	if ids == nil {
		ids = []string{}
	}
	d = append(d, bson.E{Key: "submissionIds", Value: ids})
	if e.HasRaw {
		d = append(d, bson.E{Key: "rawScore", Value: intBSON(e.RawScore)})
	}
	return d
}

// Equal reports whether e and f are the same derived value.
func (e Entry) Equal(f Entry) bool {
	return e.Score == f.Score && e.HasStatus == f.HasStatus &&
		(!e.HasStatus || e.ProblemStatus == f.ProblemStatus) &&
		e.HasRaw == f.HasRaw && (!e.HasRaw || e.RawScore == f.RawScore) &&
		equalStrings(e.SubmissionIDs, f.SubmissionIDs)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DecodeEntry reads a stored entry value. ok is false when v is not a
// document of exactly the derived keys with the derived types (numbers of
// any BSON numeric type holding whole values, problemStatus null or a
// number, submissionIds an array of strings): such a value never equals a
// derived one and is overwritten.
func DecodeEntry(v bson.RawValue) (e Entry, ok bool) {
	doc, ok := v.DocumentOK()
	if !ok {
		return e, false
	}
	elems, err := doc.Elements()
	if err != nil {
		return e, false
	}
	var haveScore, haveStatus, haveIDs bool
	for _, el := range elems {
		val := el.Value()
		switch el.Key() {
		case "score":
			if e.Score, ok = intValue(val); !ok || haveScore {
				return e, false
			}
			haveScore = true
		case "problemStatus":
			if haveStatus {
				return e, false
			}
			haveStatus = true
			if val.Type == bson.TypeNull {
				continue
			}
			if e.ProblemStatus, ok = intValue(val); !ok {
				return e, false
			}
			e.HasStatus = true
		case "submissionIds":
			arr, ok := val.ArrayOK()
			if !ok || haveIDs {
				return e, false
			}
			haveIDs = true
			vals, err := arr.Values()
			if err != nil {
				return e, false
			}
			e.SubmissionIDs = make([]string, len(vals))
			for i, x := range vals {
				if e.SubmissionIDs[i], ok = x.StringValueOK(); !ok {
					return e, false
				}
			}
		case "rawScore":
			if e.RawScore, ok = intValue(val); !ok || e.HasRaw {
				return e, false
			}
			e.HasRaw = true
		default:
			return e, false
		}
	}
	return e, haveScore && haveStatus && haveIDs
}

// Fields returns the derived user fields as a $set document.
func (u UserStats) Fields() bson.D {
	ids := make(bson.A, len(u.ACProblemIDs))
	for i, p := range u.ACProblemIDs {
		ids[i] = intBSON(p)
	}
	return bson.D{
		{Key: FieldSubmission, Value: intBSON(u.Submission)},
		{Key: FieldACSubmission, Value: intBSON(u.ACSubmission)},
		{Key: FieldACProblemIDs, Value: ids},
	}
}

// Equal reports whether u and v are the same derived value.
func (u UserStats) Equal(v UserStats) bool {
	if u.Submission != v.Submission || u.ACSubmission != v.ACSubmission || len(u.ACProblemIDs) != len(v.ACProblemIDs) {
		return false
	}
	for i := range u.ACProblemIDs {
		if u.ACProblemIDs[i] != v.ACProblemIDs[i] {
			return false
		}
	}
	return true
}

// DecodeUserStats reads the stored derived fields of a user document. A
// field that is absent or null reads as mongoengine's default (0, 0, []):
// Back-End's User declares them IntField(default=0) and
// ListField(IntField(), default=list) without null=True (mongo/engine.py,
// class User), and mongoengine loads a missing or None value of such a
// field as its default (mongoengine/base/fields.py, BaseField.__set__).
// Documents from before 2020-01-01 lack all three, and
// Back-End's own updates can leave the AC_* fields absent, so an absent
// field is the default value, not drift. ok is false when doc is not a
// valid BSON document or a present field is not of a derived type (a
// number holding an integer; an array of such numbers).
func DecodeUserStats(doc bson.Raw) (u UserStats, ok bool) {
	if checkBytes(doc) != nil {
		return u, false
	}
	return scanUser(doc).stats()
}

// DecodeUser is DecodeUserID and DecodeUserStats with one validation and
// one walk of doc: err is DecodeUserID's, stats and ok DecodeUserStats'.
func DecodeUser(doc bson.Raw) (name string, stats UserStats, ok bool, err error) {
	if err := validate(CollUser, doc); err != nil {
		return "", stats, false, err
	}
	f := scanUser(doc)
	stats, ok = f.stats()
	name, err = f.name(doc)
	return name, stats, ok, err
}

// userDocFields are the first elements of a user document with the keys the
// derivation reads (what LookupErr would return); Type 0 when absent.
type userDocFields struct{ id, submission, acSubmission, acProblemIDs bson.RawValue }

// scanUser walks the validated document doc once.
func scanUser(doc bson.Raw) userDocFields {
	var f userDocFields
	_ = scanFields(doc, func(key []byte, v bson.RawValue) {
		var slot *bson.RawValue
		switch string(key) {
		case "_id":
			slot = &f.id
		case FieldSubmission:
			slot = &f.submission
		case FieldACSubmission:
			slot = &f.acSubmission
		case FieldACProblemIDs:
			slot = &f.acProblemIDs
		default:
			return
		}
		if slot.Type == 0 {
			*slot = v
		}
	})
	return f
}

// name is DecodeUserID's reading of the _id.
func (f userDocFields) name(doc bson.Raw) (string, error) {
	if f.id.Type == 0 || f.id.Type == bson.TypeNull {
		return "", malformed(CollUser, doc, "_id", "missing")
	}
	s, ok := f.id.StringValueOK()
	if !ok {
		return "", malformed(CollUser, doc, "_id", "want a string, have BSON %s", f.id.Type)
	}
	return s, nil
}

// stats is DecodeUserStats' reading of the derived fields: absent or null
// is the default.
func (f userDocFields) stats() (u UserStats, ok bool) {
	present := func(v bson.RawValue) bool { return v.Type != 0 && v.Type != bson.TypeNull }
	if v := f.submission; present(v) {
		if u.Submission, ok = intValue(v); !ok {
			return u, false
		}
	}
	if v := f.acSubmission; present(v) {
		if u.ACSubmission, ok = intValue(v); !ok {
			return u, false
		}
	}
	u.ACProblemIDs = []int64{}
	v := f.acProblemIDs
	if !present(v) {
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
}

// MatchesStored reports whether user document doc already holds u.
func (u UserStats) MatchesStored(doc bson.Raw) bool {
	v, ok := DecodeUserStats(doc)
	return ok && u.Equal(v)
}
