package mongodb

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// changeEvent is a change event as the server emits it before the
// stream's pipeline runs: _id (the resume token), operationType,
// clusterTime, ns, then the fields of kv.
func changeEvent(op, coll string, kv ...bson.E) bson.D {
	d := bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "8263A1"}}}, {Key: "operationType", Value: op},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1_800_000_000, I: 1}},
		{Key: "wallTime", Value: bson.DateTime(1_800_000_000_000)},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: coll}}}}
	return append(d, kv...)
}

func key(id any) bson.E { return bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}} }

func update(updated bson.D, removed bson.A, truncated bson.A) bson.E {
	return bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: updated},
		{Key: "removedFields", Value: removed}, {Key: "truncatedArrays", Value: truncated}}}
}

// TestPipelineKeepsAndProjects runs watch.Pipeline() over change events
// with the package's evaluator of the server's semantics: which events
// the stream keeps (every event of the watched collections; user inserts,
// replaces and updates, including updates of the derived fields by
// someone else; drops, renames, dropDatabase and invalidate of any
// collection) and what the projection keeps (no document body, no
// updateDescription, of which only the new user and problem an update of a
// submission set, as moved: only what watch.DecodeEvent reads, and the
// names of the changed fields).
func TestPipelineKeepsAndProjects(t *testing.T) {
	sub := bson.NewObjectID()
	hw := bson.NewObjectID()
	cases := []struct {
		name   string
		event  bson.D
		kept   bool
		check  func(t *testing.T, projected bson.D, c materialize.Change)
		fields []string // Change.Fields of a kept update
	}{
		{"submission insert", changeEvent("insert", "submission", key(sub), bson.E{Key: "fullDocument", Value: bson.D{
			{Key: "_id", Value: sub}, {Key: "user", Value: "alice"}, {Key: "problem", Value: int32(7)}, {Key: "code", Value: "big source"},
			{Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}}}), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				fd, _ := lookupD(p, "fullDocument").(bson.D)
				if len(fd) != 2 || lookupD(fd, "user") != "alice" || lookupD(fd, "problem") != int32(7) {
					t.Errorf("fullDocument projected to %v, want only user and problem", fd)
				}
				if !c.HasPair || c.Pair != (materialize.Pair{User: "alice", Problem: 7}) || c.SubmissionID != sub {
					t.Errorf("decoded %+v", c)
				}
			}, nil},
		{"submission update", changeEvent("update", "submission", key(sub),
			update(bson.D{{Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}}, bson.A{"tasks.0.cases"},
				bson.A{bson.D{{Key: "field", Value: "tasks"}, {Key: "newSize", Value: int32(1)}}})), true, nil,
			[]string{"status", "score", "tasks.0.cases", "tasks"}},
		{"submission moved by an update", changeEvent("update", "submission", key(sub),
			update(bson.D{{Key: "user", Value: "bob"}, {Key: "status", Value: int32(0)}}, bson.A{}, bson.A{})), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if c.Move != (materialize.Move{User: "bob", HasUser: true}) {
					t.Errorf("decoded move %+v, want to user bob (the problem unchanged)", c.Move)
				}
			}, []string{"user", "status"}},
		{"submission moved to another problem, user removed", changeEvent("update", "submission", key(sub),
			update(bson.D{{Key: "problem", Value: int64(8)}}, bson.A{"user"}, bson.A{})), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if c.Move != (materialize.Move{Problem: 8, HasProblem: true}) {
					t.Errorf("decoded move %+v, want to problem 8 only (no user: in no pair, but the problem is what a later user pairs with)", c.Move)
				}
			}, []string{"problem", "user"}},
		{"submission moved to another problem, user set to a number", changeEvent("update", "submission", key(sub),
			update(bson.D{{Key: "user", Value: int32(5)}, {Key: "problem", Value: int32(8)}}, bson.A{}, bson.A{})), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if c.Move != (materialize.Move{Problem: 8, HasProblem: true}) {
					t.Errorf("decoded move %+v, want to problem 8 only (the user does not decode)", c.Move)
				}
			}, []string{"user", "problem"}},
		{"submission moved to another problem, a path below the user set", changeEvent("update", "submission", key(sub),
			update(bson.D{{Key: "user.x", Value: "bob"}, {Key: "problem", Value: int32(8)}}, bson.A{}, bson.A{})), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if m, _ := lookupD(p, "moved").(bson.D); len(m) != 1 || lookupD(m, "problem") != int32(8) {
					t.Errorf("moved projected to %v, want only the problem (updatedFields' key is \"user.x\", no user)", lookupD(p, "moved"))
				}
				if c.Move != (materialize.Move{Problem: 8, HasProblem: true}) {
					t.Errorf("decoded move %+v, want to problem 8 only", c.Move)
				}
			}, []string{"user.x", "problem"}},
		{"user update of a derived field", changeEvent("update", "user", key("alice"),
			update(bson.D{{Key: "AC_problem_ids", Value: bson.A{int32(1)}}}, bson.A{}, bson.A{})), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if c.UserID != "alice" {
					t.Errorf("decoded %+v", c)
				}
			}, []string{"AC_problem_ids"}},
		{"user update of another field", changeEvent("update", "user", key("alice"),
			update(bson.D{{Key: "profile.displayedName", Value: "A"}}, bson.A{}, bson.A{})), true, nil, []string{"profile.displayedName"}},
		{"user insert", changeEvent("insert", "user", key("bob"), bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: "bob"}, {Key: "md5", Value: "x"}}}), true,
			func(t *testing.T, p bson.D, _ materialize.Change) {
				if fd, ok := lookupD(p, "fullDocument").(bson.D); !ok || len(fd) != 0 {
					t.Errorf("user insert's fullDocument projected to %v, want {} (no field of a user is read)", lookupD(p, "fullDocument"))
				}
			}, nil},
		{"user replace", changeEvent("replace", "user", key("bob"), bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: "bob"}}}), true, nil, nil},
		{"user delete", changeEvent("delete", "user", key("bob")), false, nil, nil},
		{"homework update of studentStatus", changeEvent("update", "homework", key(hw),
			update(bson.D{{Key: "studentStatus.alice.7.score", Value: int32(90)}}, bson.A{}, bson.A{})), true, nil,
			[]string{"studentStatus.alice.7.score"}},
		{"homework delete", changeEvent("delete", "homework", key(hw)), true, nil, nil},
		{"problem replace", changeEvent("replace", "problem", key(int32(7)), bson.E{Key: "fullDocument", Value: bson.D{
			{Key: "_id", Value: int32(7)}, {Key: "homeworks", Value: bson.A{hw}}, {Key: "description", Value: "long"}}}), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if fd, _ := lookupD(p, "fullDocument").(bson.D); len(fd) != 0 {
					t.Errorf("problem's fullDocument projected to %v, want {}", fd)
				}
				if c.ProblemID != 7 {
					t.Errorf("decoded %+v", c)
				}
			}, nil},
		{"course insert", changeEvent("insert", "course", key(bson.NewObjectID())), false, nil, nil},
		{"drop of another collection", changeEvent("drop", "course"), true, nil, nil},
		{"rename", changeEvent("rename", "submission", bson.E{Key: "to", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: "old_submission"}}}), true,
			func(t *testing.T, p bson.D, c materialize.Change) {
				if c.RenamedTo != "old_submission" {
					t.Errorf("rename decoded %+v, want RenamedTo old_submission", c)
				}
			}, nil},
		{"dropDatabase", bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: "dropDatabase"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 1}}, {Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}}}}, true, nil, nil},
		{"invalidate", bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "82"}}}, {Key: "operationType", Value: "invalidate"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1, I: 1}}}, true, nil, nil},
	}
	allowed := []string{"_id", "operationType", "ns", "to", "documentKey", "clusterTime", "fullDocument", "changedFields", "derivedValues", "moved"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runPipeline([]bson.D{norm(c.event).(bson.D)}, norm(watch.Pipeline()).(bson.A))
			if (len(out) == 1) != c.kept {
				t.Fatalf("kept %d events, want kept=%v", len(out), c.kept)
			}
			if !c.kept {
				return
			}
			p := out[0]
			for _, e := range p {
				if !slices.Contains(allowed, e.Key) {
					t.Errorf("projection keeps %q: %v", e.Key, p)
				}
			}
			if m := lookupD(p, "moved"); m != missing {
				// Of an update's values, only a submission's new user and
				// problem, and only when it set one (a homework's entries
				// never ride along).
				d, _ := m.(bson.D)
				if len(d) == 0 {
					t.Errorf("moved projected empty: %v", p)
				}
				for _, e := range d {
					if e.Key != "user" && e.Key != "problem" {
						t.Errorf("moved keeps %q: %v", e.Key, m)
					}
				}
			} else if c.name == "submission moved by an update" {
				t.Errorf("no moved: %v", p)
			}
			if lookupD(p, "_id") == missing {
				t.Error("projection dropped the resume token _id")
			}
			ev, err := watch.DecodeEvent(rawOf(p))
			if err != nil {
				t.Fatalf("DecodeEvent(%v): %v", p, err)
			}
			if (ev.ClusterTime == bson.Timestamp{}) {
				t.Errorf("clusterTime lost: %v", p)
			}
			if op, _ := lookupD(c.event, "operationType").(string); string(ev.Change.Op) != op {
				t.Errorf("op %q, want %q", ev.Change.Op, op)
			}
			if op := ev.Change.Op; op == materialize.OpUpdate && !slices.Equal(ev.Change.Fields, c.fields) {
				t.Errorf("changed fields %q, want %q", ev.Change.Fields, c.fields)
			} else if op != materialize.OpUpdate && lookupD(p, "changedFields") != missing {
				t.Errorf("a %s event carries changedFields: %v", op, p)
			}
			if c.check != nil {
				c.check(t, p, ev.Change)
			}
		})
	}
}

