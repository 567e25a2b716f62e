package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// busyStore is a database written to while a rebuild runs:
//
//   - an oplog hole: when the rebuild reads the cluster time, a write has
//     just been given an oplog time 10s before that cluster time but is not
//     yet visible to reads, so the scan does not see it (only a stream
//     starting somewhat before the rebuild's start time delivers it);
//   - writes during the scan, after the scan passed the documents they
//     change (only a start time read before the scan covers them).
type busyStore struct {
	*memstore.Store
	hole       func() bson.ObjectID // the hole write; returns the hidden submission
	duringScan func()               // the writes during the scan
	hidden     bson.ObjectID
	readTime   int
}

func (b *busyStore) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	b.readTime++
	if b.readTime > 1 || b.hole == nil {
		return b.Store.ClusterTime(ctx)
	}
	b.hidden = b.hole()
	ct, err := b.Store.ClusterTime(ctx) // the hole write's oplog time
	if err != nil {
		return ct, err
	}
	return bson.Timestamp{T: ct.T + 10, I: 1}, nil
}

func (b *busyStore) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	first := true
	return b.Store.ScanSubmissions(ctx, func(s materialize.Submission) error {
		if s.ID == b.hidden {
			return nil // not yet visible
		}
		if err := fn(s); err != nil {
			return err
		}
		if first && b.duringScan != nil {
			first = false
			b.duringScan()
		}
		return nil
	}, bad)
}

// TestRebuildHandoffMissesNothing: the stream that follows a rebuild
// delivers every write the rebuild's scan did not see, both the writes
// made while the scan ran (the rebuild must read its start time before the
// scan) and a write in an oplog hole just before that start time (the
// stream must start a margin before it). Stored values start equal to the
// derivation of the state before the rebuild, so the rebuild writes
// nothing and no echo of its own writes recomputes the keys for it.
func TestRebuildHandoffMissesNothing(t *testing.T) {
	ctx := context.Background()
	hw := bson.ObjectID{11: 0xa1}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ts := func(h int) bson.DateTime { return bson.NewDateTimeFromTime(end.Add(-time.Duration(h) * time.Hour)) }
	sid := func(n byte) bson.ObjectID { return bson.ObjectID{0: 0x69, 11: n} }
	pre := memstore.New()
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	for _, u := range []string{"alice", "bob", "carol"} {
		must(pre.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	must(pre.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	must(pre.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D("alice", mtest.D("7", start), "bob", mtest.D("7", start), "carol", mtest.D("7", start)))))
	must(pre.Load(materialize.CollSubmission,
		mtest.Raw("_id", sid(1), "user", "alice", "problem", int32(7), "timestamp", ts(9), "status", int32(1), "score", int32(60)),
		mtest.Raw("_id", sid(2), "user", "bob", "problem", int32(7), "timestamp", ts(8), "status", int32(1), "score", int32(40))))
	if _, err := watch.Rebuild(ctx, pre, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	st := memstore.New() // the converged state, no events, no key index
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		must(st.Load(c, pre.Collection(c)...))
	}
	checkConverged(t, st, "setup")

	bs := &busyStore{Store: st}
	bs.hole = func() bson.ObjectID { // carol's first submission, judged
		id := sid(3)
		must(st.Insert(materialize.CollSubmission, mtest.Raw("_id", id, "user", "carol", "problem", int32(7), "timestamp", ts(7), "status", int32(0), "score", int32(100))))
		return id
	}
	bs.duringScan = func() { // bob's submission re-judged, twice (two events)
		doc := st.Get(materialize.CollSubmission, sid(2))
		must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(2), "score", int32(0)), []string{"status", "score"}))
		doc = st.Get(materialize.CollSubmission, sid(2))
		must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(0), "score", int32(100)), []string{"status", "score"}))
	}
	eng := &watch.Engine{Store: bs, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Config: watch.Config{BatchSize: 64, BatchMaxWait: time.Hour}}
	if err := eng.Drain(ctx); err != nil { // no checkpoint: rebuild, then stream from its start time
		t.Fatal(err)
	}
	if bs.readTime == 0 || bs.hidden.IsZero() {
		t.Fatal("setup: the rebuild never read the cluster time")
	}
	if s := st.Stats(); s.Saves == 0 {
		t.Fatal("no checkpoint saved")
	}
	checkConverged(t, st, "after the rebuild and the stream that follows it")
}
