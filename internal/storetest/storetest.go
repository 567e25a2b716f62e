// Package storetest is one suite of behaviour tests of the store contract
// the engine relies on: watch.Source's reads, watch.Writer's Apply (only
// the derived fields, only documents and entries that exist, never an
// upsert), watch.KeyIndex, watch.Scanner, and resume.Store's checkpoints
// fenced by resume.LeaseStore's lease. Run takes a constructor, so that
// the in-memory store (internal/memstore, in its unit tests) and the
// MongoDB adapter (mongodb, in its integration tests) are held to the same
// expectations. Expected values come from materialize's decoders on the
// whole documents, never from the store under test.
package storetest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// Store is what the suite checks: the engine's view of one database.
type Store interface {
	watch.Store
	resume.Store
	resume.LeaseStore
}

// Open returns a fresh store holding docs in the four source collections
// (no checkpoint, no lease, an empty key index), and a function returning
// every source document as stored at the time of the call.
type Open func(t *testing.T, docs materialize.Docs) (Store, func() materialize.Docs)

// Run runs the suite, each test on a store of its own from open.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"SourceReads", testSourceReads},
		{"HomeworksRestricted", testHomeworksRestricted},
		{"ReadIsReadSeparately", testReadIsReadSeparately},
		{"ApplyWritesDerivedFields", testApplyWrites},
		{"ApplyNeverUpserts", testApplyNeverUpserts},
		{"KeyIndex", testKeyIndex},
		{"Scanner", testScanner},
		{"Checkpoint", testCheckpoint},
		{"Lease", testLease},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

var (
	hw1 = bson.ObjectID{0x65, 0xe0, 1}
	hw2 = bson.ObjectID{0x65, 0xe0, 2}
	hw3 = bson.ObjectID{0x65, 0xe0, 3} // studentStatus is not a document
	hw9 = bson.ObjectID{0x65, 0xe0, 9} // does not exist
)

func sub(n byte) bson.ObjectID { return bson.ObjectID{0x65, 0xe1, n} }

// raw builds a document from alternating keys and values.
var raw = materializetest.Raw

func at(day int) bson.DateTime {
	return bson.NewDateTimeFromTime(time.Date(2026, 2, day, 0, 0, 0, 0, time.UTC))
}

func entry(score int, ids ...bson.ObjectID) bson.D {
	a := bson.A{}
	for _, id := range ids {
		a = append(a, id)
	}
	return bson.D{{Key: "score", Value: score}, {Key: "problemStatus", Value: 0}, {Key: "submissionIds", Value: a}, {Key: "rawScore", Value: score}}
}

