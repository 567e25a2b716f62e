package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// loadedStore returns an in-memory store holding d, whose oplog is long
// enough that the cluster time read before the scan is past the 30 s
// margin (so the saved start and the snapshot time differ).
func loadedStore(t *testing.T, d materialize.Docs) *memstore.Store {
	t.Helper()
	st := memstore.New()
	for coll, docs := range map[string][]bson.Raw{materialize.CollUser: d.Users, materialize.CollProblem: d.Problems,
		materialize.CollHomework: d.Homeworks, materialize.CollSubmission: d.Submissions} {
		if err := st.Load(coll, docs...); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ { // writes that move the cluster time
		if err := st.Insert("noise", mtest.Raw("_id", bson.NewObjectID())); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func testRebuildConfig() *Config {
	return &Config{InstanceID: "test-rebuild", LeaseTTL: 15 * time.Second}
}

// TestRebuildPrintsSavedStart: rebuild prints the start the checkpoint it
// saved holds (30 s before the cluster time read before the scan), not
// the snapshot time itself.
func TestRebuildPrintsSavedStart(t *testing.T) {
	v := readVectors(t)[0]
	st := loadedStore(t, v.DB)
	var out bytes.Buffer
	env := &environment{stdout: &out, stderr: &out}
	if err := rebuildOnline(context.Background(), env, st, false, testRebuildConfig(), zerolog.Nop(), watch.RebuildOptions{}, textProgress(env, "rebuild", true)); err != nil {
		t.Fatalf("rebuild: %v\n%s", err, out.String())
	}
	cp, ok, err := st.LoadCheckpoint(context.Background())
	if err != nil || !ok || cp.StartAt.IsZero() {
		t.Fatalf("no start saved: %+v %v %v", cp, ok, err)
	}
	snapshot, _ := st.ClusterTime(context.Background())
	if snapshot.T-cp.StartAt.T < 30 {
		t.Fatalf("test setup: saved start %v is not 30 s before the snapshot %v", cp.StartAt, snapshot)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "checkpoint:") {
			line = l
		}
	}
	if want := fmt.Sprintf("cluster time %d.%d ", cp.StartAt.T, cp.StartAt.I); !strings.Contains(line, want) {
		t.Errorf("rebuild printed %q; want the saved start %q", line, want)
	}
}

// standaloneStore is the in-memory store behaving as the MongoDB adapter
// does on a standalone mongod: no cluster time (zero) and no checkpoint
// (SaveCheckpoint refused; see mongodb.DB.SaveCheckpoint).
type standaloneStore struct{ *memstore.Store }

var errNoOplog = errors.New("standalone: no oplog")

func (standaloneStore) ClusterTime(context.Context) (bson.Timestamp, error) {
	return bson.Timestamp{}, nil
}
func (standaloneStore) SaveCheckpoint(context.Context, resume.Checkpoint) error { return errNoOplog }

// TestRebuildOnStandalone: on a standalone mongod rebuild writes the
// derived values, saves no stream start, and says so.
func TestRebuildOnStandalone(t *testing.T) {
	v := readVectors(t)[0]
	st := loadedStore(t, v.DB)
	if len(mtest.DiffStored(v, st.Docs())) == 0 {
		t.Fatal("test setup: the vector holds no drift, a rebuild would write nothing")
	}
	var out bytes.Buffer
	env := &environment{stdout: &out, stderr: &out}
	err := rebuildOnline(context.Background(), env, standaloneStore{st}, true, testRebuildConfig(), zerolog.Nop(), watch.RebuildOptions{}, textProgress(env, "rebuild", true))
	if err != nil {
		t.Fatalf("rebuild on a standalone: %v\n%s", err, out.String())
	}
	if d := mtest.DiffStored(v, st.Docs()); len(d) > 0 {
		t.Errorf("rebuild on a standalone left %d differences, first: %s", len(d), d[0])
	}
	if cp, ok, _ := st.LoadCheckpoint(context.Background()); ok && !cp.Empty() {
		t.Errorf("a checkpoint was saved on a standalone: %+v", cp)
	}
	if !strings.Contains(out.String(), "checkpoint: none saved: the server is a standalone mongod") {
		t.Errorf("rebuild did not say that it saved no stream start:\n%s", out.String())
	}
}
