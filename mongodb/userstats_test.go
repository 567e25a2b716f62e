package mongodb

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/memstore"
)

// randomSubmission is a submission document of one of users (or of a
// user outside them, or of none), with every field drawn from the values
// Back-End writes and from the malformed or unusual ones a database may
// hold: whole and fractional doubles, longs, nulls, missing fields,
// strings, a string _id, an array user; few timestamps, so (timestamp,
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
	add("user", pick(u, u, u, u, u, u, u, u, "outsider", bson.A{u}, missing, nil, int32(1)))
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
		// string) is reported by the adapter too.
		ids := map[string]bool{}
		for _, b := range gotBad {
			ids[b.ID] = true
		}
		for _, b := range wantBad {
			if b.Field != "_id" && !ids[b.ID] {
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
		t.Fatalf("first stage %v, want $match on user (index %s)", first, scanIndexName)
	}
	for i, want := range []string{"$match", "$group", "$sort", "$group", "$project"} {
		if k := p[i].(bson.D)[0].Key; k != want {
			t.Fatalf("stage %d is %s, want %s", i, k, want)
		}
	}
	_ = time.Now
}
