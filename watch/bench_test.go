package watch_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// rebuildStore loads Back-End-shaped documents at the scale into a
// memstore: subs submissions over users users in 100 courses, problems
// problems, homeworks homeworks (one per course, problems/homeworks each).
func rebuildStore(tb testing.TB, users, problems, homeworks, subs int) *memstore.Store {
	r := rand.New(rand.NewPCG(3, 5))
	st := memstore.New()
	perHW := problems / homeworks
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hwIDs := make([]bson.ObjectID, homeworks)
	students := make([]bson.D, homeworks)
	for h := range hwIDs {
		hwIDs[h] = bson.NewObjectIDFromTimestamp(time.Unix(int64(1_700_000_000+h), 0))
		for k := 0; k < perHW; k++ {
			must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(h*perHW+k+1), "homeworks", bson.A{hwIDs[h]})))
		}
	}
	names := make([]string, users)
	for u := range names {
		names[u] = "student" + strconv.Itoa(u)
		must(st.Load(materialize.CollUser, mtest.Raw("_id", names[u], "submission", int32(3), "AC_submission", int32(1), "AC_problem_ids", bson.A{})))
		h := u % homeworks
		ud := bson.D{}
		for k := 0; k < perHW; k++ {
			ud = append(ud, bson.E{Key: strconv.Itoa(h*perHW + k + 1), Value: mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})})
		}
		students[h] = append(students[h], bson.E{Key: names[u], Value: ud})
	}
	for h, id := range hwIDs {
		must(st.Load(materialize.CollHomework, mtest.Raw("_id", id, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
			"penalty", "score = score * 0.8 ** overtime", "studentStatus", students[h])))
	}
	docs := make([]bson.Raw, subs)
	for i := range docs {
		u := r.IntN(users)
		p := (u%homeworks)*perHW + r.IntN(perHW) + 1
		ts := end.Add(time.Duration(r.Int64N(int64(20*24*time.Hour))) - 10*24*time.Hour)
		var id bson.ObjectID
		id[0], id[1], id[2], id[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		st := int32(r.IntN(8))
		docs[i] = mtest.Raw("_id", id, "user", names[u], "problem", int32(p), "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(ts), "status", st, "score", int32(r.IntN(11)*10), "tasks", bson.A{})
	}
	must(st.Load(materialize.CollSubmission, docs...))
	return st
}

// BenchmarkRebuild is a full rebuild through the in-memory store of
// 1,000,000 submissions over 20,000 users, 500 problems and 100 homeworks:
// decode, sorted scan, derivation, comparison with stored values, bulk
// writes and the key index. It reports the peak heap (HeapSys high-water).
func BenchmarkRebuild(b *testing.B) {
	st := rebuildStore(b, 20_000, 500, 100, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	var rep *drift.Report
	for b.Loop() {
		var err error
		if rep, err = watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "MiB-peak-heap")
	b.ReportMetric(float64(rep.Submissions), "submissions")
}

// TestRebuildSmall runs the rebuild benchmark's generator at a small size
// and checks the result against the reference derivation, so the benchmark
// measures a correct rebuild.
func TestRebuildSmall(t *testing.T) {
	st := rebuildStore(t, 200, 10, 2, 5_000)
	rep, err := watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Submissions != 5_000 || rep.Users != 200 || rep.Entries != 200*5 {
		t.Fatalf("report %+v", rep)
	}
	checkConverged(t, st, "rebuild")
	again, err := watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if again.Drift() != 0 {
		t.Fatalf("a second rebuild finds %d drifted values", again.Drift())
	}
}