// fixture is a small database holding each kind of document the reads
// distinguish: readable and unreadable users, problems and submissions, a
// homework holding a user value that is not a document, one whose
// studentStatus is not a document.
func fixture() materialize.Docs {
	submission := func(id bson.ObjectID, user string, problem, day, status, score int) bson.Raw {
		return raw("_id", id, "user", user, "problem", problem, "languageType", 1, "timestamp", at(day), "status", status, "score", score)
	}
	homework := func(id bson.ObjectID, ss any) bson.Raw {
		return raw("_id", id, "homeworkName", "hw "+id.Hex()[4:6], "duration", bson.D{{Key: "start", Value: at(1)}, {Key: "end", Value: at(20)}},
			"penalty", "score = score * 0.5", "problemIds", bson.A{1, 2}, "studentStatus", ss)
	}
	return materialize.Docs{
		Users: []bson.Raw{
			raw("_id", "alice", "username", "alice", "submission", 3, "AC_submission", 1, "AC_problem_ids", bson.A{1}),
			raw("_id", "bob", "username", "bob"),
			raw("_id", "carol", "submission", "many"),
		},
		Problems: []bson.Raw{
			raw("_id", 1, "problemName", "one", "homeworks", bson.A{hw1, hw2}),
			raw("_id", 2, "problemName", "two", "homeworks", bson.A{hw2, hw9}),
			raw("_id", 3, "problemName", "three", "homeworks", "not an array"),
			raw("_id", 4, "problemName", "four"),
		},
		Homeworks: []bson.Raw{
			homework(hw1, bson.D{
				{Key: "alice", Value: bson.D{{Key: "1", Value: entry(100, sub(1))}}},
				{Key: "bob", Value: bson.D{{Key: "1", Value: entry(0)}, {Key: "2", Value: entry(7)}}},
			}),
			homework(hw2, bson.D{
				{Key: "alice", Value: bson.D{{Key: "1", Value: entry(50)}, {Key: "2", Value: entry(60, sub(3))}}},
				{Key: "dave", Value: "not a document"},
			}),
			homework(hw3, 5),
		},
		Submissions: []bson.Raw{
			submission(sub(1), "alice", 1, 2, 0, 100),
			submission(sub(2), "alice", 1, 3, 1, 40),
			submission(sub(3), "alice", 2, 4, 0, 60),
			submission(sub(4), "bob", 1, 5, 2, 10),
			submission(sub(5), "erin", 2, 6, 0, 100),
			raw("_id", sub(6), "user", "alice", "problem", "one", "timestamp", at(7)),
			raw("_id", sub(7), "user", "bob", "problem", 1),
		},
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// decoded is what materialize's decoders read from the fixture.
type decoded struct {
	subs      []materialize.Submission // decodable, in SortGrouped order
	badSubs   map[string]int           // user → undecodable submissions naming them
	problems  map[int64]materialize.Problem
	homeworks map[bson.ObjectID]materialize.Homework
	users     map[string]watch.StoredUser
}

func decode(t *testing.T, docs materialize.Docs) decoded {
	t.Helper()
	d := decoded{badSubs: map[string]int{}, problems: map[int64]materialize.Problem{},
		homeworks: map[bson.ObjectID]materialize.Homework{}, users: map[string]watch.StoredUser{}}
	for _, r := range docs.Submissions {
		s, err := materialize.DecodeSubmission(r)
		if err != nil {
			d.badSubs[r.Lookup("user").StringValue()]++
			continue
		}
		d.subs = append(d.subs, s)
	}
	materialize.SortGrouped(d.subs)
	for _, r := range docs.Problems {
		if p, err := materialize.DecodeProblem(r); err == nil {
			d.problems[p.ID] = p
		}
	}
	for _, r := range docs.Homeworks {
		if h, err := materialize.DecodeHomework(r); err == nil {
			d.homeworks[h.ID] = h
		}
	}
	for _, r := range docs.Users {
		name, err := materialize.DecodeUserID(r)
		if err != nil {
			t.Fatal(err)
		}
		st, ok := materialize.DecodeUserStats(r)
		d.users[name] = watch.StoredUser{Stats: st, OK: ok}
	}
	return d
}

func byID(subs []materialize.Submission) []materialize.Submission {
	out := slices.Clone(subs)
	slices.SortFunc(out, func(a, b materialize.Submission) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

func filter(subs []materialize.Submission, keep func(materialize.Submission) bool) []materialize.Submission {
	var out []materialize.Submission
	for _, s := range subs {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func testSourceReads(t *testing.T, open Open) {
	docs := fixture()
	st, _ := open(t, docs)
	ctx := ctxOf(t)
	want := decode(t, docs)

	// Submissions: the union of the named users' and the named pairs';
	// undecodable ones of a named user in bad.
	got, bad, err := st.Submissions(ctx, []string{"alice"}, []materialize.Pair{{User: "erin", Problem: 2}, {User: "bob", Problem: 9}})
	if err != nil {
		t.Fatal(err)
	}
	w := filter(want.subs, func(s materialize.Submission) bool { return s.User == "alice" || s.User == "erin" })
	if !slices.EqualFunc(byID(got), byID(w), submissionEqual) {
		t.Errorf("Submissions(alice; erin/2, bob/9) = %v, want %v", byID(got), byID(w))
	}
	if len(bad) != want.badSubs["alice"] {
		t.Errorf("Submissions(alice): %d undecodable, want %d: %v", len(bad), want.badSubs["alice"], bad)
	}
	got, _, err = st.SubmissionsByID(ctx, []bson.ObjectID{sub(4), sub(9), sub(1)})
	if err != nil {
		t.Fatal(err)
	}
	w = filter(want.subs, func(s materialize.Submission) bool { return s.ID == sub(4) || s.ID == sub(1) })
	if !slices.EqualFunc(byID(got), byID(w), submissionEqual) {
		t.Errorf("SubmissionsByID(4, 9, 1) = %v, want %v", got, w)
	}

	// UserStats: DeriveUser over each named user's decodable submissions,
	// zero values for a user without one.
	stats, bad, err := st.UserStats(ctx, []string{"alice", "bob", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "nobody"} {
		d := materialize.DeriveUser(filter(want.subs, func(s materialize.Submission) bool { return s.User == u }))
		if !stats[u].Equal(d) {
			t.Errorf("UserStats(%s) = %+v, want %+v", u, stats[u], d)
		}
	}
	if len(bad) != want.badSubs["alice"]+want.badSubs["bob"] {
		t.Errorf("UserStats(alice, bob): %d undecodable, want %d", len(bad), want.badSubs["alice"]+want.badSubs["bob"])
	}

	// Problems: the named ones that exist and decode; an undecodable named
	// one in bad.
	probs, bad, err := st.Problems(ctx, []int64{1, 3, 4, 99})
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 2 || len(bad) != 1 {
		t.Errorf("Problems(1, 3, 4, 99): %d problems, %d undecodable; want 2 and 1", len(probs), len(bad))
	}
	for _, id := range []int64{1, 4} {
		if p := probs[id]; p == nil || !slices.Equal(p.Homeworks, want.problems[id].Homeworks) {
			t.Errorf("Problems: %d = %+v, want %+v", id, p, want.problems[id])
		}
	}
	listing, err := st.ProblemsListing(ctx, []bson.ObjectID{hw1, hw2, hw9, hw3})
	if err != nil {
		t.Fatal(err)
	}
	wl := map[bson.ObjectID][]int64{hw1: {1}, hw2: {1, 2}, hw9: {2}}
	for _, id := range []bson.ObjectID{hw1, hw2, hw9, hw3} {
		if g := slices.Sorted(slices.Values(listing[id])); !slices.Equal(g, wl[id]) {
			t.Errorf("ProblemsListing(%s) = %v, want %v", id.Hex(), g, wl[id])
		}
	}

	// Homeworks, EntryKeys, EntriesForProblems.
	hws, bad, err := st.Homeworks(ctx, []bson.ObjectID{hw1, hw2, hw3, hw9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(hws) != 2 || len(bad) != 1 {
		t.Errorf("Homeworks(1, 2, 3, 9): %d homeworks, %d undecodable; want 2 and 1", len(hws), len(bad))
	}
	for id, h := range hws {
		w := want.homeworks[id]
		if h.ID != id || h.End != w.End || h.Penalty != w.Penalty || !maps.EqualFunc(h.Students, w.Students, maps.Equal) {
			t.Errorf("Homeworks: %s = %+v, want %+v", id.Hex(), h.Homework, w)
		}
		checkStored(t, docs, h)
	}
	if h := hws[hw2]; h != nil && (len(h.Skipped) != 1 || h.Skipped[0].Field != materialize.FieldStudentStatus+".dave") {
		t.Errorf("Homeworks: %s skipped %v, want studentStatus.dave", hw2.Hex(), h.Skipped)
	}
	keys, bad, err := st.EntryKeys(ctx, []bson.ObjectID{hw1, hw2, hw9})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []bson.ObjectID{hw1, hw2} {
		var w []watch.EntryRef
		for u, ps := range want.homeworks[id].Students {
			for pk := range ps {
				w = append(w, watch.EntryRef{User: u, ProblemKey: pk})
			}
		}
		if !sameRefs(keys[id], w) {
			t.Errorf("EntryKeys(%s) = %v, want %v", id.Hex(), keys[id], w)
		}
	}
	if len(keys[hw9]) != 0 || len(bad) != 1 {
		t.Errorf("EntryKeys: %d keys of a missing homework, %d bad (want 0, 1: studentStatus.dave)", len(keys[hw9]), len(bad))
	}
	holders, err := st.EntriesForProblems(ctx, []int64{1, 2, 99})
	if err != nil {
		t.Fatal(err)
	}
	wh := map[int64][]materialize.HomeworkUser{
		1: {{Homework: hw1, User: "alice"}, {Homework: hw1, User: "bob"}, {Homework: hw2, User: "alice"}},
		2: {{Homework: hw1, User: "bob"}, {Homework: hw2, User: "alice"}},
	}
	for _, p := range []int64{1, 2, 99} {
		if !sameHolders(holders[p], wh[p]) {
			t.Errorf("EntriesForProblems(%d) = %v, want %v", p, holders[p], wh[p])
		}
	}

	// Users: the named users with a document; OK false when a derived
	// field is unreadable.
	users, err := st.Users(ctx, []string{"alice", "bob", "carol", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := users["nobody"]; ok || len(users) != 3 {
		t.Errorf("Users: %v, want alice, bob and carol", users)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if g, w := users[u], want.users[u]; g.OK != w.OK || (w.OK && !g.Stats.Equal(w.Stats)) {
			t.Errorf("Users(%s) = %+v, want %+v", u, g, w)
		}
	}
}

func submissionEqual(a, b materialize.Submission) bool { return a == b }

func sameRefs(a, b []watch.EntryRef) bool {
	cmp := func(x, y watch.EntryRef) int {
		if c := bytes.Compare([]byte(x.User), []byte(y.User)); c != 0 {
			return c
		}
		return bytes.Compare([]byte(x.ProblemKey), []byte(y.ProblemKey))
	}
	return slices.Equal(slices.SortedFunc(slices.Values(a), cmp), slices.SortedFunc(slices.Values(b), cmp))
}

func sameHolders(a, b []materialize.HomeworkUser) bool {
	cmp := func(x, y materialize.HomeworkUser) int {
		if c := bytes.Compare(x.Homework[:], y.Homework[:]); c != 0 {
			return c
		}
		return bytes.Compare([]byte(x.User), []byte(y.User))
	}
	return slices.Equal(slices.SortedFunc(slices.Values(a), cmp), slices.SortedFunc(slices.Values(b), cmp))
}

// checkStored checks that h's Stored holds, for each of its students, the
// entry values of the homework document in docs, byte for byte.
func checkStored(t *testing.T, docs materialize.Docs, h *watch.HomeworkDoc) {
	t.Helper()
	for _, r := range docs.Homeworks {
		if id, _ := r.Lookup("_id").ObjectIDOK(); id != h.ID {
			continue
		}
		for u, ps := range h.Students {
			for pk := range ps {
				w := r.Lookup(materialize.FieldStudentStatus, u, pk)
				if g, ok := h.Stored[u][pk]; !ok || g.Type != w.Type || !bytes.Equal(g.Value, w.Value) {
					t.Errorf("homework %s: stored %s.%s = %v, want %v", h.ID.Hex(), u, pk, g, w)
				}
			}
		}
		if len(h.Stored) != len(h.Students) {
			t.Errorf("homework %s: stored values of %d users, students %d", h.ID.Hex(), len(h.Stored), len(h.Students))
		}
	}
}

// testHomeworksRestricted: Homeworks restricted to users holds only their
// students, stored values and skipped parts.
func testHomeworksRestricted(t *testing.T, open Open) {
	docs := fixture()
	st, _ := open(t, docs)
	ctx := ctxOf(t)
	want := decode(t, docs)
	for _, users := range [][]string{{"alice"}, {"bob", "nobody"}, {"dave"}, {}} {
		hws, _, err := st.Homeworks(ctx, []bson.ObjectID{hw1, hw2}, users)
		if err != nil {
			t.Fatal(err)
		}
		for id, h := range hws {
			for u := range h.Students {
				if !slices.Contains(users, u) {
					t.Errorf("Homeworks(%v): %s holds student %s", users, id.Hex(), u)
				}
			}
			for _, u := range users {
				if _, ok := want.homeworks[id].Students[u]; ok != (h.Students[u] != nil) {
					t.Errorf("Homeworks(%v): %s student %s present %v, want %v", users, id.Hex(), u, !ok, ok)
				}
			}
			for _, e := range h.Skipped {
				if !slices.Contains(users, e.Field[len(materialize.FieldStudentStatus)+1:]) {
					t.Errorf("Homeworks(%v): %s skipped %s", users, id.Hex(), e.Field)
				}
			}
			checkStored(t, docs, h)
		}
		if dave := slices.Contains(users, "dave"); dave != (hws[hw2] != nil && len(hws[hw2].Skipped) == 1) {
			t.Errorf("Homeworks(%v): %s skipped %v", users, hw2.Hex(), hws[hw2])
		}
	}
}

// docsByID indexes documents by their _id's bytes.
func docsByID(ds []bson.Raw) map[string]bson.Raw {
	m := map[string]bson.Raw{}
	for _, d := range ds {
		v := d.Lookup("_id")
		m[string(rune(v.Type))+string(v.Value)] = d
	}
	return m
}

// sameDocs reports the documents of two reads that differ, by _id.
func sameDocs(t *testing.T, what string, before, after materialize.Docs, except map[string]bool) {
	t.Helper()
	for _, c := range []struct {
		name string
		a, b []bson.Raw
	}{
		{"user", before.Users, after.Users}, {"problem", before.Problems, after.Problems},
		{"homework", before.Homeworks, after.Homeworks}, {"submission", before.Submissions, after.Submissions},
	} {
		a, b := docsByID(c.a), docsByID(c.b)
		if len(a) != len(b) {
			t.Errorf("%s: %d %s documents, had %d", what, len(b), c.name, len(a))
		}
		for k, d := range a {
			if except[c.name+k] {
				continue
			}
			if !equalDoc(d, b[k]) {
				t.Errorf("%s: %s %v changed:\n%v\n%v", what, c.name, d.Lookup("_id"), d, b[k])
			}
		}
	}
}

// equalDoc compares documents element by element (values byte for byte).
func equalDoc(a, b bson.Raw) bool {
	ea, err1 := a.Elements()
	eb, err2 := b.Elements()
	if err1 != nil || err2 != nil || len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if ea[i].Key() != eb[i].Key() {
			return false
		}
		va, vb := ea[i].Value(), eb[i].Value()
		if va.Type != vb.Type || !bytes.Equal(va.Value, vb.Value) {
			return false
		}
	}
	return true
}

// testApplyWrites: Apply sets the derived fields of existing users and
// existing entries, and nothing else of any document.
func testApplyWrites(t *testing.T, open Open) {
	docs := fixture()
	st, read := open(t, docs)
	ctx := ctxOf(t)
	before := read()
	us := materialize.UserStats{Submission: 9, ACSubmission: 4, ACProblemIDs: []int64{2, 1}}
	e := materialize.Entry{Score: 75, ProblemStatus: 0, HasStatus: true, SubmissionIDs: []string{sub(1).Hex(), sub(2).Hex()}, RawScore: 80, HasRaw: true}
	w := &watch.Writes{
		Users:   []watch.UserWrite{{User: "bob", Stats: us}},
		Entries: []watch.EntryWrite{{Homework: hw1, User: "alice", ProblemKey: "1", Entry: e}},
	}
	at, err := st.Apply(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	// Its operationTime is known and the store's clock has reached it
	// (the echo rule needs reads after Apply to be causally after it).
	if at.IsZero() {
		t.Error("Apply returned a zero operationTime for a write that changed two documents")
	} else if now, err := st.ClusterTime(ctx); err != nil {
		t.Fatal(err)
	} else if now.Before(at) {
		t.Errorf("Apply's operationTime %v is after the cluster time read after it, %v", at, now)
	}
	after := read()
	k := func(v any) string {
		tp, data, _ := bson.MarshalValue(v)
		return string(rune(tp)) + string(data)
	}
	sameDocs(t, "Apply", before, after, map[string]bool{"user" + k("bob"): true, "homework" + k(hw1): true})
	bob := docsByID(after.Users)[k("bob")]
	if !us.MatchesStored(bob) {
		t.Errorf("Apply: bob %v, want %+v", bob, us)
	}
	if name, _ := bob.Lookup("username").StringValueOK(); name != "bob" {
		t.Errorf("Apply: bob lost a field: %v", bob)
	}
	h, hb := docsByID(after.Homeworks)[k(hw1)], docsByID(before.Homeworks)[k(hw1)]
	if v := h.Lookup(materialize.FieldStudentStatus, "alice", "1"); !e.MatchesStored(v) {
		t.Errorf("Apply: alice's entry %v, want %+v", v, e)
	}
	for _, path := range [][]string{{"homeworkName"}, {"duration"}, {"penalty"}, {"problemIds"}, {materialize.FieldStudentStatus, "bob"}} {
		if a, b := hb.Lookup(path...), h.Lookup(path...); a.Type != b.Type || !bytes.Equal(a.Value, b.Value) {
			t.Errorf("Apply: homework %v changed from %v to %v", path, a, b)
		}
	}
	// Applying the same values again changes nothing.
	if _, err := st.Apply(ctx, w); err != nil {
		t.Fatal(err)
	}
	sameDocs(t, "Apply again", after, read(), nil)
}

// testApplyNeverUpserts: writes to a user, a homework, a user's part of
// studentStatus or an entry that does not exist create nothing.
func testApplyNeverUpserts(t *testing.T, open Open) {
	docs := fixture()
	st, read := open(t, docs)
	ctx := ctxOf(t)
	before := read()
	e := materialize.StartEntry()
	w := &watch.Writes{
		Users: []watch.UserWrite{{User: "nobody", Stats: materialize.UserStats{Submission: 1}}},
		Entries: []watch.EntryWrite{
			{Homework: hw9, User: "alice", ProblemKey: "1", Entry: e}, // no such homework
			{Homework: hw1, User: "erin", ProblemKey: "2", Entry: e},  // no such user key
			{Homework: hw1, User: "alice", ProblemKey: "2", Entry: e}, // no such problem key
			{Homework: hw2, User: "dave", ProblemKey: "1", Entry: e},  // the user's value is not a document
			{Homework: hw3, User: "alice", ProblemKey: "1", Entry: e}, // studentStatus is not a document
		},
	}
	if _, err := st.Apply(ctx, w); err != nil && !errors.Is(err, watch.ErrWriteRejected) {
		t.Fatal(err)
	}
	sameDocs(t, "Apply to what does not exist", before, read(), nil)
}

// testKeyIndex: LookupKeys returns what RecordKeys recorded; records only
// grow, a repeated record is kept once.
func testKeyIndex(t *testing.T, open Open) {
	st, _ := open(t, fixture())
	ctx := ctxOf(t)
	got, err := st.LookupKeys(ctx, []bson.ObjectID{sub(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("LookupKeys on an empty index = %v", got)
	}
	a, b := materialize.Pair{User: "alice", Problem: 1}, materialize.Pair{User: "bob", Problem: 2}
	for _, rec := range []map[bson.ObjectID][]materialize.Pair{{sub(1): {a}, sub(2): {a}}, {sub(1): {b}}, {sub(1): {a}}} {
		if err := st.RecordKeys(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	got, err = st.LookupKeys(ctx, []bson.ObjectID{sub(1), sub(2), sub(3)})
	if err != nil {
		t.Fatal(err)
	}
	cmp := func(x, y materialize.Pair) int {
		if c := bytes.Compare([]byte(x.User), []byte(y.User)); c != 0 {
			return c
		}
		return int(x.Problem - y.Problem)
	}
	want := map[bson.ObjectID][]materialize.Pair{sub(1): {a, b}, sub(2): {a}}
	if len(got) != len(want) {
		t.Errorf("LookupKeys = %v, want %v", got, want)
	}
	for id, ps := range want {
		if g := slices.SortedFunc(slices.Values(got[id]), cmp); !slices.Equal(g, ps) {
			t.Errorf("LookupKeys(%s) = %v, want %v", id.Hex(), g, ps)
		}
	}
}

// testScanner: the scans return every document, submissions in (user,
// problem, timestamp, _id) order; undecodable ones go to bad. The cluster
// time is set and does not go back.
func testScanner(t *testing.T, open Open) {
	docs := fixture()
	st, _ := open(t, docs)
	ctx := ctxOf(t)
	want := decode(t, docs)
	var got []materialize.Submission
	nbad := 0
	err := st.ScanSubmissions(ctx, func(s materialize.Submission) error { got = append(got, s); return nil },
		func(*materialize.DecodeError) { nbad++ })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want.subs, submissionEqual) || nbad != len(docs.Submissions)-len(want.subs) {
		t.Errorf("ScanSubmissions = %v and %d bad, want %v and %d", got, nbad, want.subs, len(docs.Submissions)-len(want.subs))
	}
	stop := errors.New("stop")
	n := 0
	err = st.ScanSubmissions(ctx, func(materialize.Submission) error { n++; return stop }, func(*materialize.DecodeError) {})
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("ScanSubmissions with fn failing: %v after %d calls, want the error after 1", err, n)
	}
	probs, bad, err := st.AllProblems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != len(want.problems) || len(probs)+len(bad) != len(docs.Problems) {
		t.Errorf("AllProblems: %d and %d bad, want %d of %d", len(probs), len(bad), len(want.problems), len(docs.Problems))
	}
	hws, bad, err := st.AllHomeworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hws) != len(want.homeworks) || len(hws)+len(bad) != len(docs.Homeworks) {
		t.Errorf("AllHomeworks: %d and %d bad, want %d of %d", len(hws), len(bad), len(want.homeworks), len(docs.Homeworks))
	}
	for _, h := range hws {
		checkStored(t, docs, h)
	}
	users, bad, err := st.AllUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != len(want.users) || len(bad) != 0 {
		t.Errorf("AllUsers: %d and %d bad, want %d", len(users), len(bad), len(want.users))
	}
	for u, w := range want.users {
		if g := users[u]; g.OK != w.OK || (w.OK && !g.Stats.Equal(w.Stats)) {
			t.Errorf("AllUsers: %s = %+v, want %+v", u, g, w)
		}
	}
	t1, err := st.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t2, err := st.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if t1.IsZero() || t2.Before(t1) {
		t.Errorf("ClusterTime: %v then %v, want a set time that does not go back", t1, t2)
	}
}

// sameCheckpoint compares checkpoints, times to the millisecond (BSON
// dates).
func sameCheckpoint(a, b resume.Checkpoint) bool {
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	return bytes.Equal(a.Token, b.Token) && a.StartAt == b.StartAt && a.ClusterTime == b.ClusterTime &&
		ms(a.RebuiltAt) == ms(b.RebuiltAt) && ms(a.CaughtUpAt) == ms(b.CaughtUpAt) && ms(a.SavedAt) == ms(b.SavedAt) &&
		a.Epoch == b.Epoch && a.Owner == b.Owner
}

// testCheckpoint: a checkpoint saves and loads back; once a lease exists,
// only a save at its current epoch lands (resume.ErrFenced otherwise).
func testCheckpoint(t *testing.T, open Open) {
	st, _ := open(t, fixture())
	ctx := ctxOf(t)
	if _, ok, err := st.LoadCheckpoint(ctx); err != nil || ok {
		t.Fatalf("LoadCheckpoint on a fresh store: ok %v, %v", ok, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	cp := resume.Checkpoint{StartAt: bson.Timestamp{T: 1_700_000_000, I: 2}, SavedAt: now, RebuiltAt: now}
	if err := st.SaveCheckpoint(ctx, cp); err != nil {
		t.Fatalf("SaveCheckpoint at epoch 0, no lease: %v", err)
	}
	loadIs(t, st, cp)

	l, ok, err := st.Acquire(ctx, "a", time.Hour)
	if err != nil || !ok {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	tok := raw("_data", "8264F0A1B2000000012B")
	next := resume.Checkpoint{Token: tok, ClusterTime: bson.Timestamp{T: 1_700_000_100, I: 1}, SavedAt: now, Epoch: l.Epoch, Owner: "a", CaughtUpAt: now}
	for _, stale := range []int64{0, l.Epoch - 1, l.Epoch + 1} {
		c := next
		c.Epoch = stale
		if err := st.SaveCheckpoint(ctx, c); !errors.Is(err, resume.ErrFenced) {
			t.Errorf("SaveCheckpoint at epoch %d, the lease at %d: %v, want ErrFenced", stale, l.Epoch, err)
		}
	}
	loadIs(t, st, cp)
	if err := st.SaveCheckpoint(ctx, next); err != nil {
		t.Fatalf("SaveCheckpoint at the lease's epoch: %v", err)
	}
	loadIs(t, st, next)
	// A new holder fences the old epoch.
	if err := st.Release(ctx, "a", l.Epoch); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Acquire(ctx, "b", time.Hour); err != nil || !ok {
		t.Fatalf("Acquire after Release: %v, %v", ok, err)
	}
	if err := st.SaveCheckpoint(ctx, next); !errors.Is(err, resume.ErrFenced) {
		t.Errorf("SaveCheckpoint at the released epoch: %v, want ErrFenced", err)
	}
	loadIs(t, st, next)
}

func loadIs(t *testing.T, st Store, want resume.Checkpoint) {
	t.Helper()
	got, ok, err := st.LoadCheckpoint(context.Background())
	if err != nil || !ok || !sameCheckpoint(got, want) {
		t.Errorf("LoadCheckpoint = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

// testLease: one holder at a time; renew and release only by the holder
// at its epoch; a released or expired lease goes to the next owner at the
// next epoch.
func testLease(t *testing.T, open Open) {
	st, _ := open(t, fixture())
	ctx := ctxOf(t)
	if _, ok, err := st.Current(ctx); err != nil || ok {
		t.Fatalf("Current on a fresh store: %v, %v", ok, err)
	}
	a, ok, err := st.Acquire(ctx, "a", time.Hour)
	if err != nil || !ok || a.Owner != "a" || a.Epoch != 1 || !a.Expires.After(time.Now().Add(50*time.Minute)) {
		t.Fatalf("Acquire(a) = %+v, %v, %v; want a at epoch 1 for an hour", a, ok, err)
	}
	check := func(what string, l resume.Lease, ok, wantOK bool, err error, owner string, epoch int64) {
		t.Helper()
		if err != nil || ok != wantOK || l.Owner != owner || l.Epoch != epoch {
			t.Errorf("%s = %+v, ok %v, %v; want %s at epoch %d, ok %v", what, l, ok, err, owner, epoch, wantOK)
		}
	}
	l, ok, err := st.Acquire(ctx, "b", time.Hour)
	check("Acquire(b) while a holds it", l, ok, false, err, "a", 1)
	l, ok, err = st.Renew(ctx, "b", 1, time.Hour)
	check("Renew(b, 1)", l, ok, false, err, "a", 1)
	l, ok, err = st.Renew(ctx, "a", 2, time.Hour)
	check("Renew(a, 2)", l, ok, false, err, "a", 1)
	l, ok, err = st.Renew(ctx, "a", 1, 2*time.Hour)
	check("Renew(a, 1)", l, ok, true, err, "a", 1)
	if !l.Expires.After(a.Expires) {
		t.Errorf("Renew(a, 1, 2h): expires %v, not after %v", l.Expires, a.Expires)
	}
	l, ok, err = st.Current(ctx)
	check("Current", l, ok, true, err, "a", 1)
	if err := st.Release(ctx, "b", 1); err != nil {
		t.Fatal(err)
	}
	l, ok, err = st.Acquire(ctx, "b", time.Hour)
	check("Acquire(b) after b's Release of a's lease", l, ok, false, err, "a", 1)
	if err := st.Release(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	l, ok, err = st.Acquire(ctx, "b", time.Millisecond)
	check("Acquire(b) after a's Release", l, ok, true, err, "b", 2)
	// Expiry is the store's clock's: a millisecond lease is over soon, and
	// b's next term has the next epoch.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, ok, err = st.Acquire(ctx, "b", time.Hour)
		if err != nil || ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	check("Acquire(b) after b's lease expired", l, ok, true, err, "b", 3)
	// A Release of b's ended term, handled late, leaves its live term.
	if err := st.Release(ctx, "b", 2); err != nil {
		t.Fatal(err)
	}
	l, ok, err = st.Acquire(ctx, "c", time.Hour)
	check("Acquire(c) after b's Release of its ended epoch 2", l, ok, false, err, "b", 3)
	if err := st.Release(ctx, "b", 3); err != nil {
		t.Fatal(err)
	}
	l, ok, err = st.Acquire(ctx, "c", time.Hour)
	check("Acquire(c) after b's Release", l, ok, true, err, "c", 4)
	l, ok, err = st.Renew(ctx, "b", 3, time.Hour)
	check("Renew(b, 3) after c took over", l, ok, false, err, "c", 4)
}

// randomDocs is a random database holding, besides fixture's documents,
// submissions, users, problems and homeworks of the shapes the decoders
// tell apart: undecodable fields, a symbol, array or missing user, a
// string _id, whole doubles, usernames with '.' and '$', user values in
// studentStatus that are not documents.
func randomDocs(r *rand.Rand) materialize.Docs {
	docs := fixture()
	names := []string{"alice", "bob", "carol", "a.b", "$c"}
	pick := func(vals ...any) any { return vals[r.IntN(len(vals))] }
	for i := range 30 + r.IntN(30) {
		u := names[r.IntN(len(names))]
		var id any = bson.ObjectID{0x66, byte(i), byte(r.IntN(256))}
		if r.IntN(25) == 0 {
			id = fmt.Sprintf("s%d", i)
		}
		kv := []any{"_id", id, "user", pick(u, u, u, u, u, u, bson.Symbol(u), bson.A{u}, int32(1)),
			"problem", pick(int32(1), int32(2), int64(3), int32(4), float64(2), "2"),
			"languageType", pick(int32(0), int32(1), int64(2)),
			"timestamp", pick(at(1+r.IntN(9)), at(1+r.IntN(9)), at(1+r.IntN(9)), "soon"),
			"status", pick(int32(0), int32(1), int32(-1), int32(-2), int64(0), nil, float64(0)),
			"score", pick(int32(100), int32(100), int32(0), int32(60), int64(100), nil, float64(100), "100")}
		docs.Submissions = append(docs.Submissions, raw(kv...))
	}
	docs.Users = append(docs.Users,
		raw("_id", "a.b", "submission", pick(int32(2), "two"), "AC_submission", int32(1), "AC_problem_ids", bson.A{int32(2)}),
		raw("_id", "$c", "AC_problem_ids", pick(bson.A{}, "none")))
	docs.Problems = append(docs.Problems, raw("_id", int64(5), "homeworks", bson.A{hw1, "x"}))
	ss := bson.D{}
	for _, u := range names {
		switch r.IntN(3) {
		case 0:
			ss = append(ss, bson.E{Key: u, Value: "not a document"})
		case 1:
			ss = append(ss, bson.E{Key: u, Value: bson.D{{Key: "1", Value: entry(r.IntN(101))}, {Key: "2", Value: entry(0)}}})
		}
	}
	docs.Homeworks = append(docs.Homeworks, raw("_id", bson.ObjectID{0x65, 0xe0, 4}, "duration",
		bson.D{{Key: "start", Value: at(1)}, {Key: "end", Value: at(5)}}, "penalty", "score = score", "studentStatus", ss))
	return docs
}

// randomReads is a random Reads over the names randomDocs uses.
func randomReads(r *rand.Rand) *watch.Reads {
	some := func(n int, f func(i int)) {
		for i := range n {
			if r.IntN(2) == 0 {
				f(i)
			}
		}
	}
	names := []string{"alice", "bob", "carol", "a.b", "$c", "nobody"}
	rd := &watch.Reads{}
	some(len(names), func(i int) { rd.Users = append(rd.Users, names[i]) })
	some(len(names), func(i int) { rd.HomeworkUsers = append(rd.HomeworkUsers, names[i]) })
	if r.IntN(6) == 0 {
		rd.HomeworkUsers = nil
	}
	some(8, func(int) {
		rd.Pairs = append(rd.Pairs, materialize.Pair{User: names[r.IntN(len(names))], Problem: int64(1 + r.IntN(4))})
	})
	some(7, func(i int) { rd.Problems = append(rd.Problems, int64(i)) })
	some(5, func(i int) {
		rd.Homeworks = append(rd.Homeworks, []bson.ObjectID{hw1, hw2, hw3, hw9, {0x65, 0xe0, 4}}[i])
	})
	return rd
}

// SortedResult is r with its lists in one order: submissions by _id,
// undecodable documents by collection, _id, field, reason (a store may
// return a part's documents in any order).
func SortedResult(r *watch.ReadResult) *watch.ReadResult {
	out := *r
	if r.Submissions != nil {
		out.Submissions = byID(r.Submissions)
	}
	bad := func(b []*materialize.DecodeError) []*materialize.DecodeError {
		if b == nil {
			return nil
		}
		return slices.SortedFunc(slices.Values(b), func(x, y *materialize.DecodeError) int {
			return cmp.Or(cmp.Compare(x.Collection, y.Collection), cmp.Compare(x.ID, y.ID), cmp.Compare(x.Field, y.Field), cmp.Compare(x.Reason, y.Reason))
		})
	}
	out.SubmissionsBad, out.StatsBad, out.ProblemsBad, out.HomeworksBad = bad(r.SubmissionsBad), bad(r.StatsBad), bad(r.ProblemsBad), bad(r.HomeworksBad)
	return &out
}

// testReadIsReadSeparately: Read returns exactly what ReadSeparately, its
// definition, returns from the same store, over random Reads of random
// databases: the same decoded values and the same undecodable documents
// in each part, nil for a part not asked for.
func testReadIsReadSeparately(t *testing.T, open Open) {
	for seed := range 3 {
		r := rand.New(rand.NewPCG(uint64(seed), 23))
		st, _ := open(t, randomDocs(r))
		ctx := ctxOf(t)
		for i := range 25 {
			rd := randomReads(r)
			if i == 0 {
				rd = &watch.Reads{}
			}
			got, err := st.Read(ctx, rd)
			if err != nil {
				t.Fatal(err)
			}
			want, err := watch.ReadSeparately(ctx, st, rd)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := SortedResult(got), SortedResult(want); !reflect.DeepEqual(g, w) {
				t.Errorf("seed %d, read %d %+v:\nRead           %+v\nReadSeparately %+v", seed, i, rd, g, w)
			}
		}
	}
}