// TestPipelineDerivedValues: derivedValues carries, for updates of users
// and homeworks only, the updated value of each path the daemon writes
// (a user's three derived fields; studentStatus.<user>.<problem key>,
// exactly three components) and nothing else; DecodeEvent puts them on
// the Event. An entry's value is byte for byte what the adapter's $set
// sends (entryWriteByPath: Entry.Doc as the driver encodes it), which is
// what the engine records of its writes (Entry.AppendBSON).
func TestPipelineDerivedValues(t *testing.T) {
	hw := bson.NewObjectID()
	entry := materialize.Entry{Score: 80, ProblemStatus: 1, HasStatus: true, SubmissionIDs: []string{"a", "b"}, RawScore: 100, HasRaw: true}
	// The homework's update as the server applies the adapter's update
	// (the evaluator's $set), its updatedFields then read off the result.
	doc := norm(bson.D{{Key: "_id", Value: hw}, {Key: "studentStatus", Value: bson.D{{Key: "alice", Value: bson.D{
		{Key: "7", Value: materialize.StartEntry().Doc()}}}}}}).(bson.D)
	_, upd := entryWriteByPath(watch.EntryWrite{Homework: hw, User: "alice", ProblemKey: "7", Entry: entry})
	written := applyUpdate(doc, norm(upd))
	newEntry := lookupD(lookupD(lookupD(written, "studentStatus").(bson.D), "alice").(bson.D), "7")
	acIDs := bson.A{int32(7), int32(3)}
	cases := []struct {
		name  string
		event bson.D
		want  bson.D // path → value; nil: no derivedValues at all
	}{
		{"user's derived fields", changeEvent("update", "user", key("alice"),
			update(bson.D{{Key: "submission", Value: int32(4)}, {Key: "AC_problem_ids", Value: acIDs}, {Key: "profile.displayedName", Value: "A"}}, bson.A{}, bson.A{})),
			bson.D{{Key: "submission", Value: int32(4)}, {Key: "AC_problem_ids", Value: acIDs}}},
		{"user's other field only", changeEvent("update", "user", key("alice"),
			update(bson.D{{Key: "md5", Value: "x"}}, bson.A{"AC_submission"}, bson.A{})), bson.D{}},
		{"homework entry", changeEvent("update", "homework", key(hw),
			update(bson.D{{Key: "studentStatus.alice.7", Value: newEntry}, {Key: "duration.end", Value: int32(1)}}, bson.A{}, bson.A{})),
			bson.D{{Key: "studentStatus.alice.7", Value: newEntry}}},
		{"homework entry's field, a user's whole status, studentStatus whole", changeEvent("update", "homework", key(hw),
			update(bson.D{{Key: "studentStatus.alice.7.score", Value: int32(1)}, {Key: "studentStatus.bob", Value: bson.D{}},
				{Key: "studentStatus", Value: bson.D{}}}, bson.A{}, bson.A{})), bson.D{}},
		{"a user field name on a homework", changeEvent("update", "homework", key(hw),
			update(bson.D{{Key: "submission", Value: int32(1)}}, bson.A{}, bson.A{})), bson.D{}},
		{"submission update", changeEvent("update", "submission", key(bson.NewObjectID()),
			update(bson.D{{Key: "score", Value: int32(100)}}, bson.A{}, bson.A{})), nil},
		{"problem update named like an entry", changeEvent("update", "problem", key(int32(7)),
			update(bson.D{{Key: "studentStatus.a.7", Value: int32(1)}}, bson.A{}, bson.A{})), nil},
		{"user replace", changeEvent("replace", "user", key("bob"), bson.E{Key: "fullDocument", Value: bson.D{{Key: "_id", Value: "bob"}, {Key: "submission", Value: int32(1)}}}), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runPipeline([]bson.D{norm(c.event).(bson.D)}, norm(watch.Pipeline()).(bson.A))
			if len(out) != 1 {
				t.Fatalf("kept %d events, want 1", len(out))
			}
			got := lookupD(out[0], "derivedValues")
			if c.want == nil {
				if got != missing {
					t.Errorf("derivedValues %v, want none", got)
				}
				return
			}
			var want bson.A
			for _, e := range c.want {
				want = append(want, bson.D{{Key: "k", Value: e.Key}, {Key: "v", Value: e.Value}})
			}
			if want == nil {
				want = bson.A{}
			}
			if !equal(got, want) {
				t.Errorf("derivedValues %v, want %v", got, want)
			}
			ev, err := watch.DecodeEvent(rawOf(out[0]))
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if len(ev.Values) != len(c.want) {
				t.Fatalf("decoded %d values, want %d", len(ev.Values), len(c.want))
			}
			for i, e := range c.want {
				tp, data, err := bson.MarshalValue(e.Value)
				if err != nil {
					t.Fatal(err)
				}
				if v := ev.Values[i]; v.Path != e.Key || v.Value.Type != tp || !bytes.Equal(v.Value.Value, data) {
					t.Errorf("value %d decoded %s=%v, want %s=%v", i, v.Path, v.Value, e.Key, e.Value)
				}
			}
		})
	}
	// The entry the adapter wrote reads back as the bytes the engine
	// records for that write.
	tp, data, err := bson.MarshalValue(newEntry)
	if err != nil {
		t.Fatal(err)
	}
	if tp != bson.TypeEmbeddedDocument || !bytes.Equal(data, entry.AppendBSON(nil)) {
		t.Errorf("the entry written by the adapter reads back as %x, the engine records %x", data, entry.AppendBSON(nil))
	}
}

