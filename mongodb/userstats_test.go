package mongodb

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
)

// randomSubmission is a submission document of one of users (or of a
// user outside them, or of none), with every field drawn from the values
// Back-End writes and from the malformed or unusual ones a database may
// hold: whole and fractional doubles, longs, nulls, missing fields,
// strings, a string _id, an array user, a symbol user (equal to the
// string as a value on the server); few timestamps, so (timestamp,
// _id) ties are frequent. With plain, only the types Back-End writes
// (the server counts every document).
func randomSubmission(r *rand.Rand, i int, users []string, plain bool) bson.D {
	pick := func(vals ...any) any {
		if plain {
			for {
				v := vals[r.IntN(len(vals))]
				switch v.(type) {
				case int32, int64, bson.DateTime:
					return v
				case string:
					if v != "3" && v != "py" && v != "0" && v != "100" && v != "2026" && v != "outsider" {
						return v
					}
				}
			}
		}
		return vals[r.IntN(len(vals))]
	}
	var id any = bson.ObjectID{0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i), byte(r.IntN(256))}
	if !plain && r.IntN(40) == 0 {
		id = "s" + strconv.Itoa(i)
	}
	u := users[r.IntN(len(users))]
	d := bson.D{{Key: "_id", Value: id}}
	add := func(k string, v any) {
		if v != missing {
			d = append(d, bson.E{Key: k, Value: v})
		}
	}
	add("user", pick(u, u, u, u, u, u, u, u, "outsider", bson.A{u}, bson.Symbol(u), missing, nil, int32(1)))
	add("problem", pick(int32(1), int32(2), int32(3), int64(4), int32(5), float64(3), float64(2.5), "3", missing, nil))
	ts := bson.DateTime(1_700_000_000_000 + int64(r.IntN(6))*1000)
	add("timestamp", pick(ts, ts, ts, ts, ts, ts, ts, missing, "2026", int64(5)))
	add("languageType", pick(int32(0), int32(1), int32(3), int64(2), missing, nil, float64(3), "py"))
	add("status", pick(int32(0), int32(0), int32(1), int32(5), int32(-1), int32(-2), int32(-3), int64(0), missing, nil, float64(0), float64(0.5), "0"))
	add("score", pick(int32(100), int32(100), int32(0), int32(60), int32(-1), int64(100), missing, nil, float64(100), float64(99.5), "100"))
	if !plain && r.IntN(20) == 0 {
		d = append(d, bson.E{Key: "score", Value: int32(100)}) // a duplicate key: the first one counts
	}
	return d
}

