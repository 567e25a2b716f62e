package mongodb

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/storecost"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

func bsonSize(t *testing.T, docs ...any) int64 {
	t.Helper()
	var n int64
	for _, d := range docs {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(b))
	}
	return n
}

// TestCostModelWriteSizes pins the online benchmark's write sizes
// (internal/storecost) to the write models this package sends, so the
// bytes it reports are those of the adapter's filters and updates.
func TestCostModelWriteSizes(t *testing.T) {
	uw := watch.UserWrite{User: "student00001", Stats: materialize.UserStats{Submission: 12, ACSubmission: 3, ACProblemIDs: []int64{4, 1, 9}}}
	f, u := userWrite(uw)
	if got, want := storecost.UserWriteSize(uw), bsonSize(t, f, u); got != want {
		t.Errorf("UserWriteSize = %d, adapter's model %d", got, want)
	}
	ew := watch.EntryWrite{Homework: bson.NewObjectID(), User: "student00001", ProblemKey: "3",
		Entry: materialize.Entry{Score: 80, RawScore: 100, HasRaw: true, ProblemStatus: 1, HasStatus: true, SubmissionIDs: []string{bson.NewObjectID().Hex()}}}
	ef, eu := entryWrite(ew)
	if got, want := storecost.EntryWriteSize(ew), bsonSize(t, ef, eu); got != want {
		t.Errorf("EntryWriteSize = %d, adapter's model %d", got, want)
	}
	id := bson.NewObjectID()
	pairs := []materialize.Pair{{User: "a", Problem: 3}}
	kf, ku := recordKeysWrite(id, pairs)
	if got, want := storecost.RecordKeysSize(id, pairs), bsonSize(t, kf, ku); got != want {
		t.Errorf("RecordKeysSize = %d, adapter's model %d", got, want)
	}
	cp := resume.Checkpoint{Token: bson.Raw(bsonRaw(t, bson.D{{Key: "_data", Value: strings.Repeat("8", 133)}})), SavedAt: time.Unix(1, 0)}
	cf, cu, _ := saveCheckpointWrite(cp)
	if got, want := storecost.CheckpointWriteSize(cp), bsonSize(t, cf, cu); got != want {
		t.Errorf("CheckpointWriteSize = %d, adapter's model with a 150-byte token %d", got, want)
	}
}

func bsonRaw(t *testing.T, d bson.D) []byte {
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCostModelReadSizes pins the online benchmark's read sizes to what
// this package's queries return: the homework pipeline (run by the
// evaluator) for Homeworks, the projection for Submissions and the user
// stats pipeline for UserStats, on Back-End-shaped documents.
func TestCostModelReadSizes(t *testing.T) {
	ctx := context.Background()
	rush := demo.NewRush(demo.RushParams{Students: 6, Problems: 3, Earlier: 12, InHomework: 6, PastProblems: 5, Seed: 4})
	st := memstore.New()
	for coll, docs := range rush.Docs {
		if err := st.Load(coll, docs...); err != nil {
			t.Fatal(err)
		}
	}
	cs := storecost.New(st, storecost.Model{})
	users := rush.Students[:2]

	before := cs.Counts()
	if _, _, err := cs.Homeworks(ctx, []bson.ObjectID{rush.Homework}, users); err != nil {
		t.Fatal(err)
	}
	got := cs.Counts().Sub(before).BytesRead
	out := runPipeline([]bson.D{docOf(st.Get(materialize.CollHomework, rush.Homework))}, norm(homeworkPipeline([]bson.ObjectID{rush.Homework}, users)).(bson.A))
	if want := bsonSize(t, out[0]); got != want {
		t.Errorf("Homeworks: %d bytes, the pipeline returns %d", got, want)
	}

	before = cs.Counts()
	subs, _, err := cs.Submissions(ctx, users, nil)
	if err != nil {
		t.Fatal(err)
	}
	got = cs.Counts().Sub(before).BytesRead
	var want int64
	for _, s := range subs {
		raw := st.Get(materialize.CollSubmission, s.ID)
		d := bson.D{}
		for _, e := range docOf(raw) {
			for _, p := range submissionProjection {
				if e.Key == p.Key {
					d = append(d, e)
				}
			}
		}
		want += bsonSize(t, d)
	}
	if got != want || len(subs) == 0 {
		t.Errorf("Submissions: %d bytes for %d documents, the projection returns %d", got, len(subs), want)
	}

	before = cs.Counts()
	if _, _, err := cs.UserStats(ctx, users); err != nil {
		t.Fatal(err)
	}
	got = cs.Counts().Sub(before).BytesRead
	var docs []bson.D
	for _, raw := range st.Collection(materialize.CollSubmission) {
		docs = append(docs, docOf(raw))
	}
	want = 0
	for _, d := range runPipeline(docs, norm(userStatsPipeline(users)).(bson.A)) {
		want += bsonSize(t, d)
	}
	if got != want {
		t.Errorf("UserStats: %d bytes, the pipeline returns %d", got, want)
	}
}
