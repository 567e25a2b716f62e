package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/storetest"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestStoreContract runs the store suite on memstore.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, docs materialize.Docs) (storetest.Store, func() materialize.Docs) {
		st := memstore.New()
		for coll, ds := range map[string][]bson.Raw{
			materialize.CollUser: docs.Users, materialize.CollProblem: docs.Problems,
			materialize.CollHomework: docs.Homeworks, materialize.CollSubmission: docs.Submissions,
		} {
			if err := st.Load(coll, ds...); err != nil {
				t.Fatal(err)
			}
		}
		return st, st.Docs
	})
}

func user(name string, n int) bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_id", Value: name}, {Key: "submission", Value: n}, {Key: "AC_submission", Value: 0}, {Key: "AC_problem_ids", Value: bson.A{}}})
	if err != nil {
		panic(err)
	}
	return b
}

// TestFail: an injected failure aborts the operation it names with the
// injected error, and a failing write lands between the writes of one
// Apply: the users before it are written, the rest are not.
func TestFail(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	for _, u := range []string{"a", "b"} {
		if err := st.Insert(materialize.CollUser, user(u, 0)); err != nil {
			t.Fatal(err)
		}
	}
	var ops []string
	writes := 0
	st.Fail = func(op string) error {
		ops = append(ops, op)
		if op == "write.user" {
			if writes++; writes == 2 {
				return memstore.ErrInjected
			}
		}
		if op == "read" || op == "keys.record" || op == "checkpoint.save" || op == "stream.open" {
			return memstore.ErrInjected
		}
		return nil
	}
	w := &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: materialize.UserStats{Submission: 5}}, {User: "b", Stats: materialize.UserStats{Submission: 6}}}}
	if _, err := st.Apply(ctx, w); !errors.Is(err, memstore.ErrInjected) {
		t.Errorf("Apply: %v, want the injected failure", err)
	}
	if a, b := st.Get(materialize.CollUser, "a"), st.Get(materialize.CollUser, "b"); !w.Users[0].Stats.MatchesStored(a) || !bytes.Equal(b, user("b", 0)) {
		t.Errorf("after a failure at the second write: a %v (want written), b %v (want as it was)", a, b)
	}
	if _, _, err := st.Submissions(ctx, []string{"a"}, nil); !errors.Is(err, memstore.ErrInjected) {
		t.Errorf("Submissions: %v, want the injected failure", err)
	}
	if err := st.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{{1}: {{User: "a", Problem: 1}}}); !errors.Is(err, memstore.ErrInjected) {
		t.Errorf("RecordKeys: %v, want the injected failure", err)
	}
	if err := st.SaveCheckpoint(ctx, resume.Checkpoint{}); !errors.Is(err, memstore.ErrInjected) {
		t.Errorf("SaveCheckpoint: %v, want the injected failure", err)
	}
	if _, err := st.Open(ctx, watch.Position{}); !errors.Is(err, memstore.ErrInjected) || watch.ClassOf(err) != watch.Transient {
		t.Errorf("Open: %v (class %v), want the injected failure, transient", err, watch.ClassOf(err))
	}
	want := []string{"write.user", "write.user", "read", "keys.record", "checkpoint.save", "stream.open"}
	if !slices.Equal(ops, want) {
		t.Errorf("operations %v, want %v", ops, want)
	}
	if s := st.Stats(); s.UserWrites != 1 || s.Saves != 0 || s.KeyRecords != 0 {
		t.Errorf("stats %+v: want one user write and nothing else", s)
	}
}

