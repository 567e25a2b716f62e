package mongodb

// Integration tests against a real MongoDB replica set. They run when
// MATERIALIZER_TEST_MONGODB_URI names one, e.g.
//
//	MATERIALIZER_TEST_MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' go test ./mongodb/
//
// or, without it, when a Docker engine is available: testcontainers starts
// mongo:7 (MATERIALIZER_TEST_MONGODB_IMAGE) as a single-node replica set. Otherwise they skip within a few
// seconds. Each test works in its own randomly named database, dropped at
// cleanup.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/testenv"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

const skipNoServer = "no MongoDB replica set: set MATERIALIZER_TEST_MONGODB_URI=mongodb://127.0.0.1:27017/?directConnection=true (the demo's replica set: make up) or run with a Docker engine (testcontainers); see README"

// testServer is the server shared by the integration tests of one test
// binary: the environment's URI or a container started on first use.
var testServer struct {
	once sync.Once
	uri  string
	skip string
	stop func() // terminates the container started on first use (nil: none)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testServer.stop != nil {
		testServer.stop()
	}
	os.Exit(code)
}

// serverURI returns the test server's URI or skips t.
func serverURI(t testing.TB) string {
	t.Helper()
	testServer.once.Do(func() {
		if uri := os.Getenv("MATERIALIZER_TEST_MONGODB_URI"); uri != "" {
			testServer.uri = uri
			return
		}
		if err := dockerHealthy(3 * time.Second); err != nil {
			testServer.skip = fmt.Sprintf("%s (docker: %v)", skipNoServer, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		uri, stop, err := startContainer(ctx)
		testServer.stop = stop
		if err != nil {
			testServer.skip = fmt.Sprintf("%s (testcontainers: %v)", skipNoServer, err)
			return
		}
		// The member is registered under the container's IP, which the
		// host may not reach: connect directly to the mapped port (it is
		// the primary; hello still reports the set).
		u, err := url.Parse(uri)
		if err != nil {
			testServer.skip = fmt.Sprintf("%s (bad container URI: %v)", skipNoServer, err)
			return
		}
		q := u.Query()
		q.Del("replicaSet")
		q.Set("directConnection", "true")
		u.RawQuery = q.Encode()
		testServer.uri = u.String()
	})
	if testServer.skip != "" {
		testenv.NoServer(t, testServer.skip)
	}
	return testServer.uri
}

// testDB opens a fresh, randomly named database on the test server
// (skipping t when there is none) and drops it at cleanup.
func testDB(t testing.TB) *DB {
	t.Helper()
	uri := serverURI(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "materializer_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, Config{URI: uri, Database: name, MaxAwait: 200 * time.Millisecond, WriteTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", Redact(uri), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := db.db.Drop(ctx); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
		if err := db.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return db
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// load replaces the four source collections' contents with docs.
func load(t testing.TB, db *DB, docs materialize.Docs) {
	t.Helper()
	ctx := testCtx(t)
	for coll, ds := range map[string][]bson.Raw{
		materialize.CollUser: docs.Users, materialize.CollProblem: docs.Problems,
		materialize.CollHomework: docs.Homeworks, materialize.CollSubmission: docs.Submissions,
	} {
		c := db.db.Collection(coll)
		if _, err := c.DeleteMany(ctx, bson.D{}); err != nil {
			t.Fatalf("clear %s: %v", coll, err)
		}
		if len(ds) == 0 {
			continue
		}
		in := make([]any, len(ds))
		for i, d := range ds {
			in[i] = d
		}
		if _, err := c.InsertMany(ctx, in); err != nil {
			t.Fatalf("load %s: %v", coll, err)
		}
	}
}

// readAll returns every document of the four source collections.
func readAll(t *testing.T, db *DB) materialize.Docs {
	t.Helper()
	ctx := testCtx(t)
	all := func(coll string) []bson.Raw {
		var out []bson.Raw
		err := db.find(ctx, db.db.Collection(coll), bson.D{}, nil, func(raw bson.Raw) error {
			out = append(out, slices.Clone(raw))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	return materialize.Docs{
		Users: all(materialize.CollUser), Problems: all(materialize.CollProblem),
		Homeworks: all(materialize.CollHomework), Submissions: all(materialize.CollSubmission),
	}
}

func sortedSubs(subs []materialize.Submission) []materialize.Submission {
	out := slices.Clone(subs)
	sort.Slice(out, func(i, j int) bool { return out[i].ID.Hex() < out[j].ID.Hex() })
	return out
}

// TestIntegrationVectors loads every derive vector and checks that the
// adapter's reads decode to the same values as materialize's decoders on
// the whole documents, then applies the expected derivation through Apply
// and checks the stored result.
func TestIntegrationVectors(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, v := range readVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			load(t, db, v.DB)
			checkReads(t, db, v)
			checkApply(t, db, v)
		})
	}
}

func checkReads(t *testing.T, db *DB, v mtest.Vector) {
	ctx := testCtx(t)
	// Submissions: the scan is the decodable ones in SortGrouped order.
	var want []materialize.Submission
	for _, raw := range v.DB.Submissions {
		if s, err := materialize.DecodeSubmission(raw); err == nil {
			want = append(want, s)
		}
	}
	materialize.SortGrouped(want)
	var got []materialize.Submission
	var bad []*materialize.DecodeError
	if err := db.ScanSubmissions(ctx, func(s materialize.Submission) error { got = append(got, s); return nil },
		func(e *materialize.DecodeError) { bad = append(bad, e) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("scan: %d submissions, want %d (or order differs)", len(got), len(want))
	}
	if len(got)+len(bad) != len(v.DB.Submissions) {
		t.Errorf("scan: %d good + %d bad, have %d documents", len(got), len(bad), len(v.DB.Submissions))
	}
	users := map[string]bool{}
	pairs := map[materialize.Pair]bool{}
	var ids []bson.ObjectID
	for _, s := range want {
		users[s.User] = true
		pairs[materialize.Pair{User: s.User, Problem: s.Problem}] = true
		ids = append(ids, s.ID)
	}
	subs, _, err := db.Submissions(ctx, slices.Collect(maps.Keys(users)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sortedSubs(subs), sortedSubs(want)) {
		t.Errorf("Submissions(users): %d, want %d", len(subs), len(want))
	}
	subs, _, err = db.Submissions(ctx, nil, slices.Collect(maps.Keys(pairs)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sortedSubs(subs), sortedSubs(want)) {
		t.Errorf("Submissions(pairs): %d, want %d", len(subs), len(want))
	}
	subs, _, err = db.SubmissionsByID(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sortedSubs(subs), sortedSubs(want)) {
		t.Errorf("SubmissionsByID: %d, want %d", len(subs), len(want))
	}
	// UserStats: the server-side count is DeriveUser over each user's
	// decodable submissions.
	byUser := map[string][]materialize.Submission{}
	for _, s := range want {
		byUser[s.User] = append(byUser[s.User], s)
	}
	stats, _, err := db.UserStats(ctx, slices.Collect(maps.Keys(users)))
	if err != nil {
		t.Fatal(err)
	}
	for u := range users {
		if w := materialize.DeriveUser(byUser[u]); !stats[u].Equal(w) {
			t.Errorf("UserStats(%q) = %+v, want %+v", u, stats[u], w)
		}
	}

	// Problems and the listing.
	wantProblems := map[int64]materialize.Problem{}
	listing := map[bson.ObjectID][]int64{}
	for _, raw := range v.DB.Problems {
		if p, err := materialize.DecodeProblem(raw); err == nil {
			wantProblems[p.ID] = p
			for _, h := range p.Homeworks {
				if !slices.Contains(listing[h], p.ID) {
					listing[h] = append(listing[h], p.ID)
				}
			}
		}
	}
	all, _, err := db.AllProblems(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID, _, err := db.Problems(ctx, slices.Collect(maps.Keys(wantProblems)))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(wantProblems) || len(byID) != len(wantProblems) {
		t.Errorf("problems: all %d, by id %d, want %d", len(all), len(byID), len(wantProblems))
	}
	for _, p := range all {
		if w := wantProblems[p.ID]; !slices.Equal(p.Homeworks, w.Homeworks) || !slices.Equal(byID[p.ID].Homeworks, w.Homeworks) {
			t.Errorf("problem %d: homeworks %v, want %v", p.ID, p.Homeworks, w.Homeworks)
		}
	}

	// Homeworks, entry keys, entries for problems.
	wantHW := map[bson.ObjectID]materialize.Homework{}
	var hwIDs []bson.ObjectID
	for _, raw := range v.DB.Homeworks {
		if h, err := materialize.DecodeHomework(raw); err == nil {
			wantHW[h.ID] = h
			hwIDs = append(hwIDs, h.ID)
		}
	}
	gotListing, err := db.ProblemsListing(ctx, hwIDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hwIDs {
		if g, w := slices.Sorted(slices.Values(gotListing[h])), slices.Sorted(slices.Values(listing[h])); !slices.Equal(g, w) {
			t.Errorf("listing of %s: %v, want %v", h.Hex(), g, w)
		}
	}
	allHW, _, err := db.AllHomeworks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	named, _, err := db.Homeworks(ctx, hwIDs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(allHW) != len(wantHW) || len(named) != len(wantHW) {
		t.Errorf("homeworks: all %d, named %d, want %d", len(allHW), len(named), len(wantHW))
	}
	keys, _, err := db.EntryKeys(ctx, hwIDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range allHW {
		w := wantHW[h.ID]
		if h.End != w.End || h.Penalty != w.Penalty || !maps.EqualFunc(h.Students, w.Students, maps.Equal) {
			t.Errorf("homework %s differs", h.ID.Hex())
		}
		n := 0
		for u, ps := range w.Students {
			n += len(ps)
			for pk := range ps {
				if !slices.Contains(keys[h.ID], watch.EntryRef{User: u, ProblemKey: pk}) {
					t.Errorf("EntryKeys(%s) misses %s.%s", h.ID.Hex(), u, pk)
				}
			}
		}
		if len(keys[h.ID]) != n {
			t.Errorf("EntryKeys(%s): %d keys, want %d", h.ID.Hex(), len(keys[h.ID]), n)
		}
		for u := range w.Students {
			one, _, err := db.Homeworks(ctx, []bson.ObjectID{h.ID}, []string{u})
			if err != nil {
				t.Fatal(err)
			}
			if got := one[h.ID]; got == nil || len(got.Students) != 1 || !maps.Equal(got.Students[u], w.Students[u]) {
				t.Errorf("Homeworks(%s, [%s]) = %+v", h.ID.Hex(), u, got)
			}
			break
		}
	}
	problems := slices.Collect(maps.Keys(wantProblems))
	efp, err := db.EntriesForProblems(ctx, problems)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		// Every homework counts, even one whose configuration is
		// malformed: entry keys are read from studentStatus alone.
		n := 0
		for _, raw := range v.DB.Homeworks {
			id, ok := raw.Lookup("_id").ObjectIDOK()
			ss, isDoc := raw.Lookup("studentStatus").DocumentOK()
			if !ok || !isDoc {
				continue
			}
			for _, ue := range mustElems(t, ss) {
				ud, isDoc := ue.Value().DocumentOK()
				if !isDoc {
					continue
				}
				if _, err := ud.LookupErr(materialize.ProblemKey(p)); err != nil {
					continue
				}
				n++
				if !slices.Contains(efp[p], materialize.HomeworkUser{Homework: id, User: ue.Key()}) {
					t.Errorf("EntriesForProblems(%d) misses %s %s", p, id.Hex(), ue.Key())
				}
			}
		}
		if len(efp[p]) != n {
			t.Errorf("EntriesForProblems(%d): %d, want %d", p, len(efp[p]), n)
		}
	}

	// Users.
	allUsers, _, err := db.AllUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	named2, err := db.Users(ctx, slices.Collect(maps.Keys(allUsers)))
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range v.DB.Users {
		name, err := materialize.DecodeUserID(raw)
		if err != nil {
			continue
		}
		st, ok := materialize.DecodeUserStats(raw)
		if g := allUsers[name]; g.OK != ok || ok && !g.Stats.Equal(st) {
			t.Errorf("AllUsers[%s] = %+v, want %+v %v", name, g, st, ok)
		}
		if g := named2[name]; g.OK != ok || ok && !g.Stats.Equal(st) {
			t.Errorf("Users[%s] = %+v, want %+v %v", name, g, st, ok)
		}
	}
}

func checkApply(t *testing.T, db *DB, v mtest.Vector) {
	ctx := testCtx(t)
	res := materialize.Derive(v.DB)
	var w watch.Writes
	for _, raw := range v.DB.Users {
		name, err := materialize.DecodeUserID(raw)
		if err != nil {
			continue
		}
		st, ok := res.Users[name]
		if !ok {
			st = materialize.UserStats{ACProblemIDs: []int64{}}
		}
		w.Users = append(w.Users, watch.UserWrite{User: name, Stats: st})
	}
	for h, users := range res.Entries {
		for u, ps := range users {
			for pk, e := range ps {
				w.Entries = append(w.Entries, watch.EntryWrite{Homework: h, User: u, ProblemKey: pk, Entry: e})
			}
		}
	}
	var ids []bson.ObjectID
	for h := range res.Entries {
		ids = append(ids, h)
	}
	before, _, err := db.EntryKeys(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, &w); err != nil {
		t.Fatal(err)
	}
	after := readAll(t, db)
	for _, d := range mtest.DiffStored(v, after) {
		t.Error("after Apply:", d)
	}
	for _, d := range mtest.Diff(v, materialize.Derive(after)) {
		t.Error("derived again after Apply:", d)
	}
	keys, _, err := db.EntryKeys(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for h := range before {
		if len(keys[h]) != len(before[h]) {
			t.Errorf("homework %s: %d entries after Apply, %d before", h.Hex(), len(keys[h]), len(before[h]))
		}
	}
	if len(after.Users) != len(v.DB.Users) || len(after.Homeworks) != len(v.DB.Homeworks) {
		t.Error("Apply created or removed documents")
	}
}

// TestIntegrationDottedUsername writes entries of users whose names cannot
// be update paths, through the pipeline path.
func TestIntegrationDottedUsername(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	h := bson.NewObjectID()
	old := mtest.D("score", 1, "problemStatus", nil, "submissionIds", bson.A{})
	ss := mtest.D("a", mtest.D("b", mtest.D("7", old)), "a.b", mtest.D("7", old, "8", old), "zed", mtest.D("7", old))
	if dollarKeysAllowed(t, db) {
		ss = append(ss, bson.E{Key: "$c", Value: mtest.D("7", old)})
	}
	doc := mtest.Raw("_id", h, "homeworkName", "hw", "studentStatus", ss)
	load(t, db, materialize.Docs{Homeworks: []bson.Raw{doc}})
	writes := []watch.EntryWrite{
		{Homework: h, User: "a.b", ProblemKey: "7", Entry: testEntry},
		{Homework: h, User: "x.y", ProblemKey: "7", Entry: testEntry}, // no such user: nothing added
		{Homework: h, User: "a.b", ProblemKey: "9", Entry: testEntry}, // no such entry
	}
	want := map[string]map[string]materialize.Entry{"a.b": {"7": testEntry}}
	if dollarKeysAllowed(t, db) {
		writes = append(writes, watch.EntryWrite{Homework: h, User: "$c", ProblemKey: "7", Entry: testEntry})
		want["$c"] = map[string]materialize.Entry{"7": testEntry}
	}
	if _, err := db.Apply(ctx, &watch.Writes{Entries: writes}); err != nil {
		t.Fatal(err)
	}
	wantDoc, _, err := materialize.PatchHomework(doc, want)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, db).Homeworks[0]
	g, err := mtest.StoredEntries(got)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := mtest.StoredEntries(wantDoc)
	if !maps.EqualFunc(g, w, func(a, b map[string]materialize.Entry) bool {
		return maps.EqualFunc(a, b, materialize.Entry.Equal)
	}) {
		t.Errorf("got %s\nwant %s", got, wantDoc)
	}
	if keys := got.Lookup("studentStatus").Document(); len(mustElems(t, keys)) != len(ss) {
		t.Errorf("users changed: %s", keys)
	}
}

func mustElems(t *testing.T, d bson.Raw) []bson.RawElement {
	t.Helper()
	els, err := d.Elements()
	if err != nil {
		t.Fatal(err)
	}
	return els
}

// dollarKeysAllowed reports whether the server stores '$'-prefixed nested
// field names (MongoDB 5.0+).
func dollarKeysAllowed(t *testing.T, db *DB) bool {
	raw, err := db.client.Database("admin").RunCommand(testCtx(t), bson.D{{Key: "buildInfo", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	major, _, err := parseVersion(raw.Lookup("version").StringValue())
	return err == nil && major >= 5
}

// TestIntegrationEntriesForProblemsArrayStudentStatus: a homework whose
// studentStatus is an array holding a document passes the pipeline's
// {studentStatus: {$type: "object"}} and must not fail the aggregate (the
// unit test TestEntriesForProblemsArrayStudentStatus pins the same on the
// evaluator); it holds no entries.
func TestIntegrationEntriesForProblemsArrayStudentStatus(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	entries := mtest.D("a", mtest.D("1", mtest.D("score", 1, "problemStatus", nil, "submissionIds", bson.A{})))
	odd, ok := bson.NewObjectID(), bson.NewObjectID()
	load(t, db, materialize.Docs{Homeworks: []bson.Raw{
		mtest.Raw("_id", odd, "homeworkName", "odd", "studentStatus", bson.A{entries}),
		mtest.Raw("_id", ok, "homeworkName", "ok", "studentStatus", entries),
	}})
	got, err := db.EntriesForProblems(ctx, []int64{1})
	if err != nil {
		t.Fatalf("EntriesForProblems fails on an array studentStatus: %v", err)
	}
	if want := []materialize.HomeworkUser{{Homework: ok, User: "a"}}; !slices.Equal(got[1], want) {
		t.Errorf("EntriesForProblems(1) = %v, want %v", got[1], want)
	}
}

func TestIntegrationKeyIndex(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	a, b := bson.NewObjectID(), bson.NewObjectID()
	p := func(u string, n int64) materialize.Pair { return materialize.Pair{User: u, Problem: n} }
	if err := db.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{a: {p("u", 1)}, b: {p("v.w", 2)}}); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{a: {p("u", 1), p("x", 3)}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.LookupKeys(ctx, []bson.ObjectID{a, b, bson.NewObjectID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Equal(got[a], []materialize.Pair{p("u", 1), p("x", 3)}) || !slices.Equal(got[b], []materialize.Pair{p("v.w", 2)}) {
		t.Errorf("LookupKeys = %v", got)
	}
}

func TestIntegrationFencedCheckpoint(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	ttl := 2 * time.Second // expiry is the server's ($$NOW): the test waits it out
	if _, ok, err := db.LoadCheckpoint(ctx); err != nil || ok {
		t.Fatalf("empty: %v %v", ok, err)
	}
	if err := db.SaveCheckpoint(ctx, resume.Checkpoint{StartAt: bson.Timestamp{T: 1, I: 1}}); err != nil {
		t.Fatalf("epoch 0 save: %v", err)
	}
	la, ok, err := db.Acquire(ctx, "A", ttl)
	if err != nil || !ok || la.Epoch != 1 || la.Owner != "A" || time.Until(la.Expires) > ttl+time.Minute || time.Until(la.Expires) < -time.Minute {
		t.Fatalf("A acquires: %+v %v %v", la, ok, err)
	}
	if err := db.SaveCheckpoint(ctx, resume.Checkpoint{}); !errors.Is(err, resume.ErrFenced) {
		t.Errorf("epoch 0 save under a lease: %v", err)
	}
	tok := mtest.Raw("_data", "826A")
	if err := db.SaveCheckpoint(ctx, resume.Checkpoint{Token: tok, Epoch: 1, Owner: "A"}); err != nil {
		t.Fatalf("A saves: %v", err)
	}
	if l, ok, err := db.Acquire(ctx, "B", ttl); err != nil || ok || l.Owner != "A" {
		t.Errorf("B while A holds: %+v %v %v", l, ok, err)
	}
	if l, ok, err := db.Renew(ctx, "A", 1, ttl); err != nil || !ok || l.Epoch != 1 {
		t.Errorf("A renews: %+v %v %v", l, ok, err)
	}
	time.Sleep(ttl + 500*time.Millisecond)
	lb, ok, err := db.Acquire(ctx, "B", ttl)
	if err != nil || !ok || lb.Epoch != 2 {
		t.Fatalf("B at expiry: %+v %v %v", lb, ok, err)
	}
	if l, ok, err := db.Renew(ctx, "A", 1, ttl); err != nil || ok || l.Owner != "B" {
		t.Errorf("deposed A renews: %+v %v %v", l, ok, err)
	}
	if err := db.SaveCheckpoint(ctx, resume.Checkpoint{Epoch: 1, Owner: "A"}); !errors.Is(err, resume.ErrFenced) {
		t.Errorf("deposed A saves: %v", err)
	}
	cp, ok, err := db.LoadCheckpoint(ctx)
	if err != nil || !ok || cp.Epoch != 1 || !bytes.Equal(cp.Token, tok) {
		t.Errorf("checkpoint after fenced save: %+v %v %v", cp, ok, err)
	}
	if err := db.Release(ctx, "B", 2); err != nil {
		t.Fatal(err)
	}
	if l, ok, err := db.Acquire(ctx, "A", ttl); err != nil || !ok || l.Epoch != 3 {
		t.Errorf("A after release: %+v %v %v", l, ok, err)
	}
	if l, ok, err := db.Current(ctx); err != nil || !ok || l.Owner != "A" || l.Epoch != 3 {
		t.Errorf("current: %+v %v %v", l, ok, err)
	}
}

// nextEvent waits up to a minute for the next event of st.
func nextEvent(t *testing.T, st watch.Stream) (watch.Event, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ev, ok, err := st.Next(testCtx(t))
		if ok || err != nil {
			return ev, err
		}
	}
	t.Fatal("no change event within a minute")
	return watch.Event{}, nil
}

func mustEvent(t *testing.T, st watch.Stream, coll string, op materialize.Op) watch.Event {
	t.Helper()
	ev, err := nextEvent(t, st)
	if err != nil {
		t.Fatalf("want %s %s: %v", op, coll, err)
	}
	if ev.Change.Collection != coll || ev.Change.Op != op || len(ev.Token) == 0 || ev.ClusterTime.IsZero() {
		t.Fatalf("got %+v, want %s on %s", ev, op, coll)
	}
	return ev
}

func TestIntegrationChangeStream(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	for _, c := range []string{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem, materialize.CollUser, "other"} {
		if err := db.db.CreateCollection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	start, err := db.ClusterTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := db.Open(ctx, watch.Position{StartAt: start})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	subs := db.db.Collection(materialize.CollSubmission)
	hws := db.db.Collection(materialize.CollHomework)
	probs := db.db.Collection(materialize.CollProblem)
	users := db.db.Collection(materialize.CollUser)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	sid := bson.NewObjectID()
	must(subs.InsertOne(ctx, mtest.D("_id", sid, "user", "u1", "problem", 7, "timestamp", now, "status", -1, "score", 0, "code", "x")))
	ev := mustEvent(t, st, materialize.CollSubmission, materialize.OpInsert)
	if ev.Change.SubmissionID != sid || !ev.Change.HasPair || ev.Change.Pair != (materialize.Pair{User: "u1", Problem: 7}) {
		t.Errorf("insert: %+v", ev.Change)
	}
	// A move: the event carries the new user (updatedFields.user), not
	// the problem it kept.
	must(subs.UpdateOne(ctx, mtest.D("_id", sid), mtest.D("$set", mtest.D("user", "u3"))))
	ev = mustEvent(t, st, materialize.CollSubmission, materialize.OpUpdate)
	if ev.Change.Move != (materialize.Move{User: "u3", HasUser: true}) || !slices.Equal(ev.Change.Fields, []string{"user"}) {
		t.Errorf("move: %+v, want fields [user] and a move to user u3", ev.Change)
	}
	// The user removed and the problem set: in no pair, but the event
	// keeps the problem (a later user pairs with it).
	must(subs.UpdateOne(ctx, mtest.D("_id", sid), mtest.D("$unset", mtest.D("user", ""), "$set", mtest.D("problem", 9))))
	ev = mustEvent(t, st, materialize.CollSubmission, materialize.OpUpdate)
	if ev.Change.Move != (materialize.Move{Problem: 9, HasProblem: true}) || !slices.Equal(slices.Sorted(slices.Values(ev.Change.Fields)), []string{"problem", "user"}) {
		t.Errorf("user removed, problem set: %+v, want fields [problem user] and a move to problem 9 only", ev.Change)
	}
	// An update through a pipeline: logged as a whole document (a replace
	// event, SERVER-42116 on 4.2) or as a delta (an update event whose
	// updatedFields has both halves at the top level).
	must(subs.UpdateOne(ctx, mtest.D("_id", sid), bson.A{mtest.D("$set", mtest.D("user", "u3", "problem", 7))}))
	if ev, err = nextEvent(t, st); err != nil {
		t.Fatal(err)
	}
	switch c := ev.Change; {
	case c.Collection != materialize.CollSubmission:
		t.Errorf("pipeline update: %+v", c)
	case c.Op == materialize.OpReplace && c.HasPair && c.Pair == (materialize.Pair{User: "u3", Problem: 7}):
	case c.Op == materialize.OpUpdate && c.Move == (materialize.Move{User: "u3", Problem: 7, HasUser: true, HasProblem: true}):
	default:
		t.Errorf("pipeline update: %+v, want a replace into u3's pair of 7 or an update moving it there", c)
	}
	must(subs.UpdateOne(ctx, mtest.D("_id", sid), mtest.D("$set", mtest.D("status", 0, "score", 100, "lastSend", now))))
	ev = mustEvent(t, st, materialize.CollSubmission, materialize.OpUpdate)
	if f := slices.Sorted(slices.Values(ev.Change.Fields)); !slices.Equal(f, []string{"lastSend", "score", "status"}) || ev.Change.HasPair {
		t.Errorf("update: %+v", ev.Change)
	}
	afterUpdate := ev.Token
	must(subs.ReplaceOne(ctx, mtest.D("_id", sid), mtest.D("user", "u2", "problem", 8, "timestamp", now)))
	ev = mustEvent(t, st, materialize.CollSubmission, materialize.OpReplace)
	if ev.Change.Pair != (materialize.Pair{User: "u2", Problem: 8}) {
		t.Errorf("replace: %+v", ev.Change)
	}
	must(subs.DeleteOne(ctx, mtest.D("_id", sid)))
	ev = mustEvent(t, st, materialize.CollSubmission, materialize.OpDelete)
	if ev.Change.SubmissionID != sid || ev.Change.HasPair {
		t.Errorf("delete: %+v", ev.Change)
	}
	hid := bson.NewObjectID()
	must(hws.InsertOne(ctx, mtest.D("_id", hid, "penalty", "score = 0", "studentStatus", mtest.D("u1", mtest.D("7", mtest.D("score", 0))))))
	ev = mustEvent(t, st, materialize.CollHomework, materialize.OpInsert)
	if ev.Change.HomeworkID != hid {
		t.Errorf("homework insert: %+v", ev.Change)
	}
	must(hws.UpdateOne(ctx, mtest.D("_id", hid), mtest.D("$set", mtest.D("studentStatus.u1.7", mtest.D("score", 5)), "$unset", mtest.D("penalty", ""))))
	ev = mustEvent(t, st, materialize.CollHomework, materialize.OpUpdate)
	if f := slices.Sorted(slices.Values(ev.Change.Fields)); !slices.Equal(f, []string{"penalty", "studentStatus.u1.7"}) {
		t.Errorf("homework update fields: %v", f)
	}
	// An update of many fields of small values: its names outgrow the
	// updateDescription, so a homework's event carries none (every field
	// may have changed: recomputed whole); a submission's keeps them.
	nulls := bson.D{}
	for i := range 200 {
		nulls = append(nulls, bson.E{Key: fmt.Sprintf("x%03d", i), Value: nil})
	}
	must(hws.UpdateOne(ctx, mtest.D("_id", hid), mtest.D("$set", nulls)))
	if ev = mustEvent(t, st, materialize.CollHomework, materialize.OpUpdate); ev.Change.Fields != nil {
		t.Errorf("homework update of 200 null fields: %d changed fields, want none (the names outgrow the server's updateDescription)", len(ev.Change.Fields))
	}
	nsid := bson.NewObjectID()
	must(subs.InsertOne(ctx, mtest.D("_id", nsid, "user", "u1", "problem", 7)))
	mustEvent(t, st, materialize.CollSubmission, materialize.OpInsert)
	must(subs.UpdateOne(ctx, mtest.D("_id", nsid), mtest.D("$set", nulls)))
	if ev = mustEvent(t, st, materialize.CollSubmission, materialize.OpUpdate); len(ev.Change.Fields) != 200 {
		t.Errorf("submission update of 200 null fields: %d changed fields, want 200", len(ev.Change.Fields))
	}
	must(probs.InsertOne(ctx, mtest.D("_id", 7, "homeworks", bson.A{})))
	ev = mustEvent(t, st, materialize.CollProblem, materialize.OpInsert)
	if ev.Change.ProblemID != 7 {
		t.Errorf("problem insert: %+v", ev.Change)
	}
	must(probs.UpdateOne(ctx, mtest.D("_id", 7), mtest.D("$push", mtest.D("homeworks", hid))))
	ev = mustEvent(t, st, materialize.CollProblem, materialize.OpUpdate)
	if len(ev.Change.Fields) != 1 || !strings.HasPrefix(ev.Change.Fields[0], "homeworks") {
		t.Errorf("problem update fields: %v", ev.Change.Fields)
	}
	// User inserts and updates pass the pipeline (watch.Pipeline keeps
	// user insert, replace and update events, so a foreign write to a
	// derived field is corrected), projected to their changed field names;
	// a write to another collection is filtered out server-side.
	must(users.InsertOne(ctx, mtest.D("_id", "u1", "submission", 0)))
	ev = mustEvent(t, st, materialize.CollUser, materialize.OpInsert)
	if ev.Change.UserID != "u1" {
		t.Errorf("user insert: %+v", ev.Change)
	}
	must(users.UpdateOne(ctx, mtest.D("_id", "u1"), mtest.D("$set", mtest.D("submission", 1))))
	ev = mustEvent(t, st, materialize.CollUser, materialize.OpUpdate)
	if ev.Change.UserID != "u1" || !slices.Equal(ev.Change.Fields, []string{"submission"}) {
		t.Errorf("user update: %+v, want u1 with fields [submission]", ev.Change)
	}
	must(db.db.Collection("other").InsertOne(ctx, mtest.D("x", 1)))
	// A submission Back-End never writes: reported, and the stream moves on.
	must(subs.InsertOne(ctx, mtest.D("_id", "not-an-objectid", "user", "u1")))
	ev, err = nextEvent(t, st)
	if !errors.Is(err, watch.ErrBadEvent) || len(ev.Token) == 0 || ev.Change.Collection != "" {
		t.Errorf("bad event: %+v, %v", ev, err)
	}

	// Resume after the update: the replace comes next.
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st2, err := db.Open(ctx, watch.Position{Token: afterUpdate})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close(ctx)
	ev = mustEvent(t, st2, materialize.CollSubmission, materialize.OpReplace)
	if ev.Change.SubmissionID != sid {
		t.Errorf("resumed: %+v", ev.Change)
	}
}

// TestIntegrationQuietStreamAdvances checks that the resume token moves on
// (postBatchResumeToken) while only filtered-out changes happen.
func TestIntegrationQuietStreamAdvances(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	st, err := db.Open(ctx, watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	if _, ok, err := st.Next(ctx); ok || err != nil {
		t.Fatalf("quiet stream: ok=%v err=%v", ok, err)
	}
	first := st.ResumeToken()
	if len(first) == 0 {
		t.Fatal("no postBatchResumeToken after a getMore")
	}
	other := db.db.Collection("other")
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if _, err := other.InsertOne(ctx, mtest.D("x", 1)); err != nil {
			t.Fatal(err)
		}
		ev, ok, err := st.Next(ctx)
		if err != nil || ok {
			t.Fatalf("filtered change delivered: %+v %v %v", ev, ok, err)
		}
		if tok := st.ResumeToken(); !bytes.Equal(tok, first) {
			// The advanced token resumes cleanly.
			st2, err := db.Open(ctx, watch.Position{Token: tok})
			if err != nil {
				t.Fatal(err)
			}
			_ = st2.Close(ctx)
			return
		}
	}
	t.Error("resume token did not advance on a quiet stream")
}

// TestIntegrationHistoryLost: a stream whose resume point the server
// cannot find in the oplog fails with watch.ErrHistoryLost.
//
// A start time before the oplog's first entry is not enough on a fresh
// replica set: while that first entry is the "initiating set" no-op, the
// server's oplog scan accepts any earlier start, since no history can
// have fallen off (mongodb/mongo src/mongo/db/exec/collection_scan.cpp,
// isNewRS; the change stream turns OplogQueryMinTsMissing into
// ChangeStreamHistoryLost 286 only otherwise, document_source_change_
// stream_check_resumability.cpp). So the test resumes from an event's
// resume token that the watched database's oplog entries do not hold (an
// event of another database): the server reports the token as not found
// (ChangeStreamFatalError 280, "cannot resume stream; the resume token was
// not found", document_source_change_stream_ensure_resume_token_present.cpp)
// as soon as a later event of the watched database surpasses it. On a
// replica set whose oplog has rolled over, a start time one second before
// its first entry is tried too (286).
func TestIntegrationHistoryLost(t *testing.T) {
	ctx := testCtx(t)
	elsewhere, db := testDB(t), testDB(t)

	// An event of another database: its token is in the oplog, but not
	// among the watched database's events.
	other, err := elsewhere.Open(ctx, watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := elsewhere.db.Collection(materialize.CollSubmission).InsertOne(ctx, mtest.D("_id", bson.NewObjectID(), "user", "u", "problem", 1)); err != nil {
		t.Fatal(err)
	}
	foreign := mustEvent(t, other, materialize.CollSubmission, materialize.OpInsert).Token

	st, err := db.Open(ctx, watch.Position{Token: foreign})
	if err == nil {
		defer st.Close(ctx)
		// A later event of the watched database surpasses the token.
		if _, err := db.db.Collection(materialize.CollSubmission).InsertOne(ctx, mtest.D("_id", bson.NewObjectID(), "user", "u", "problem", 1)); err != nil {
			t.Fatal(err)
		}
		var ev watch.Event
		ev, err = nextEvent(t, st)
		if err == nil {
			t.Fatalf("resumed from a token the database never produced and got %+v, want ErrHistoryLost", ev.Change)
		}
	}
	if !errors.Is(err, watch.ErrHistoryLost) {
		t.Errorf("resume from a token not in the oplog: %v, want ErrHistoryLost", err)
	}

	// A start time before the oplog's first entry, where that entry is not
	// the replica set's initiation (the oplog rolled over).
	var first struct {
		TS  bson.Timestamp `bson:"ts"`
		Op  string         `bson:"op"`
		Msg bson.Raw       `bson:"o"`
	}
	err = db.client.Database("local").Collection("oplog.rs").FindOne(ctx, bson.D{},
		options.FindOne().SetSort(bson.D{{Key: "$natural", Value: 1}})).Decode(&first)
	switch {
	case err != nil:
		t.Logf("cannot read local.oplog.rs (%v): start-time case not run", err)
		return
	case first.Op == "n" && isInitiation(first.Msg):
		t.Logf("the oplog has not rolled over (first entry %v is the initiation): start-time case not run", first.TS)
		return
	}
	before := bson.Timestamp{T: first.TS.T - 1}
	st2, err := db.Open(ctx, watch.Position{StartAt: before})
	if err == nil {
		defer st2.Close(ctx)
		if _, err := db.db.Collection(materialize.CollSubmission).InsertOne(ctx, mtest.D("_id", bson.NewObjectID(), "user", "u", "problem", 1)); err != nil {
			t.Fatal(err)
		}
		_, err = nextEvent(t, st2)
	}
	if !errors.Is(err, watch.ErrHistoryLost) {
		t.Errorf("start at %v, before the oplog's first entry %v: %v, want ErrHistoryLost", before, first.TS, err)
	}
}

// isInitiation reports whether an oplog entry's o field is the no-op a
// replica set writes when it is initiated.
func isInitiation(o bson.Raw) bool {
	msg, ok := o.Lookup("msg").StringValueOK()
	return ok && msg == "initiating set"
}

func TestIntegrationEnsureIndexes(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	for range 2 {
		if err := db.EnsureIndexes(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, ix := range indexes {
		specs, err := driverIndexes{db: db.db}.list(ctx, ix.Collection)
		if err != nil || !slices.ContainsFunc(specs, func(s bson.Raw) bool { n, _ := s.Lookup("name").StringValueOK(); return n == ix.Name }) {
			t.Errorf("index %s on %s: not listed (%v)", ix.Name, ix.Collection, err)
		}
	}
	if ct, err := db.ClusterTime(ctx); err != nil || ct.IsZero() {
		t.Errorf("cluster time: %v %v", ct, err)
	}
}

// TestIntegrationUserStats runs userStatsPipeline on a real server over
// the random submissions of TestUserStatsPipeline (every edge case: whole
// and fractional doubles, nulls, missing fields, strings, a string _id, an
// array user, a symbol user, duplicate keys, (timestamp, _id) ties) and
// compares with memstore's UserStats.
func TestIntegrationUserStats(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	users := []string{"a", "b", "c.d", "$e"}
	for seed := 0; seed < 30; seed++ {
		r := mrand.New(mrand.NewPCG(uint64(seed), 11))
		st := memstore.New()
		if _, err := db.submissions.DeleteMany(ctx, bson.D{}); err != nil {
			t.Fatal(err)
		}
		for i := range r.IntN(60) {
			raw := rawOf(randomSubmission(r, i, users, seed%2 == 0))
			if err := st.Load(materialize.CollSubmission, raw); err != nil {
				t.Fatal(err)
			}
			if _, err := db.submissions.InsertOne(ctx, raw); err != nil {
				t.Fatal(err)
			}
		}
		want, _, err := st.UserStats(ctx, users)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := db.UserStats(ctx, users)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if !got[u].Equal(want[u]) {
				t.Fatalf("seed %d user %q: server %+v, memstore %+v", seed, u, got[u], want[u])
			}
		}
	}
}

// TestIntegrationUserStatsOddDocuments: on a real server, a symbol user
// equal to a name (matched, grouped and sorted as the string) does not
// take the counted user's place, and a null _id is reported as the
// decoder reports it (the unit tests TestUserStatsPipelineUserTypes and
// TestUserStatsPipelineNonObjectID hold the evaluator's reading of the
// same documents).
func TestIntegrationUserStatsOddDocuments(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.submissions.DeleteMany(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	ts := bson.DateTime(1_700_000_000_000)
	docs := []bson.D{
		{{Key: "_id", Value: bson.ObjectID{11: 1}}, {Key: "user", Value: "a"}, {Key: "problem", Value: int32(7)},
			{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}},
		{{Key: "_id", Value: bson.ObjectID{11: 2}}, {Key: "user", Value: bson.Symbol("a")}, {Key: "problem", Value: int32(8)},
			{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(1)}, {Key: "score", Value: int32(0)}},
		{{Key: "_id", Value: nil}, {Key: "user", Value: "a"}, {Key: "problem", Value: int32(9)},
			{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}},
	}
	var wantBad []materialize.DecodeError
	for _, d := range docs {
		if _, err := db.submissions.InsertOne(ctx, d); err != nil {
			t.Fatal(err)
		}
		if _, err := materialize.DecodeSubmission(rawOf(d)); err != nil {
			wantBad = append(wantBad, *err.(*materialize.DecodeError))
		}
	}
	stats, bad, err := db.UserStats(ctx, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (materialize.UserStats{Submission: 1, ACSubmission: 1, ACProblemIDs: []int64{7}}); !stats["a"].Equal(want) {
		t.Errorf("stats of a %+v, want %+v", stats["a"], want)
	}
	var gotBad []materialize.DecodeError
	for _, b := range bad {
		gotBad = append(gotBad, *b)
	}
	sortErrs := func(es []materialize.DecodeError) {
		slices.SortFunc(es, func(x, y materialize.DecodeError) int { return strings.Compare(x.Error(), y.Error()) })
	}
	sortErrs(gotBad)
	sortErrs(wantBad)
	if !slices.Equal(gotBad, wantBad) {
		t.Errorf("malformed %v, want %v", gotBad, wantBad)
	}
}

// TestIntegrationUserFieldsAbsent: user documents from before 2020 (no
// submission, AC_submission, AC_problem_ids) and one whose AC_* fields
// Back-End left absent read, through the adapter, as mongoengine's
// defaults: verify reports drift only for the user whose derived value is
// not the default, and a rebuild writes only that user, leaving the other
// documents byte for byte as they were.
func TestIntegrationUserFieldsAbsent(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hw := bson.NewObjectID()
	sub := func(user string, status, score int32) bson.Raw {
		return mtest.Raw("_id", bson.NewObjectID(), "user", user, "problem", int32(7), "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", status, "score", score)
	}
	load(t, db, materialize.Docs{
		Users: []bson.Raw{
			mtest.Raw("_id", "old", "username", "old"),
			mtest.Raw("_id", "partial", "submission", int32(1)),
			mtest.Raw("_id", "solver", "username", "solver"),
		},
		Problems:    []bson.Raw{mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})},
		Homeworks:   []bson.Raw{mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D())},
		Submissions: []bson.Raw{sub("partial", 1, 0), sub("solver", 0, 100)},
	})
	before := readAll(t, db).Users

	rep, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true, MaxDiffs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Users != 3 || rep.DriftedUsers != 1 || rep.Diffs[0].ID != "solver" {
		t.Fatalf("verify: %d users compared, %d drifted (%+v); want 3 and only solver", rep.Users, rep.DriftedUsers, rep.Diffs)
	}
	if _, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	after := map[string]bson.Raw{}
	for _, a := range readAll(t, db).Users {
		after[a.Lookup("_id").StringValue()] = a
	}
	for _, b := range before {
		name := b.Lookup("_id").StringValue()
		a := after[name]
		if changed := !bytes.Equal(a, b); changed != (name == "solver") {
			t.Errorf("user %s: rewritten = %v\nbefore %s\nafter  %s", name, changed, b, a)
		}
	}
	if st, ok := materialize.DecodeUserStats(after["solver"]); !ok || st.Submission != 1 || st.ACSubmission != 1 {
		t.Errorf("solver after rebuild: %+v %v", st, ok)
	}
}
