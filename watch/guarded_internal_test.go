package watch

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// timedWriter answers each Apply call with the next of its results.
type timedWriter struct {
	results []timedResult
	calls   int
}

type timedResult struct {
	at  bson.Timestamp
	err error
}

func (w *timedWriter) Apply(ctx context.Context, _ *Writes) (bson.Timestamp, error) {
	r := w.results[w.calls]
	w.calls++
	return r.at, r.err
}

// TestApplyGuardedReportsOnlyAppliedChunks: applied (the echo records)
// hears of a chunk only when its Apply returned no error, with its own
// operationTime, even when the writer reports a time for a chunk that
// failed or was refused (it may have landed in part) and onErr lets the
// writes go on: chunk by chunk under a guard, in one call without.
func TestApplyGuardedReportsOnlyAppliedChunks(t *testing.T) {
	T1, T2 := bson.Timestamp{T: 1_800_000_000, I: 1}, bson.Timestamp{T: 1_800_000_000, I: 2}
	refused := WithClass(Refused, ErrWriteRejected)
	users := make([]UserWrite, guardChunk+1)
	for i := range users {
		users[i] = UserWrite{User: "u", Stats: materialize.UserStats{ACProblemIDs: []int64{}}}
	}
	entries := []EntryWrite{{Homework: bson.ObjectID{11: 1}, User: "u", ProblemKey: "7"}}
	guard := func(context.Context) (time.Time, error) { return time.Now().Add(time.Minute), nil }
	cases := []struct {
		name    string
		guard   func(context.Context) (time.Time, error)
		results []timedResult
		want    []bson.Timestamp // the times applied hears, in order
	}{
		{"guarded: the refused middle chunk is not reported",
			guard, []timedResult{{T1, nil}, {T2, refused}, {T2, nil}}, []bson.Timestamp{T1, T2}},
		{"guarded: a failed chunk with a time is not reported",
			guard, []timedResult{{T1, errors.New("connection reset")}, {T2, nil}, {T2, nil}}, []bson.Timestamp{T2, T2}},
		{"unguarded: one call, refused", nil, []timedResult{{T2, refused}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &timedWriter{results: c.results}
			var got []bson.Timestamp
			err := applyGuarded(context.Background(), st, &Writes{Users: users, Entries: entries}, c.guard,
				func(*Writes, error) error { return nil },
				func(_ *Writes, at bson.Timestamp) { got = append(got, at) })
			if err != nil {
				t.Fatal(err)
			}
			if st.calls != len(c.results) {
				t.Fatalf("%d Apply calls, want %d", st.calls, len(c.results))
			}
			if len(got) != len(c.want) {
				t.Fatalf("applied heard %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("applied heard %v, want %v", got, c.want)
				}
			}
		})
	}
}
