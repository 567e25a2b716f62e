package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// loaded is the dump docs loaded into an in-memory database as explain
// --dump loaded it before it streamed: collection by collection in
// dump.Sources order, a repeated _id replacing the document in place.
func loaded(t *testing.T, docs materialize.Docs) *memstore.Store {
	t.Helper()
	st := memstore.New()
	for coll, ds := range colls(docs) {
		if err := st.Load(coll, ds...); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func colls(d materialize.Docs) map[string][]bson.Raw {
	return map[string][]bson.Raw{
		materialize.CollUser: d.Users, materialize.CollProblem: d.Problems,
		materialize.CollHomework: d.Homeworks, materialize.CollSubmission: d.Submissions,
	}
}

// writeDump writes docs as a mongodump directory.
func writeDump(t *testing.T, docs materialize.Docs) dump.Dir {
	t.Helper()
	dir := t.TempDir()
	if err := dump.Write(dir, colls(docs)); err != nil {
		t.Fatal(err)
	}
	d, err := dump.Resolve(dir, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type pair struct {
	user    string
	problem int64
}

// pairsOf names the (user, problem) pairs the documents mention (by a
// submission or an entry) and a few with an unknown user or problem.
func pairsOf(docs materialize.Docs) []pair {
	const nobody, nothing = "nobody-at-all", 987654
	users, problems := []string{nobody}, []int64{nothing}
	var out []pair
	add := func(u string, p int64) {
		if !slices.Contains(users, u) {
			users = append(users, u)
		}
		if !slices.Contains(problems, p) {
			problems = append(problems, p)
		}
		if !slices.Contains(out, pair{u, p}) {
			out = append(out, pair{u, p})
		}
	}
	for _, u := range docs.Users {
		if s, ok := u.Lookup("_id").StringValueOK(); ok && !slices.Contains(users, s) {
			users = append(users, s)
		}
	}
	for _, p := range docs.Problems {
		if id, ok := p.Lookup("_id").AsInt64OK(); ok && !slices.Contains(problems, id) {
			problems = append(problems, id)
		}
	}
	for _, s := range docs.Submissions {
		u, uok := s.Lookup("user").StringValueOK()
		p, pok := s.Lookup("problem").AsInt64OK()
		if uok && pok {
			add(u, p)
		}
	}
	for _, h := range docs.Homeworks {
		ss, _ := h.Lookup("studentStatus").DocumentOK()
		es, _ := ss.Elements()
		for _, e := range es {
			ud, _ := e.Value().DocumentOK()
			ps, _ := ud.Elements()
			for _, pe := range ps {
				if p, ok := materialize.ParseProblemKey(pe.Key()); ok {
					add(e.Key(), p)
				}
			}
		}
	}
	for i := range 3 {
		if i < len(users) {
			add(users[len(users)-1-i], nothing)
		}
		if i < len(problems) {
			add(nobody, problems[len(problems)-1-i])
		}
	}
	return out
}

// checkReadDumpAsRead checks that ReadDump reads from a dump of docs what
// Read reads from the documents loaded into a database, for every pair
// docs mention, and that both explain the same.
func checkReadDumpAsRead(t *testing.T, docs materialize.Docs, most int) int {
	t.Helper()
	ctx := context.Background()
	st, d := loaded(t, docs), writeDump(t, docs)
	n := 0
	pairs := pairsOf(docs)
	if most > 0 && len(pairs) > most {
		// The first pairs the documents mention, and the unknown ones.
		pairs = append(pairs[:most-4], pairs[len(pairs)-4:]...)
	}
	for _, pr := range pairs {
		u, p := pr.user, pr.problem
		{
			want, err := Read(ctx, st, u, p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ReadDump(ctx, d, u, p)
			if err != nil {
				t.Fatal(err)
			}
			n++
			what := fmt.Sprintf("user %q problem %d", u, p)
			for _, diff := range pairDiff(want, got) {
				t.Errorf("%s: %s", what, diff)
			}
			if we, ge := explained(t, want), explained(t, got); we != ge {
				t.Errorf("%s: explained from the database:\n%s\nfrom the dump:\n%s", what, we, ge)
			}
		}
	}
	return n
}

// pairDiff compares two reads of a pair (submissions in any order).
func pairDiff(want, got *Input) []string {
	var out []string
	sorted := func(s []materialize.Submission) []materialize.Submission {
		s = slices.Clone(s)
		materialize.SortGrouped(s)
		return s
	}
	msgs := func(ds []*materialize.DecodeError) []string {
		var m []string
		for _, d := range ds {
			m = append(m, d.Error())
		}
		return m
	}
	if w, g := sorted(want.Submissions), sorted(got.Submissions); !reflect.DeepEqual(w, g) {
		out = append(out, fmt.Sprintf("submissions %+v, want %+v", g, w))
	}
	if w, g := msgs(want.Malformed), msgs(got.Malformed); !slices.Equal(w, g) {
		out = append(out, fmt.Sprintf("malformed %q, want %q", g, w))
	}
	if want.HasUser != got.HasUser || !reflect.DeepEqual(want.StoredUser, got.StoredUser) {
		out = append(out, fmt.Sprintf("user %v %+v, want %v %+v", got.HasUser, got.StoredUser, want.HasUser, want.StoredUser))
	}
	if !reflect.DeepEqual(want.ProblemDoc, got.ProblemDoc) {
		out = append(out, fmt.Sprintf("problem %+v, want %+v", got.ProblemDoc, want.ProblemDoc))
	}
	if want.HasEntry != got.HasEntry || want.Held != got.Held {
		out = append(out, fmt.Sprintf("has entry %v, held %v; want %v, %v", got.HasEntry, got.Held, want.HasEntry, want.Held))
	}
	if !reflect.DeepEqual(want.Homeworks, got.Homeworks) {
		out = append(out, fmt.Sprintf("homeworks %s, want %s", hwString(got), hwString(want)))
	}
	return out
}

func hwString(p *Input) string {
	var b strings.Builder
	for id, h := range p.Homeworks {
		fmt.Fprintf(&b, "%s:%+v stored %v; ", id.Hex(), h.Homework, h.Stored)
	}
	return b.String()
}

// explained is the explanation of p as JSON, or its error.
func explained(t *testing.T, p *Input) string {
	ex, err := Explain(p)
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := json.MarshalIndent(ex, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadDumpMatchesRead: over every derive vector, ReadDump (one
// streaming pass per collection) reads what Read reads from the same
// documents in a database, for the first pairs the vector mentions and
// for an unknown user and problem (EXPLAIN_ALL_PAIRS=1: every pair).
func TestReadDumpMatchesRead(t *testing.T) {
	most := 8
	if os.Getenv("EXPLAIN_ALL_PAIRS") != "" {
		most = 0
	}
	vs, err := materializetest.ReadVectors(filepath.Join("..", "materialize", "testdata", "derive.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	pairs := 0
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) { pairs += checkReadDumpAsRead(t, v.DB, most) })
	}
	t.Logf("%d pairs over %d vectors", pairs, len(vs))
}

var (
	raw  = materializetest.Raw
	date = func(s string) bson.DateTime {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return bson.NewDateTimeFromTime(tm)
	}
)

// TestReadDumpRepeatedIDs: documents a database would hold once but a
// dump may repeat under one _id (an edited dump; the last copy is the
// document) or that cannot be read, read from a dump as from the
// database: a submission moved from bob to alice and one moved away from
// alice, malformed submissions of alice, a problem whose _id is 7 as an
// int32, an int64 and a double, and one of 7.5, a homework that lost
// alice's entry in its second copy, one that gained it, one that lost
// dave's only entries (for 7, and for 9, which nothing else mentions), an unreadable
// homework the problem lists, a user value that is not a document, a
// user document repeated.
func TestReadDumpRepeatedIDs(t *testing.T) {
	hA, hB, hC, hD, hE := bson.ObjectID{0xa}, bson.ObjectID{0xb}, bson.ObjectID{0xc}, bson.ObjectID{0xd}, bson.ObjectID{0xe}
	s := func(i byte) bson.ObjectID { return bson.ObjectID{0x51, i} }
	entry := func(score int) bson.D {
		return bson.D{{Key: "score", Value: score}, {Key: "problemStatus", Value: 0}, {Key: "submissionIds", Value: bson.A{}}, {Key: "rawScore", Value: score}}
	}
	sub := func(id bson.ObjectID, user string, problem any, day string, score int) bson.Raw {
		return raw("_id", id, "user", user, "problem", problem, "languageType", 1, "timestamp", date(day), "status", 0, "score", score)
	}
	hw := func(id bson.ObjectID, ss bson.D) bson.Raw {
		return raw("_id", id, "duration", bson.D{{Key: "end", Value: date("2026-03-01T00:00:00Z")}}, "penalty", "score = score * 0.5", "studentStatus", ss)
	}
	docs := materialize.Docs{
		Users: []bson.Raw{
			raw("_id", "alice", "submission", 9, "AC_submission", 9, "AC_problem_ids", bson.A{}),
			raw("_id", "bob"),
			raw("_id", "alice", "submission", 2, "AC_submission", 1, "AC_problem_ids", bson.A{7}),
		},
		Problems: []bson.Raw{
			raw("_id", int32(7), "homeworks", bson.A{hA, hB}),
			raw("_id", int64(7), "homeworks", bson.A{hA, hB, hD}),
			raw("_id", 7.0, "homeworks", bson.A{hB}),
			raw("_id", 7.5, "homeworks", bson.A{hA}),
			raw("_id", int32(7), "homeworks", bson.A{hA, hB, hC}),
		},
		Homeworks: []bson.Raw{
			hw(hA, bson.D{{Key: "alice", Value: bson.D{{Key: "7", Value: entry(50)}}}}),
			hw(hC, bson.D{{Key: "bob", Value: bson.D{{Key: "7", Value: entry(10)}}}}),
			hw(hE, bson.D{{Key: "dave", Value: bson.D{{Key: "7", Value: entry(70)}, {Key: "9", Value: entry(70)}}}}),
			hw(hE, bson.D{{Key: "dave", Value: bson.D{{Key: "8", Value: entry(70)}}}}),
			hw(hA, bson.D{{Key: "alice", Value: "not a document"}, {Key: "bob", Value: bson.D{{Key: "7", Value: entry(20)}}}}),
			hw(hC, bson.D{{Key: "alice", Value: bson.D{{Key: "7", Value: entry(30)}}}}),
			raw("_id", hD, "penalty", 3),
			hw(hB, bson.D{{Key: "alice", Value: bson.D{{Key: "7", Value: entry(40)}, {Key: "8", Value: entry(1)}}}, {Key: "alice", Value: bson.D{{Key: "7", Value: entry(45)}}}}),
		},
		Submissions: []bson.Raw{
			sub(s(1), "bob", 7, "2026-02-01T00:00:00Z", 100),
			sub(s(2), "alice", 7, "2026-02-02T00:00:00Z", 60),
			raw("_id", s(3), "user", "alice", "problem", "seven"),
			sub(s(1), "alice", 7, "2026-03-03T00:00:00Z", 100),
			sub(s(4), "alice", 8, "2026-02-03T00:00:00Z", 100),
			raw("_id", s(5), "user", "alice"),
			sub(s(2), "carol", 7, "2026-02-02T00:00:00Z", 60),
			raw("_id", s(6), "user", "alice", "problem", 7, "timestamp", "yesterday"),
			raw("_id", s(5), "user", "alice", "problem", 7),
		},
	}
	if n := checkReadDumpAsRead(t, docs, 0); n == 0 {
		t.Fatal("no pair read")
	}
}

// TestReadDumpErrors: a document without _id is refused, naming its
// collection, and a corrupt file before it is reported first.
func TestReadDumpErrors(t *testing.T) {
	ctx := context.Background()
	docs := materialize.Docs{Users: []bson.Raw{raw("_id", "alice")}, Problems: []bson.Raw{raw("homeworks", bson.A{})}}
	_, err := ReadDump(ctx, writeDump(t, docs), "alice", 7)
	if err == nil || err.Error() != "load dump: load problem: document without _id" {
		t.Errorf("ReadDump: %v, want the problem without _id refused", err)
	}
}
