package watch

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// valuesOf returns the Values of an event from a document {path: value}
// encoded by the driver, as derivedValues carries them.
func valuesOf(t *testing.T, d bson.D) []PathValue {
	t.Helper()
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []PathValue
	elems, err := bson.Raw(raw).Elements()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range elems {
		out = append(out, PathValue{Path: e.Key(), Value: e.Value()})
	}
	return out
}

// TestEchoesMatch: the echo rule. The records are of one user write and
// one entry write acknowledged at T; the events are built independently
// of the records' encoding (the driver's encoding of Back-End-shaped
// values).
func TestEchoesMatch(t *testing.T) {
	T := bson.Timestamp{T: 1_800_000_000, I: 5}
	hw := bson.ObjectID{11: 1}
	entryPath := "studentStatus.alice.7"
	entry := materialize.Entry{Score: 80, ProblemStatus: 0, HasStatus: true, SubmissionIDs: []string{"s1", "s2"}, RawScore: 100, HasRaw: true}
	entryDoc := bson.D{{Key: "score", Value: int32(80)}, {Key: "problemStatus", Value: int32(0)},
		{Key: "submissionIds", Value: bson.A{"s1", "s2"}}, {Key: "rawScore", Value: int32(100)}}
	w := &Writes{
		Users:   []UserWrite{{User: "alice", Stats: materialize.UserStats{Submission: 3, ACSubmission: 1, ACProblemIDs: []int64{7}}}},
		Entries: []EntryWrite{{Homework: hw, User: "alice", ProblemKey: "7", Entry: entry}},
	}
	userFields := []string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}
	userValues := bson.D{{Key: "submission", Value: int32(3)}, {Key: "AC_submission", Value: int32(1)}, {Key: "AC_problem_ids", Value: bson.A{int32(7)}}}
	userEvent := func(at bson.Timestamp, fields []string, values bson.D) Event {
		return Event{ClusterTime: at, Values: valuesOf(t, values),
			Change: materialize.Change{Op: materialize.OpUpdate, Collection: materialize.CollUser, UserID: "alice", Fields: fields}}
	}
	entryEvent := func(at bson.Timestamp, fields []string, values bson.D) Event {
		return Event{ClusterTime: at, Values: valuesOf(t, values),
			Change: materialize.Change{Op: materialize.OpUpdate, Collection: materialize.CollHomework, HomeworkID: hw, Fields: fields}}
	}
	before := bson.Timestamp{T: T.T, I: T.I - 1}
	after := bson.Timestamp{T: T.T, I: T.I + 1}
	cases := []struct {
		name string
		ev   Event
		want bool
	}{
		{"user: all met", userEvent(T, userFields, userValues), true},
		{"user: all met, before the operationTime", userEvent(before, userFields, userValues), true},
		{"user: some of the fields (the server logs only the changed ones)", userEvent(T, userFields[2:], userValues[2:]), true},
		{"entry: all met", entryEvent(before, []string{entryPath}, bson.D{{Key: entryPath, Value: entryDoc}}), true},

		{"(a) another field changed too", userEvent(T, append([]string{"username"}, userFields...), userValues), false},
		{"(a) a derived field removed (no value)", userEvent(T, userFields, userValues[:2]), false},
		{"(a) an entry's field, not the entry", entryEvent(T, []string{entryPath + ".score"}, bson.D{{Key: entryPath + ".score", Value: int32(80)}}), false},
		{"(a) a user's whole status", entryEvent(T, []string{"studentStatus.alice"}, bson.D{{Key: "studentStatus.alice", Value: bson.D{{Key: "7", Value: entryDoc}}}}), false},
		{"(a) no field", userEvent(T, []string{}, bson.D{}), false},
		{"(a) unknown fields", userEvent(T, nil, userValues), false},
		{"(a) a path never written", entryEvent(T, []string{"studentStatus.bob.7"}, bson.D{{Key: "studentStatus.bob.7", Value: entryDoc}}), false},

		{"(b) another value", userEvent(T, userFields, bson.D{{Key: "submission", Value: int32(2)}, userValues[1], userValues[2]}), false},
		{"(b) the same number as a long (not the same bytes)", userEvent(T, userFields, bson.D{{Key: "submission", Value: int64(3)}, userValues[1], userValues[2]}), false},
		{"(b) the array's bytes as a document (the same bytes, another type)", userEvent(T, userFields,
			bson.D{userValues[0], userValues[1], {Key: "AC_problem_ids", Value: bson.D{{Key: "0", Value: int32(7)}}}}), false},
		{"(b) the entry's keys in another order", entryEvent(T, []string{entryPath}, bson.D{{Key: entryPath, Value: bson.D{entryDoc[1], entryDoc[0], entryDoc[2], entryDoc[3]}}}), false},
		{"(b) the entry without rawScore", entryEvent(T, []string{entryPath}, bson.D{{Key: entryPath, Value: entryDoc[:3]}}), false},

		{"(c) after the operationTime", userEvent(after, userFields, userValues), false},
		{"(c) no cluster time", userEvent(bson.Timestamp{}, userFields, userValues), false},
		{"(c) entry after the operationTime", entryEvent(after, []string{entryPath}, bson.D{{Key: entryPath, Value: entryDoc}}), false},
	}
	var e echoes
	e.record(w, T)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := e.matches(c.ev); got != c.want {
				t.Errorf("matches = %v, want %v", got, c.want)
			}
		})
	}
	t.Run("another document", func(t *testing.T) {
		ev := userEvent(T, userFields, userValues)
		ev.Change.UserID = "bob"
		if e.matches(ev) {
			t.Error("bob's event matched alice's write")
		}
		ev = entryEvent(T, []string{entryPath}, bson.D{{Key: entryPath, Value: entryDoc}})
		ev.Change.HomeworkID = bson.ObjectID{11: 2}
		if e.matches(ev) {
			t.Error("another homework's event matched")
		}
	})
	t.Run("not an update", func(t *testing.T) {
		ev := userEvent(T, userFields, userValues)
		ev.Change.Op = materialize.OpReplace
		if e.matches(ev) {
			t.Error("a replace matched")
		}
	})
}

