package mongodb

import (
	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/storetest"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// monitoredDB is a DB on testDB's database through a monitored client:
// sent returns the names of the commands sent since its last call.
func monitoredDB(t *testing.T) (*DB, func() []string) {
	t.Helper()
	base := testDB(t)
	client, log := monitoredClient(t)
	seen := 0
	return newDB(client, base.cfg), func() []string {
		log.mu.Lock()
		defer log.mu.Unlock()
		var names []string
		for _, c := range log.cmds[seen:] {
			if e, err := c.IndexErr(0); err == nil {
				names = append(names, e.Key())
			}
		}
		seen = len(log.cmds)
		return names
	}
}

// readsOf names every part of docs: the pairs, users and problems of its
// submissions, its problems and homeworks, the homeworks restricted to
// the users.
func readsOf(docs materialize.Docs) *watch.Reads {
	r := &watch.Reads{}
	seenU := map[string]bool{}
	seenP := map[materialize.Pair]bool{}
	for _, raw := range docs.Submissions {
		s, err := materialize.DecodeSubmission(raw)
		if err != nil {
			continue
		}
		if p := (materialize.Pair{User: s.User, Problem: s.Problem}); !seenP[p] && len(r.Pairs) < queryTerms {
			seenP[p] = true
			r.Pairs = append(r.Pairs, p)
		}
		if !seenU[s.User] && len(r.Users) < queryTerms {
			seenU[s.User] = true
			r.Users = append(r.Users, s.User)
		}
	}
	for _, raw := range docs.Problems {
		if id, ok := raw.Lookup("_id").AsInt64OK(); ok && len(r.Problems) < queryTerms {
			r.Problems = append(r.Problems, id)
		}
	}
	for _, raw := range docs.Homeworks {
		if id, ok := raw.Lookup("_id").ObjectIDOK(); ok && len(r.Homeworks) < queryTerms {
			r.Homeworks = append(r.Homeworks, id)
		}
	}
	r.Users = append(r.Users, "nobody", "$odd.name")
	r.HomeworkUsers = r.Users
	return r
}

// TestIntegrationReadOneRoundTrip: on a real server, Read of every part
// of each vector's database is one aggregate ($unionWith, $replaceWith;
// one more find only for submissions UserStats leaves to the Go decoder)
// and returns what ReadSeparately returns, causally after a cluster time
// as under a batch.
func TestIntegrationReadOneRoundTrip(t *testing.T) {
	db, sent := monitoredDB(t)
	ctx := testCtx(t)
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	at, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctx = watch.WithReadAfter(ctx, at)
	for _, v := range readVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			load(t, db, v.DB)
			r := readsOf(v.DB)
			sent()
			got, err := db.Read(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			cmds := sent()
			if len(cmds) == 0 || cmds[0] != "aggregate" || len(cmds) > 2 || len(cmds) == 2 && cmds[1] != "find" {
				t.Errorf("Read sent %v, want one aggregate (and a find by _id at most)", cmds)
			}
			want, err := watch.ReadSeparately(ctx, db, r)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := storetest.SortedResult(got), storetest.SortedResult(want); !reflect.DeepEqual(g, w) {
				t.Errorf("Read =\n%s\nReadSeparately =\n%s", dump(g), dump(w))
			}
		})
	}
}

// TestIntegrationReadGetMore: on a real server, a Read whose result is
// over what one reply holds (20 homeworks of 1 MiB each, and more
// problems than the default first batch of 101) continues in getMores
// of the same cursor, each with the aggregate's batch size (which the
// server accepts on getMore), and returns what ReadSeparately returns.
func TestIntegrationReadGetMore(t *testing.T) {
	db, sent := monitoredDB(t)
	ctx := testCtx(t)
	pad := strings.Repeat("x", 1<<20)
	var docs materialize.Docs
	r := &watch.Reads{}
	for i := range 20 {
		id := bson.ObjectID{0x65, 0xf0, byte(i)}
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "homeworkName", Value: "h"},
			{Key: "duration", Value: bson.D{{Key: "start", Value: bson.DateTime(1)}, {Key: "end", Value: bson.DateTime(2_000_000_000_000)}}},
			{Key: "penalty", Value: "score = score"},
			{Key: "studentStatus", Value: bson.D{{Key: "pad", Value: pad}, {Key: "alice", Value: bson.D{{Key: "1", Value: bson.D{{Key: "score", Value: int32(100)}}}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		docs.Homeworks = append(docs.Homeworks, raw)
		r.Homeworks = append(r.Homeworks, id)
	}
	for i := range 300 {
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: int64(i)}, {Key: "problemName", Value: "p"}, {Key: "homeworks", Value: bson.A{r.Homeworks[i%20]}}})
		if err != nil {
			t.Fatal(err)
		}
		docs.Problems = append(docs.Problems, raw)
		r.Problems = append(r.Problems, int64(i))
	}
	load(t, db, docs)
	sent()
	got, err := db.Read(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if cmds := sent(); len(cmds) < 2 || cmds[0] != "aggregate" || cmds[1] != "getMore" {
		t.Errorf("Read sent %v, want an aggregate, then getMores", cmds)
	}
	if len(got.Problems) != 300 || len(got.Homeworks) != 20 {
		t.Errorf("Read returned %d problems, %d homeworks; want 300, 20", len(got.Problems), len(got.Homeworks))
	}
	want, err := watch.ReadSeparately(ctx, db, r)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := storetest.SortedResult(got), storetest.SortedResult(want); !reflect.DeepEqual(g, w) {
		t.Errorf("Read =\n%s\nReadSeparately =\n%s", dump(g), dump(w))
	}
}