// TestTruncateOplog: after the oplog is truncated, a stream resumed from
// a token before its horizon fails with watch.ErrHistoryLost (class
// HistoryLost), while one started at the current cluster time delivers
// what happens next.
func TestTruncateOplog(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if err := st.Insert(materialize.CollUser, user("a", 0)); err != nil {
		t.Fatal(err)
	}
	s, err := st.Open(ctx, watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	early := s.ResumeToken()
	for i := range 3 {
		if err := st.Update(materialize.CollUser, user("a", i+1), []string{"submission"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Open(ctx, watch.Position{Token: early}); err != nil {
		t.Fatalf("Open before truncation: %v", err)
	}
	st.TruncateOplog()
	_, err = st.Open(ctx, watch.Position{Token: early})
	if !errors.Is(err, watch.ErrHistoryLost) || watch.ClassOf(err) != watch.HistoryLost {
		t.Errorf("Open from a token before the horizon: %v, want ErrHistoryLost", err)
	}
	now, err := st.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err = st.Open(ctx, watch.Position{StartAt: now})
	if err != nil {
		t.Fatalf("Open at the current cluster time: %v", err)
	}
	if err := st.Delete(materialize.CollUser, "a"); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		ev, ok, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		kinds = append(kinds, string(ev.Change.Op))
	}
	// At-least-once: a start at the latest event's cluster time delivers
	// it again.
	if !slices.Equal(kinds, []string{"update", "delete"}) {
		t.Errorf("events after a start at the cluster time: %v, want the latest update again and the delete", kinds)
	}
}

// TestApplyNoop: a write equal to the stored value emits no change event
// (MongoDB writes no oplog entry for a no-op update).
func TestApplyNoop(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if err := st.Insert(materialize.CollUser, user("a", 2)); err != nil {
		t.Fatal(err)
	}
	n := st.OplogLen()
	stats, _ := materialize.DecodeUserStats(user("a", 2))
	if _, err := st.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: stats}}}); err != nil {
		t.Fatal(err)
	}
	if st.OplogLen() != n || st.Stats().NoopWrites != 1 {
		t.Errorf("a no-op write: oplog %d events (had %d), %d no-op writes", st.OplogLen(), n, st.Stats().NoopWrites)
	}
}