// TestPipelineEventNoLargerThanTheServers: the projected event is never
// larger than the server's own change event (plus a few hundred bytes),
// whatever an update of a user or a homework set, so an event the server
// can build fits in the 16 MiB (+16 KiB) a change stream may return
// (BSONObjectTooLarge, 10334, otherwise: the stream could not pass it).
// derivedValues ships values only for updates of at most three fields
// (the daemon's writes: one entry, or a user's three fields): an update
// of many entries in one statement (the Back-End's dotted $set of every
// entry of a large homework) would carry each path twice (changedFields,
// and k beside its value) and outgrow the server's event.
func TestPipelineEventNoLargerThanTheServers(t *testing.T) {
	hw := bson.NewObjectID()
	entryDoc := materialize.StartEntry().Doc()
	entries := func(n int) bson.D {
		var d bson.D
		for i := range n {
			d = append(d, bson.E{Key: fmt.Sprintf("studentStatus.student%05d.%d", i, 100+i%7), Value: entryDoc})
		}
		return d
	}
	scores := func(n int, v any) bson.D {
		var d bson.D
		for i := range n {
			d = append(d, bson.E{Key: fmt.Sprintf("studentStatus.student%05d.%d.score", i, 100+i%7), Value: v})
		}
		return d
	}
	big := func(n int) bson.D {
		var d bson.D
		for i := range n {
			d = append(d, bson.E{Key: fmt.Sprintf("studentStatus.student%05d.1", i), Value: bson.D{{Key: "pad", Value: strings.Repeat("x", 1<<20)}}})
		}
		return d
	}
	// The largest value a homework can hold: a studentStatus filling a
	// 16 MiB document beside its ObjectID _id (4 + 17 + 1 + 14 + value +
	// 1 bytes). namesFit's $bsonSize({v: value}) stays within 16 MiB
	// (value + 8 bytes); a size taken over more than one value (such as
	// $bsonSize of updateDescription) would pass it and fail the stream.
	fullStatus := func() bson.D {
		const size = 16<<20 - 37
		// {pad: "x..."}: 4 + 1 + 4 + 4 + len + 1 + 1 bytes.
		return bson.D{{Key: "studentStatus", Value: bson.D{{Key: "pad", Value: strings.Repeat("x", size-15)}}}}
	}
	if n := len(rawOf(bson.D{{Key: "_id", Value: hw}, fullStatus()[0]})); n != 16<<20 {
		t.Fatalf("the full homework is %d bytes, want %d", n, 16<<20)
	}
	users := bson.D{{Key: "submission", Value: int32(4)}, {Key: "AC_submission", Value: int32(2)}, {Key: "AC_problem_ids", Value: bson.A{int32(7), int32(3)}}}
	cases := []struct {
		name  string
		event bson.D
		vals  int // derivedValues shipped
	}{
		{"one entry", changeEvent("update", "homework", key(hw), update(entries(1), bson.A{}, bson.A{})), 1},
		{"three entries", changeEvent("update", "homework", key(hw), update(entries(3), bson.A{}, bson.A{})), 3},
		{"four entries", changeEvent("update", "homework", key(hw), update(entries(4), bson.A{}, bson.A{})), 0},
		{"every entry of a homework", changeEvent("update", "homework", key(hw), update(entries(2000), bson.A{}, bson.A{})), 0},
		{"a user's derived fields", changeEvent("update", "user", key("alice"), update(users, bson.A{}, bson.A{})), 3},
		{"a user's derived fields and another", changeEvent("update", "user", key("alice"),
			update(append(bson.D{{Key: "md5", Value: "x"}}, users...), bson.A{}, bson.A{})), 0},
		{"every entry's score of a homework", changeEvent("update", "homework", key(hw), update(scores(2000, int32(0)), bson.A{}, bson.A{})), 0},
		{"twenty entries of 1 MiB (updatedFields past 16 MiB)", changeEvent("update", "homework", key(hw), update(big(20), bson.A{}, bson.A{})), 0},
		{"a studentStatus as large as a homework can hold", changeEvent("update", "homework", key(hw), update(fullStatus(), bson.A{}, bson.A{})), 0},
		{"every entry's score of a homework nulled", changeEvent("update", "homework", key(hw), update(scores(2000, nil), bson.A{}, bson.A{})), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runPipeline([]bson.D{norm(c.event).(bson.D)}, norm(watch.Pipeline()).(bson.A))
			if len(out) != 1 {
				t.Fatalf("kept %d events, want 1", len(out))
			}
			vals, _ := lookupD(out[0], "derivedValues").(bson.A)
			if len(vals) != c.vals {
				t.Errorf("%d derivedValues, want %d", len(vals), c.vals)
			}
			in, got := len(rawOf(norm(c.event).(bson.D))), len(rawOf(out[0]))
			if got > in+512 {
				t.Errorf("projected event of %d bytes, the server's is %d", got, in)
			}
		})
	}
}
