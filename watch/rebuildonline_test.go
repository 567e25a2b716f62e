package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/progress"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// driftedStore returns an in-memory store holding the first vector whose
// stored values drift, with enough later writes that the cluster time
// read before the scan is past the 30 s start margin.
func driftedStore(t *testing.T) (*memstore.Store, mtest.Vector) {
	t.Helper()
	vs, err := mtest.ReadVectors("../materialize/testdata/derive.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if len(mtest.DiffStored(v, v.DB)) == 0 {
			continue
		}
		st := memstore.New()
		for coll, docs := range map[string][]bson.Raw{materialize.CollUser: v.DB.Users, materialize.CollProblem: v.DB.Problems,
			materialize.CollHomework: v.DB.Homeworks, materialize.CollSubmission: v.DB.Submissions} {
			if err := st.Load(coll, docs...); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			if err := st.Insert("noise", mtest.Raw("_id", bson.NewObjectID())); err != nil {
				t.Fatal(err)
			}
		}
		return st, v
	}
	t.Fatal("no vector with stored drift")
	return nil, mtest.Vector{}
}

// noOplog is the in-memory store as the MongoDB adapter behaves on a
// standalone mongod: no cluster time, and no checkpoint can be saved.
type noOplog struct{ *memstore.Store }

func (noOplog) ClusterTime(context.Context) (bson.Timestamp, error) { return bson.Timestamp{}, nil }
func (noOplog) SaveCheckpoint(context.Context, resume.Checkpoint) error {
	return errors.New("standalone: no oplog")
}

func onlineOpts() watch.OnlineRebuildOptions {
	return watch.OnlineRebuildOptions{Owner: "test", TTL: 15 * time.Second, Progress: func(progress.Status) {}}
}

// TestRebuildOnline: the rebuild writes every drifted value under the
// lease, releases it, and returns the checkpoint it saved (read back):
// a start 30 s before the cluster time read before the scan.
func TestRebuildOnline(t *testing.T) {
	ctx := context.Background()
	st, v := driftedStore(t)
	rep, saved, err := watch.RebuildOnline(ctx, st, onlineOpts())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Drift() == 0 {
		t.Error("report: no drift")
	}
	if d := mtest.DiffStored(v, st.Docs()); len(d) > 0 {
		t.Errorf("left %d differences, first: %s", len(d), d[0])
	}
	cp, ok, err := st.LoadCheckpoint(ctx)
	if err != nil || !ok {
		t.Fatalf("no checkpoint: %v", err)
	}
	if saved.StartAt != cp.StartAt || saved.Epoch != cp.Epoch || saved.StartAt.IsZero() {
		t.Errorf("returned %+v, saved %+v", saved, cp)
	}
	if rep.StartAt.T-saved.StartAt.T != 30 {
		t.Errorf("saved start %v, snapshot %v: want 30 s before", saved.StartAt, rep.StartAt)
	}
	if l, ok, _ := st.Current(ctx); ok && time.Now().Before(l.Expires) {
		t.Errorf("lease still held: %+v", l)
	}
}

// TestRebuildOnlineStandalone: with no oplog the values are written and
// no checkpoint is saved.
func TestRebuildOnlineStandalone(t *testing.T) {
	ctx := context.Background()
	st, v := driftedStore(t)
	opts := onlineOpts()
	opts.Standalone = true
	_, saved, err := watch.RebuildOnline(ctx, noOplog{st}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d := mtest.DiffStored(v, st.Docs()); len(d) > 0 {
		t.Errorf("left %d differences, first: %s", len(d), d[0])
	}
	if cp, ok, _ := st.LoadCheckpoint(ctx); (ok && !cp.Empty()) || !saved.Empty() {
		t.Errorf("a checkpoint on a standalone: saved %+v, returned %+v", cp, saved)
	}
}

// TestRebuildOnlineDryRun: a dry run reports and writes nothing, without
// the lease; a rebuild while another instance holds the lease is refused.
func TestRebuildOnlineDryRun(t *testing.T) {
	ctx := context.Background()
	st, v := driftedStore(t)
	if _, ok, err := st.Acquire(ctx, "other", time.Minute); err != nil || !ok {
		t.Fatalf("test setup: acquire: %v %v", ok, err)
	}
	opts := onlineOpts()
	opts.DryRun, opts.MaxDiffs = true, 3
	rep, _, err := watch.RebuildOnline(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Drift() == 0 || len(rep.Diffs) == 0 || len(rep.Diffs) > 3 {
		t.Errorf("dry run report: drift %d, %d diffs", rep.Drift(), len(rep.Diffs))
	}
	if len(mtest.DiffStored(v, st.Docs())) == 0 {
		t.Error("the dry run wrote")
	}
	if _, _, err := watch.RebuildOnline(ctx, st, onlineOpts()); !errors.Is(err, watch.ErrLeaseHeld) {
		t.Errorf("rebuild under another's lease: %v, want ErrLeaseHeld", err)
	}
}
