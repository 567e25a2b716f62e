package mongodb

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// seedDemo loads demo data of the given size into db.
func seedDemo(b testing.TB, db *DB, p demo.Params) {
	b.Helper()
	docs := demo.Generate(p)
	load(b, db, materialize.Docs{Users: docs[materialize.CollUser], Problems: docs[materialize.CollProblem],
		Homeworks: docs[materialize.CollHomework], Submissions: docs[materialize.CollSubmission]})
	if err := db.EnsureIndexes(testCtx(b), nil); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIntegrationLag measures end-to-end lag on a real replica set:
// the time from a Back-End-shaped judging write (status, score) to the
// derived entry showing the submission, at about rate submissions per
// second, with `run`'s engine streaming. Reports p50 and p99 in ms.
func BenchmarkIntegrationLag(b *testing.B) {
	const rate = 50 // submissions per second
	db := testDB(b)
	seedDemo(b, db, demo.Params{Users: 50, Problems: 10, Homeworks: 3, Submissions: 500, Seed: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng := &watch.Engine{Store: db, Feed: db, Checkpoints: db, Log: zerolog.Nop(),
		Config: watch.Config{BatchSize: 500, BatchMaxWait: 20 * time.Millisecond}}
	if _, err := eng.RebuildAndCheckpoint(ctx); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()

	// Pairs that have an entry: (user, problem, homework) from the demo data.
	var targets []struct {
		user string
		prob int64
		hw   bson.ObjectID
	}
	hws, _, err := db.AllHomeworks(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, h := range hws {
		for u, ps := range h.Students {
			for pk := range ps {
				if p, ok := materialize.ParseProblemKey(pk); ok {
					targets = append(targets, struct {
						user string
						prob int64
						hw   bson.ObjectID
					}{u, p, h.ID})
				}
			}
		}
	}
	if len(targets) == 0 {
		b.Fatal("no entries in the demo data")
	}
	var lags []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t := targets[i%len(targets)]
		id := bson.NewObjectID()
		if _, err := db.submissions.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "user", Value: t.user},
			{Key: "problem", Value: t.prob}, {Key: "languageType", Value: 1}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(time.Now())},
			{Key: "status", Value: -1}, {Key: "score", Value: -1}}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := db.submissions.UpdateByID(ctx, id, bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: 0}, {Key: "score", Value: 100}}}}); err != nil {
			b.Fatal(err)
		}
		for {
			var doc bson.Raw
			err := db.homeworks.FindOne(ctx, bson.D{{Key: "_id", Value: t.hw}},
				options.FindOne().SetProjection(bson.D{{Key: "studentStatus." + t.user + "." + materialize.ProblemKey(t.prob) + ".submissionIds", Value: 1}})).Decode(&doc)
			if err != nil {
				b.Fatal(err)
			}
			if v, err := doc.LookupErr("studentStatus", t.user, materialize.ProblemKey(t.prob), "submissionIds"); err == nil {
				vals, _ := v.Array().Values()
				if slices.ContainsFunc(vals, func(x bson.RawValue) bool { return x.StringValue() == id.Hex() }) {
					break
				}
			}
			if time.Since(start) > 30*time.Second {
				b.Fatal("derived value not visible after 30s")
			}
			time.Sleep(2 * time.Millisecond)
		}
		lags = append(lags, time.Since(start))
		time.Sleep(max(0, time.Second/rate-time.Since(start)))
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lags[len(lags)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkIntegrationRebuild compares a full rebuild with one plain
// indexed scan of submission (the lower bound: the rebuild reads it once)
// on the same server. Reports both in seconds.
func BenchmarkIntegrationRebuild(b *testing.B) {
	db := testDB(b)
	seedDemo(b, db, demo.Params{Users: 2000, Problems: 100, Homeworks: 20, Submissions: 200_000, Seed: 3})
	ctx := testCtx(b)
	var scan, rebuild time.Duration
	for b.Loop() {
		start := time.Now()
		n := 0
		err := db.find(ctx, db.submissions, bson.D{}, options.Find().SetSort(bson.D{{Key: "user", Value: 1}, {Key: "problem", Value: 1},
			{Key: "timestamp", Value: 1}, {Key: "_id", Value: 1}}).SetProjection(submissionProjection), func(bson.Raw) error { n++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		scan += time.Since(start)
		start = time.Now()
		if _, err := watch.Rebuild(ctx, db, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
			b.Fatal(err)
		}
		rebuild += time.Since(start)
	}
	b.ReportMetric(scan.Seconds()/float64(b.N), "scan-s")
	b.ReportMetric(rebuild.Seconds()/float64(b.N), "rebuild-s")
}
