package mongodb

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestIntegrationPendingSubmissions: on a real server, PendingSubmissions
// fails with ErrPendingIndexMissing (Fatal) before EnsureIndexes built
// the partial index, never scanning the collection; once built (with
// partialFilterExpression {status: -1}) it returns exactly the judged
// submissions pending since before the cutoff, the oldest first, and
// explain (executionStats) shows the plan: an IXSCAN of that index, no
// COLLSCAN, one document examined per pending submission returned and
// at most one key more per language interval, among many judged,
// handwritten and recent ones. Hidden, the index fails the query again.
// Skips without a server (mongodb_integration_test.go).
func TestIntegrationPendingSubmissions(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	cutoff := now.Add(-30 * time.Minute)
	var docs []bson.Raw
	var want []string
	n := 0
	add := func(status int32, lang int32, sent time.Time) string {
		n++
		id := bson.NewObjectIDFromTimestamp(sent)
		id[11] = byte(n)
		id[10] = byte(n >> 8)
		d := pendingDoc(0, status, lang, bson.NewDateTimeFromTime(sent))
		d[0].Value = id
		d = append(d, bson.E{Key: "timestamp", Value: bson.NewDateTimeFromTime(sent)})
		docs = append(docs, mustMarshal(t, d))
		return id.Hex()
	}
	for i := range 400 { // judged long ago
		add(int32(i%8), int32(i%3), now.Add(-time.Duration(i+60)*time.Minute))
	}
	for i := range 2 { // created, never sent; handwritten waiting for a teacher
		add(-2, 1, now.Add(-3*time.Hour))
		add(-1, materialize.LanguageHandwritten, now.Add(-time.Duration(5+i)*time.Hour))
	}
	for i := range 3 { // sent a moment ago: in the sandbox's queue
		add(-1, int32(i), now.Add(-time.Duration(i+1)*time.Minute))
	}
	for i := 5; i >= 1; i-- { // never landed, the oldest first in want
		want = append(want, add(-1, int32(i%3), now.Add(-time.Duration(i)*time.Hour)))
	}
	load(t, db, materialize.Docs{Submissions: docs})

	if _, err := db.PendingSubmissions(ctx, cutoff); !errors.Is(err, ErrPendingIndexMissing) || watch.ClassOf(err) != watch.Fatal {
		t.Fatalf("before the index: %v, want ErrPendingIndexMissing (fatal)", err)
	}
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var ix struct {
		Name    string   `bson:"name"`
		Partial bson.Raw `bson:"partialFilterExpression"`
	}
	cur, err := db.submissions.Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for cur.Next(ctx) {
		if err := cur.Decode(&ix); err == nil && ix.Name == pendingIndex.Name {
			found = true
			if v, err := ix.Partial.LookupErr("status"); err != nil || v.AsInt64() != -1 {
				t.Errorf("partialFilterExpression %s, want {status: -1}", ix.Partial)
			}
		}
	}
	_ = cur.Close(ctx)
	if !found {
		t.Fatalf("%s not built", pendingIndex.Name)
	}

	got, err := db.PendingSubmissions(ctx, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range got {
		ids = append(ids, p.ID)
		if p.User != "alice" || p.Problem != 7 || !p.LastSend.Before(cutoff) {
			t.Errorf("%+v: want alice, 7, lastSend before %s", p, cutoff)
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("pending %v, want %v", ids, want)
	}

	find := bson.D{{Key: "find", Value: db.submissions.Name()}, {Key: "filter", Value: pendingFilter(cutoff)},
		{Key: "projection", Value: pendingProjection}, {Key: "sort", Value: pendingSort}, {Key: "hint", Value: pendingIndex.Name}}
	raw, err := db.db.RunCommand(ctx, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var s explainStats
	s.walk(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
	if !slices.Contains(s.stages, "IXSCAN") || slices.Contains(s.stages, "COLLSCAN") {
		t.Errorf("stages %v, want an IXSCAN and no COLLSCAN:\n%s", s.stages, raw)
	}
	if s.docs != int64(len(want)) || s.keys > int64(len(want)+len(judgedLanguages)) {
		t.Errorf("%d documents and %d keys examined for %d pending, want %d and at most %d:\n%s",
			s.docs, s.keys, len(want), len(want), len(want)+len(judgedLanguages), raw)
	}
	t.Logf("%d submissions, %d pending past the cutoff: %d keys, %d documents examined", len(docs), len(want), s.keys, s.docs)

	hide := bson.D{{Key: "collMod", Value: db.submissions.Name()}, {Key: "index", Value: bson.D{{Key: "name", Value: pendingIndex.Name}, {Key: "hidden", Value: true}}}}
	if err := db.db.RunCommand(ctx, hide).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PendingSubmissions(ctx, cutoff); !errors.Is(err, ErrPendingIndexMissing) {
		t.Errorf("with the index hidden: %v, want ErrPendingIndexMissing", err)
	}
}
