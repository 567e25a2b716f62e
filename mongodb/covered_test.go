package mongodb

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
)

// coveredView is what a covered plan over the covering index
// (coverKeys) hands the rest of a query for doc: the index's keys alone,
// each as the index entry holds it, so a missing field is null (an index
// entry stores a missing key as null; the plan rebuilds the document from
// the entry, never reading doc). ok is false when doc holds an array
// under a key: the index is then multikey and the server fetches
// documents instead.
func coveredView(doc bson.D) (view bson.D, ok bool) {
	for _, k := range coverKeys {
		v := lookupD(doc, k.Key)
		switch v.(type) {
		case bson.A:
			return nil, false
		case missingT:
			v = nil
		}
		view = append(view, bson.E{Key: k.Key, Value: v})
	}
	return view, true
}

// backEndSubmission is a submission of one of users with the types
// Back-End writes, languageType, status and score also missing or null
// (older documents, a submission not yet judged).
func backEndSubmission(r *rand.Rand, i int, users []string) bson.D {
	pick := func(vals ...any) any { return vals[r.IntN(len(vals))] }
	d := bson.D{{Key: "_id", Value: bson.ObjectID{8: byte(i >> 16), 9: byte(i >> 8), 10: byte(i), 11: byte(r.IntN(256))}},
		{Key: "user", Value: users[r.IntN(len(users))]},
		{Key: "problem", Value: pick(int32(1), int32(2), int64(3))},
		{Key: "timestamp", Value: bson.DateTime(1_700_000_000_000 + int64(r.IntN(6))*1000)}}
	add := func(k string, v any) {
		if v != missing {
			d = append(d, bson.E{Key: k, Value: v})
		}
	}
	add("languageType", pick(int32(0), int32(1), int32(3), int64(3), missing, nil))
	add("status", pick(int32(0), int32(1), int32(-1), int64(0), missing, nil))
	add("score", pick(int32(100), int32(0), int64(100), missing, nil))
	return d
}

// TestCoveredNullsArePlain: a covered plan returns null for a field the
// submission lacks (languageType on an older submission, status and score
// before judging). Over what a covered plan returns, userStatsPipeline
// must still count every Back-End-shaped submission on the server (none
// left to be read by _id: a null languageType is plain, as a missing one
// is), with the counts memstore derives from the stored documents; and a
// submission read by Submissions' covered find decodes as the stored one
// does (a null languageType is not handwritten, a null status and score
// are mongoengine's defaults).
func TestCoveredNullsArePlain(t *testing.T) {
	users := []string{"a", "b"}
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 29))
		st := memstore.New()
		var docs, views []bson.D
		for i := range 1 + r.IntN(40) {
			d := backEndSubmission(r, i, users)
			v, ok := coveredView(d)
			if !ok {
				t.Fatalf("seed %d: a Back-End submission makes the index multikey: %v", seed, d)
			}
			docs, views = append(docs, d), append(views, v)
			if err := st.Load(materialize.CollSubmission, rawOf(d)); err != nil {
				t.Fatal(err)
			}
			want, werr := materialize.DecodeSubmission(rawOf(d))
			got, gerr := materialize.DecodeSubmission(rawOf(v))
			if werr != nil || gerr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d: covered %v decodes to %+v (%v), stored %v to %+v (%v)", seed, v, got, gerr, d, want, werr)
			}
		}
		want, _, err := st.UserStats(context.Background(), users)
		if err != nil {
			t.Fatal(err)
		}
		res := newUserStats(users)
		for _, out := range runPipeline(views, norm(userStatsPipeline(users)).(bson.A)) {
			if err := res.add(rawOf(out)); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if len(res.others) > 0 {
			t.Fatalf("seed %d: %d Back-End submissions left to be read by _id under a covered plan, first %v; docs %v", seed, len(res.others), res.others[0], docs)
		}
		got, _, err := res.finish(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if !got[u].Equal(want[u]) {
				t.Fatalf("seed %d user %q: pipeline over the covered plan %+v, memstore %+v\ndocs %v", seed, u, got[u], want[u], docs)
			}
		}
	}
}
