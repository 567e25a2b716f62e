package mongodb

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

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
