// Package drift describes how stored derived values differ from the values
// derived from the source documents: the report of a full recompute, as
// the online rebuild (watch.Rebuild) and the offline one (a mongodump, in
// internal/offline) produce it and verify and rebuild print it.
package drift

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Diff is one derived value that differs from what is stored.
type Diff struct {
	Collection string // "user" or "homework"
	ID         string // username or homework id (hex)
	Path       string // field path, e.g. studentStatus.alice.7
	Stored     string // stored value as Extended JSON ("" when unreadable or absent)
	Derived    string
}

// Report is the result of a full recompute.
type Report struct {
	StartAt         bson.Timestamp // cluster time read before the scan (online only)
	Submissions     int
	Users, Entries  int // derived values compared
	DriftedUsers    int // differing from stored (written unless dry run)
	DriftedEntries  int
	PenaltyErrors   int
	Malformed       []*materialize.DecodeError
	Diffs           []Diff
	KeyIndexRecords int
	Rejected        int // bulk writes (derived values or key records) the server refused for good (reported, skipped)
	// RejectedErrors are the messages of the first refusals (at most 10),
	// naming the documents, e.g. a homework grown past 16 MiB.
	RejectedErrors []string
}

// Drift is the number of derived values that differ from what is stored.
func (r *Report) Drift() int { return r.DriftedUsers + r.DriftedEntries }

// UserDiff describes a user whose stored derived fields (stored, when ok;
// not ok: missing or unreadable) differ from the derived ones, as verify
// prints it.
func UserDiff(name string, stored materialize.UserStats, ok bool, derived materialize.UserStats) Diff {
	s := ""
	if ok {
		s = fmtStats(stored)
	}
	return Diff{Collection: materialize.CollUser, ID: name, Path: "submission,AC_submission,AC_problem_ids",
		Stored: s, Derived: fmtStats(derived)}
}

// EntryDiff describes a studentStatus entry whose stored value (v, when
// ok) differs from the derived one e, as verify prints it.
func EntryDiff(h bson.ObjectID, user, pk string, v bson.RawValue, ok bool, e materialize.Entry) Diff {
	stored := ""
	if ok {
		stored = relaxedJSON(v)
	}
	derived, _ := bson.MarshalExtJSON(e.Doc(), false, false)
	return Diff{Collection: materialize.CollHomework, ID: h.Hex(),
		Path: materialize.FieldStudentStatus + "." + user + "." + pk, Stored: stored, Derived: string(derived)}
}

func fmtStats(st materialize.UserStats) string {
	b, _ := bson.MarshalExtJSON(st.Fields(), false, false)
	return string(b)
}

// relaxedJSON renders a stored value as relaxed Extended JSON, the form
// derived values are printed in, so the two read alike.
func relaxedJSON(v bson.RawValue) string {
	if d, ok := v.DocumentOK(); ok {
		if b, err := bson.MarshalExtJSON(d, false, false); err == nil {
			return string(b)
		}
	}
	return v.String()
}