// TestEchoesRecord: what is recorded, and what is not.
func TestEchoesRecord(t *testing.T) {
	T := bson.Timestamp{T: 1_800_000_000, I: 5}
	stats := func(n int64) materialize.UserStats {
		return materialize.UserStats{Submission: n, ACProblemIDs: []int64{}}
	}
	userEvent := func(at bson.Timestamp, n int32) Event {
		return Event{ClusterTime: at, Values: valuesOf(t, bson.D{{Key: "submission", Value: n}}),
			Change: materialize.Change{Op: materialize.OpUpdate, Collection: materialize.CollUser, UserID: "alice", Fields: []string{"submission"}}}
	}
	t.Run("zero operationTime records nothing", func(t *testing.T) {
		var e echoes
		e.record(&Writes{Users: []UserWrite{{User: "alice", Stats: stats(1)}}}, bson.Timestamp{})
		if e.len() != 0 || e.matches(userEvent(T, 1)) {
			t.Errorf("%d records after a write of unknown time", e.len())
		}
	})
	t.Run("the last write of a path decides", func(t *testing.T) {
		var e echoes
		T2 := bson.Timestamp{T: T.T + 1, I: 1}
		e.record(&Writes{Users: []UserWrite{{User: "alice", Stats: stats(1)}}}, T)
		e.record(&Writes{Users: []UserWrite{{User: "alice", Stats: stats(2)}}}, T2)
		if e.matches(userEvent(T, 1)) {
			t.Error("the echo of the first write matched after a second write of another value")
		}
		if !e.matches(userEvent(T2, 2)) {
			t.Error("the echo of the second write did not match")
		}
	})
	t.Run("entries whose path is ambiguous are not recorded", func(t *testing.T) {
		var e echoes
		hw := bson.ObjectID{11: 1}
		en := materialize.StartEntry()
		e.record(&Writes{Entries: []EntryWrite{
			{Homework: hw, User: "a.b", ProblemKey: "7", Entry: en},
			{Homework: hw, User: "a", ProblemKey: "b.7", Entry: en},
			{Homework: hw, User: "$x", ProblemKey: "7", Entry: en},
			{Homework: hw, User: "", ProblemKey: "7", Entry: en},
		}}, T)
		if e.len() != 0 {
			t.Errorf("%d records of entries with a '.', a leading '$' or an empty name, want none", e.len())
		}
	})
}

// TestEchoesPrune: a record is kept while the stream has not passed its
// operationTime and dropped once it has; matches then fails.
func TestEchoesPrune(t *testing.T) {
	T := bson.Timestamp{T: 1_800_000_000, I: 5}
	var e echoes
	e.record(&Writes{Users: []UserWrite{{User: "alice", Stats: materialize.UserStats{Submission: 1, ACProblemIDs: []int64{}}}}}, T)
	ev := Event{ClusterTime: T, Values: valuesOf(t, bson.D{{Key: "submission", Value: int32(1)}}),
		Change: materialize.Change{Op: materialize.OpUpdate, Collection: materialize.CollUser, UserID: "alice", Fields: []string{"submission"}}}
	e.prune(bson.Timestamp{T: T.T, I: T.I - 1})
	e.prune(T)
	if e.len() != 3 || !e.matches(ev) {
		t.Fatalf("%d records after pruning at the operationTime, want the 3 fields kept", e.len())
	}
	e.prune(bson.Timestamp{T: T.T, I: T.I + 1})
	if e.len() != 0 {
		t.Errorf("%d records after the stream passed the operationTime, want none", e.len())
	}
	if e.matches(ev) {
		t.Error("matched after pruning")
	}
	e.record(&Writes{Users: []UserWrite{{User: "alice", Stats: materialize.UserStats{Submission: 1, ACProblemIDs: []int64{}}}}}, T)
	e.reset()
	if e.len() != 0 {
		t.Errorf("%d records after reset", e.len())
	}
}