// TestDropOwnEvents: a stream opened with DropOwnEvents skips exactly the
// events Apply emitted (the echoes of derived writes) and counts them; a
// stream opened without it delivers them.
func TestDropOwnEvents(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	if err := st.Insert(materialize.CollUser, user("a", 2)); err != nil {
		t.Fatal(err)
	}
	stats, _ := materialize.DecodeUserStats(user("a", 3))
	if _, err := st.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "a", Stats: stats}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(materialize.CollUser, user("a", 4), []string{"submission"}); err != nil {
		t.Fatal(err)
	}
	ops := func(drop bool) []materialize.Op {
		st.DropOwnEvents = drop
		s, err := st.Open(ctx, watch.Position{StartAt: bson.Timestamp{T: 1, I: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var out []materialize.Op
		for {
			ev, ok, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return out
			}
			out = append(out, ev.Change.Op)
		}
	}
	if got := ops(false); !slices.Equal(got, []materialize.Op{materialize.OpInsert, materialize.OpUpdate, materialize.OpUpdate}) {
		t.Errorf("without DropOwnEvents: %v, want the insert, the echo and the foreign update", got)
	}
	if got := ops(true); !slices.Equal(got, []materialize.Op{materialize.OpInsert, materialize.OpUpdate}) || st.Stats().OwnDropped != 1 {
		t.Errorf("with DropOwnEvents: %v (%d dropped), want the insert and the foreign update, one echo dropped", got, st.Stats().OwnDropped)
	}
}

// TestUpdateEventCarriesMove: an update naming user or problem carries
// their new values as watch.Pipeline projects them (moved), so the
// decoded change says where the submission went.
func TestUpdateEventCarriesMove(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	id := bson.NewObjectID()
	sub := func(user string, problem int32) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "user", Value: user}, {Key: "problem", Value: problem},
			{Key: "timestamp", Value: bson.DateTime(0)}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := st.Insert(materialize.CollSubmission, sub("a", 7)); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		doc    bson.Raw
		fields []string
	}{{sub("b", 7), []string{"user"}}, {sub("b", 8), []string{"problem", "score"}}, {sub("c", 9), []string{"user", "problem"}}, {sub("c", 9), []string{"score"}}} {
		if err := st.Update(materialize.CollSubmission, u.doc, u.fields); err != nil {
			t.Fatal(err)
		}
	}
	s, err := st.Open(ctx, watch.Position{StartAt: bson.Timestamp{T: 1, I: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var got []materialize.Move
	for {
		ev, ok, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if ev.Change.Op == materialize.OpUpdate {
			got = append(got, ev.Change.Move)
		}
	}
	want := []materialize.Move{{User: "b", HasUser: true}, {Problem: 8, HasProblem: true}, {User: "c", Problem: 9, HasUser: true, HasProblem: true}, {}}
	if !slices.Equal(got, want) {
		t.Errorf("moves %+v, want %+v", got, want)
	}
}

// TestUpdateEventDerivedValues: an update of a homework or user carries
// the new values of its derived paths, as watch.Pipeline ships them: only
// when it set at most watch.MaxDerivedValues fields (a removed field does
// not count), none at all otherwise.
func TestUpdateEventDerivedValues(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	hw := bson.NewObjectID()
	entry := bson.D{{Key: "score", Value: int32(0)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}}}
	doc := func(keys ...string) bson.Raw {
		alice := bson.D{}
		for _, k := range keys {
			alice = append(alice, bson.E{Key: k, Value: entry})
		}
		b, err := bson.Marshal(bson.D{{Key: "_id", Value: hw}, {Key: "studentStatus", Value: bson.D{{Key: "alice", Value: alice}}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := st.Insert(materialize.CollHomework, doc("1", "2", "3", "4")); err != nil {
		t.Fatal(err)
	}
	paths := func(keys ...string) []string {
		var out []string
		for _, k := range keys {
			out = append(out, "studentStatus.alice."+k)
		}
		return out
	}
	cases := []struct {
		doc    bson.Raw
		fields []string
		values int // -1: none shipped
	}{
		{doc("1", "2", "3", "4"), paths("1"), 1},
		{doc("1", "2", "3", "4"), paths("1", "2", "3"), 3},
		{doc("1", "2", "3", "4"), paths("1", "2", "3", "4"), -1},
		{doc("1", "2", "3"), paths("1", "2", "3", "4"), 3}, // 4 removed
	}
	for _, c := range cases {
		if err := st.Update(materialize.CollHomework, c.doc, c.fields); err != nil {
			t.Fatal(err)
		}
	}
	s, err := st.Open(ctx, watch.Position{StartAt: bson.Timestamp{T: 1, I: 1}})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for {
		ev, ok, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if ev.Change.Op != materialize.OpUpdate {
			continue
		}
		want := cases[i].values
		if (want < 0) != (ev.Values == nil) || (want >= 0 && len(ev.Values) != want) {
			t.Errorf("update %d of %v: values %+v, want %d (-1: none)", i, cases[i].fields, ev.Values, want)
		}
		i++
	}
	if i != len(cases) {
		t.Fatalf("%d update events, want %d", i, len(cases))
	}
}

// TestUndecodableArrayUser: a query on user matches a document whose user
// is an array holding the name (the server's equality and $in descend
// into arrays), so such a submission, undecodable, is reported to a read
// of that user, as the mongodb adapter's reads report it.
func TestUndecodableArrayUser(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	sub := func(user any) bson.Raw {
		b, err := bson.Marshal(bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "user", Value: user}, {Key: "problem", Value: int32(1)},
			{Key: "timestamp", Value: bson.DateTime(1)}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}, {Key: "languageType", Value: int32(0)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := st.Load(materialize.CollSubmission, sub(bson.A{"b"}), sub(bson.A{"x", "b"}), sub(bson.A{"x"}), sub(bson.A{bson.A{"b"}})); err != nil {
		t.Fatal(err)
	}
	_, bad, err := st.Submissions(ctx, []string{"b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2 {
		t.Errorf("Submissions(b) reports %d undecodable submissions, want 2 (user [b] and [x, b]): %v", len(bad), bad)
	}
	_, bad, err = st.UserStats(ctx, []string{"b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2 {
		t.Errorf("UserStats(b) reports %d undecodable submissions, want 2: %v", len(bad), bad)
	}
}
