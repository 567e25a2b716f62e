package reference

import (
	"bufio"
	"bytes"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/bsontest"
)

const vectorsPath = "../../materialize/testdata/derive.jsonl"

type vector struct {
	name          string
	db            DB
	expect        DB // Users: expect.user, Homeworks: expect.homework
	penaltyErrors int64
}

// docsAt returns the documents of the array at path in d, re-marshalled.
func docsAt(t *testing.T, d bson.D, path ...string) []bson.Raw {
	t.Helper()
	var v any = d
	for _, k := range path {
		dd, ok := v.(bson.D)
		if !ok {
			t.Fatalf("%v: not a document", path)
		}
		v, _ = field(dd, k)
	}
	arr, ok := v.(bson.A)
	if !ok {
		t.Fatalf("%v: %T, not an array", path, v)
	}
	out := make([]bson.Raw, len(arr))
	for i, x := range arr {
		b, err := bson.Marshal(x)
		if err != nil {
			t.Fatalf("%v.%d: %v", path, i, err)
		}
		out[i] = b
	}
	return out
}

// readVectors decodes derive.jsonl (Extended JSON v2, relaxed) on its own.
func readVectors(t *testing.T) []vector {
	t.Helper()
	data, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []vector
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var d bson.D
		if err := bson.UnmarshalExtJSON(line, false, &d); err != nil {
			t.Fatal(err)
		}
		var v vector
		name, _ := field(d, "name")
		v.name, _ = name.(string)
		v.db = DB{
			Users: docsAt(t, d, "db", "user"), Problems: docsAt(t, d, "db", "problem"),
			Homeworks: docsAt(t, d, "db", "homework"), Submissions: docsAt(t, d, "db", "submission"),
		}
		v.expect = DB{Users: docsAt(t, d, "expect", "user"), Homeworks: docsAt(t, d, "expect", "homework")}
		pe, _ := field(d, "penaltyErrors")
		var ok bool
		if v.penaltyErrors, ok = whole(pe); !ok {
			t.Fatalf("%s: penaltyErrors %v", v.name, pe)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no vectors")
	}
	return out
}

func countEntries(db DB) int {
	n := 0
	for _, raw := range db.Homeworks {
		d, _ := unmarshal(raw)
		v, _ := field(d, "studentStatus")
		ss, _ := v.(bson.D)
		for _, ue := range ss {
			ud, _ := ue.Value.(bson.D)
			n += len(ud)
		}
	}
	return n
}

// TestVectors checks the reference against every CPython derive vector:
// its derivation, compared by value with the expect section (every user
// document and every entry), and its penalty error count.
func TestVectors(t *testing.T) {
	vs := readVectors(t)
	rejudge := 0
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			res := Derive(v.db)
			for _, d := range Compare(res, v.expect) {
				t.Error(d)
			}
			derived := 0
			for _, users := range res.Entries {
				for _, probs := range users {
					derived += len(probs)
				}
			}
			if want := countEntries(v.expect); derived != want {
				t.Errorf("derived %d entries, expect lists %d", derived, want)
			}
			if len(v.expect.Users) != len(v.db.Users) {
				t.Errorf("expect lists %d users, db holds %d", len(v.expect.Users), len(v.db.Users))
			}
			if int64(res.PenaltyErrors) != v.penaltyErrors {
				t.Errorf("penalty errors %d, want %d", res.PenaltyErrors, v.penaltyErrors)
			}
			if len(res.Malformed) > 0 {
				t.Errorf("malformed: %v", res.Malformed)
			}
		})
		for _, raw := range v.db.Submissions {
			if s, err := decodeSubmission(raw); err == nil && s.status == -1 && s.score >= 0 {
				rejudge++
			}
		}
	}
	t.Logf("%d vectors; %d submissions are rejudges in flight", len(vs), rejudge)
}