// TestUserStatsPipeline runs userStatsPipeline through the evaluator over
// random submissions, completes it as DB.UserStats does (the documents it
// leaves to the Go decoder read by _id), and compares the stats with
// memstore's UserStats, which is materialize.DeriveUser over the decoded
// submissions: the server-side count must be exactly the spec's rule.
// USERSTATS_N sets the number of random collections (default 300).
func TestUserStatsPipeline(t *testing.T) {
	n := 300
	if s := os.Getenv("USERSTATS_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	users := []string{"a", "b", "c.d", "$e"}
	for seed := 0; seed < n; seed++ {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		st := memstore.New()
		var docs []bson.D
		for i := range r.IntN(60) {
			d := randomSubmission(r, i, users, seed%2 == 0)
			docs = append(docs, d)
			if err := st.Load(materialize.CollSubmission, rawOf(d)); err != nil {
				t.Fatal(err)
			}
		}
		named := users[:1+r.IntN(len(users))]
		want, wantBad, err := st.UserStats(context.Background(), named)
		if err != nil {
			t.Fatal(err)
		}

		res := newUserStats(named)
		for _, out := range runPipeline(docs, norm(userStatsPipeline(named)).(bson.A)) {
			if err := res.add(rawOf(out)); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		// SubmissionsByID of the others, as the adapter decodes them.
		var others []materialize.Submission
		var bad []*materialize.DecodeError
		for _, id := range res.others {
			for _, d := range docs {
				if equal(lookupD(d, "_id"), id) {
					s, err := materialize.DecodeSubmission(rawOf(d))
					if err != nil {
						bad = append(bad, err.(*materialize.DecodeError))
						continue
					}
					others = append(others, s)
				}
			}
		}
		got, gotBad, err := res.finish(others, bad)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range named {
			if !got[u].Equal(want[u]) {
				t.Fatalf("seed %d user %q: pipeline %+v, memstore %+v\ndocs %v", seed, u, got[u], want[u], docs)
			}
		}
		if len(got) != len(named) {
			t.Fatalf("seed %d: %d users, want %d", seed, len(got), len(named))
		}
		// Every submission memstore reports malformed (its user a named
		// string) is reported by the adapter too, as the decoder reports
		// it (watch de-duplicates the reports of two reads by value).
		reported := map[materialize.DecodeError]bool{}
		for _, b := range gotBad {
			reported[*b] = true
		}
		for _, b := range wantBad {
			if !reported[*b] {
				t.Fatalf("seed %d: malformed %v not reported (got %v)", seed, b, gotBad)
			}
		}
	}
}

// TestUserStatsPipelineShape pins what the server is asked: the $match
// on the user index's prefix first, then the two $group stages around the
// $sort that orders AC problems, and the $project that drops what the
// client does not need.
func TestUserStatsPipelineShape(t *testing.T) {
	p := userStatsPipeline([]string{"a"})
	if len(p) != 5 {
		t.Fatalf("%d stages", len(p))
	}
	first := p[0].(bson.D)[0]
	if first.Key != "$match" || first.Value.(bson.D)[0].Key != "user" {
		t.Fatalf("first stage %v, want $match on user (index %s)", first, coverIndexName)
	}
	for i, want := range []string{"$match", "$group", "$sort", "$group", "$project"} {
		if k := p[i].(bson.D)[0].Key; k != want {
			t.Fatalf("stage %d is %s, want %s", i, k, want)
		}
	}
	_ = time.Now
}

// userStatsOver runs userStatsPipeline through the evaluator over docs and
// completes it as DB.UserStats does: the documents listed in other are
// read by _id and decoded by materialize.DecodeSubmission.
func userStatsOver(t *testing.T, docs []bson.D, named []string) (map[string]materialize.UserStats, []*materialize.DecodeError) {
	t.Helper()
	res := newUserStats(named)
	for _, out := range runPipeline(docs, norm(userStatsPipeline(named)).(bson.A)) {
		if err := res.add(rawOf(out)); err != nil {
			t.Fatal(err)
		}
	}
	var others []materialize.Submission
	var bad []*materialize.DecodeError
	for _, id := range res.others {
		for _, d := range docs {
			if equal(lookupD(d, "_id"), id) {
				s, err := materialize.DecodeSubmission(rawOf(d))
				if err != nil {
					bad = append(bad, err.(*materialize.DecodeError))
					continue
				}
				others = append(others, s)
			}
		}
	}
	got, gotBad, err := res.finish(others, bad)
	if err != nil {
		t.Fatal(err)
	}
	return got, gotBad
}

// TestUserStatsPipelineUserTypes: a submission whose user is not a string
// but equals a named user as a value (a BSON symbol: the server matches,
// groups and sorts "a" and Symbol("a") as one value) is the Go decoder's
// to report; it must not take the place of the user's counted group in
// the second $group (whose _id is the first document's), dropping every
// count of the user.
func TestUserStatsPipelineUserTypes(t *testing.T) {
	ts := bson.DateTime(1_700_000_000_000)
	id := func(i byte) bson.ObjectID { return bson.ObjectID{11: i} }
	for _, odd := range []any{bson.Symbol("a"), bson.A{"a"}, bson.A{"a", "b"}} {
		docs := []bson.D{
			{{Key: "_id", Value: id(1)}, {Key: "user", Value: "a"}, {Key: "problem", Value: int32(7)},
				{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}},
			{{Key: "_id", Value: id(2)}, {Key: "user", Value: odd}, {Key: "problem", Value: int32(8)},
				{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(1)}, {Key: "score", Value: int32(0)}},
		}
		got, bad := userStatsOver(t, docs, []string{"a", "b"})
		want := materialize.UserStats{Submission: 1, ACSubmission: 1, ACProblemIDs: []int64{7}}
		if !got["a"].Equal(want) {
			t.Errorf("user %v beside a: stats of a %+v, want %+v", odd, got["a"], want)
		}
		if len(bad) != 1 || bad[0].Field != "user" {
			t.Errorf("user %v: malformed %v, want the document with user %v", odd, bad, odd)
		}
	}
}

// TestUserStatsPipelineNonObjectID: a submission whose _id is not an
// ObjectId cannot be read back by _id; it is reported exactly as
// materialize.DecodeSubmission reports it (a null _id is "missing"), so
// that the same document read by Submissions is reported once.
func TestUserStatsPipelineNonObjectID(t *testing.T) {
	ts := bson.DateTime(1_700_000_000_000)
	for _, id := range []any{nil, "s1", int32(5), 2.5} {
		doc := bson.D{{Key: "_id", Value: id}, {Key: "user", Value: "a"}, {Key: "problem", Value: int32(7)},
			{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}}
		_, derr := materialize.DecodeSubmission(rawOf(doc))
		want := derr.(*materialize.DecodeError)
		_, bad := userStatsOver(t, []bson.D{doc}, []string{"a"})
		if len(bad) != 1 || *bad[0] != *want {
			t.Errorf("_id %v: reported %v, the decoder reports %v", id, bad, want)
		}
	}
}

// TestUserStatsAddNumbers: the counts and problem ids of a result
// document are integers by the decoder's rule (int32, int64, a whole
// double); a fractional double is refused, not truncated as
// RawValue.AsInt64OK truncates it (bsoncore/value.go, AsInt64OK).
func TestUserStatsAddNumbers(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  bson.D
		ok   bool
	}{
		{"int counts", bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: int32(2)}, {Key: "ac", Value: int64(1)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{int64(7)}}}, true},
		{"whole double count", bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 2.0}, {Key: "ac", Value: int32(1)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{int32(7)}}}, true},
		{"fractional count", bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1.5}, {Key: "ac", Value: int32(1)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{int32(7)}}}, false},
		{"fractional order", bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: int32(1)}, {Key: "ac", Value: int32(1)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{7.5}}}, false},
		{"fractional first", bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: int32(1)}, {Key: "ac", Value: int32(1)}, {Key: "other", Value: bson.A{bson.A{bson.ObjectID{11: 1}}}},
			{Key: "first", Value: bson.A{bson.D{{Key: "p", Value: 7.5}, {Key: "f", Value: bson.D{{Key: "t", Value: bson.DateTime(0)}, {Key: "i", Value: bson.ObjectID{11: 2}}}}}}}}, false},
	} {
		err := newUserStats([]string{"a"}).add(rawOf(tc.doc))
		if (err == nil) != tc.ok {
			t.Errorf("%s: add: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