// TestVectorsStaleDiffer: Check finds the stale derived values the
// vectors' documents carry (so it can fail), and none once the expected
// values are in place.
func TestVectorsStaleDiffer(t *testing.T) {
	stale := 0
	for _, v := range readVectors(t) {
		if len(Check(v.db)) > 0 {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("no vector's stored state differs from its derivation")
	}
}

// TestRejudgeInFlight: status -1 with score >= 0 counts with its stored
// score and status -1; status -1 with score -1 and status -2 do not.
func TestRejudgeInFlight(t *testing.T) {
	hw := bson.NewObjectID()
	end := bson.DateTime(1_000_000_000_000)
	sub := func(n byte, ts bson.DateTime, status, score int32) bson.Raw {
		id := bson.ObjectID{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, n}
		return bsontest.Marshal(t, bson.D{{Key: "_id", Value: id}, {Key: "user", Value: "u"}, {Key: "problem", Value: int32(1)},
			{Key: "timestamp", Value: ts}, {Key: "status", Value: status}, {Key: "score", Value: score}})
	}
	db := DB{
		Users:    []bson.Raw{bsontest.Marshal(t, bson.D{{Key: "_id", Value: "u"}})},
		Problems: []bson.Raw{bsontest.Marshal(t, bson.D{{Key: "_id", Value: int32(1)}, {Key: "homeworks", Value: bson.A{hw}}})},
		Homeworks: []bson.Raw{bsontest.Marshal(t, bson.D{{Key: "_id", Value: hw}, {Key: "duration", Value: bson.D{{Key: "end", Value: end}}},
			{Key: "studentStatus", Value: bson.D{{Key: "u", Value: bson.D{{Key: "1", Value: bson.D{}}}}}}})},
		Submissions: []bson.Raw{
			sub(1, end-10, 0, 100), // AC
			sub(2, end-5, -1, 100), // rejudge in flight of an AC: counts, sets problemStatus -1
			sub(3, end-4, -1, -1),  // pending, never judged
			sub(4, end-3, -2, -1),  // created
		},
	}
	res := Derive(db)
	u := res.Users["u"]
	if u.Submission != 2 || u.ACSubmission != 2 || len(u.ACProblemIDs) != 1 || u.ACProblemIDs[0] != 1 {
		t.Errorf("user %+v, want 2 submissions, 2 AC, [1]", u)
	}
	e := res.Entries[hw.Hex()]["u"]["1"]
	if e.Score != 100 || e.ProblemStatus == nil || *e.ProblemStatus != -1 || len(e.SubmissionIDs) != 2 || *e.RawScore != 100 {
		t.Errorf("entry %s, want score 100, problemStatus -1, two submissions, rawScore 100", e)
	}
}

// TestCompareByValue: numbers compare by value whatever their BSON type;
// key order does not matter; a missing or extra key, a rawScore that
// differs, or a string where a number belongs, does.
func TestCompareByValue(t *testing.T) {
	st := int64(0)
	raw := int64(40)
	want := Entry{Score: 40, ProblemStatus: &st, SubmissionIDs: []string{"a"}, RawScore: &raw}
	cases := []struct {
		name   string
		stored bson.D
		equal  bool
	}{
		{"int32", bson.D{{Key: "score", Value: int32(40)}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "rawScore", Value: int32(40)}}, true},
		{"int64 and double, reordered", bson.D{{Key: "rawScore", Value: 40.0}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "score", Value: int64(40)}, {Key: "problemStatus", Value: 0.0}}, true},
		{"rawScore differs", bson.D{{Key: "score", Value: int32(40)}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "rawScore", Value: int32(39)}}, false},
		{"rawScore missing", bson.D{{Key: "score", Value: int32(40)}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a"}}}, false},
		{"extra key", bson.D{{Key: "score", Value: int32(40)}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "rawScore", Value: int32(40)}, {Key: "x", Value: 1}}, false},
		{"status null", bson.D{{Key: "score", Value: int32(40)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "rawScore", Value: int32(40)}}, false},
		{"fractional", bson.D{{Key: "score", Value: 40.5}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "rawScore", Value: int32(40)}}, false},
		{"string score", bson.D{{Key: "score", Value: "40"}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a"}}, {Key: "rawScore", Value: int32(40)}}, false},
		{"ids differ", bson.D{{Key: "score", Value: int32(40)}, {Key: "problemStatus", Value: int32(0)}, {Key: "submissionIds", Value: bson.A{"a", "a"}}, {Key: "rawScore", Value: int32(40)}}, false},
	}
	for _, c := range cases {
		if got := compareEntry(c.stored, want) == ""; got != c.equal {
			t.Errorf("%s: equal = %v, want %v (%s)", c.name, got, c.equal, compareEntry(c.stored, want))
		}
	}
	start := Entry{SubmissionIDs: []string{}}
	if msg := compareEntry(bson.D{{Key: "score", Value: int32(0)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}}}, start); msg != "" {
		t.Errorf("start value: %s", msg)
	}
	u := User{Submission: 3, ACSubmission: 1, ACProblemIDs: []int64{7}}
	for _, c := range []struct {
		d     bson.D
		equal bool
	}{
		{bson.D{{Key: "submission", Value: int64(3)}, {Key: "AC_submission", Value: 1.0}, {Key: "AC_problem_ids", Value: bson.A{int32(7)}}}, true},
		{bson.D{{Key: "submission", Value: int32(3)}, {Key: "AC_submission", Value: int32(1)}, {Key: "AC_problem_ids", Value: bson.A{int32(8)}}}, false},
		{bson.D{{Key: "submission", Value: int32(4)}, {Key: "AC_submission", Value: int32(1)}, {Key: "AC_problem_ids", Value: bson.A{int32(7)}}}, false},
	} {
		if got := compareUser(c.d, u) == ""; got != c.equal {
			t.Errorf("user %v: equal = %v, want %v", c.d, got, c.equal)
		}
	}
	if msg := compareUser(bson.D{}, User{ACProblemIDs: []int64{}}); msg != "" {
		t.Errorf("absent user fields read as defaults: %s", msg)
	}
}
