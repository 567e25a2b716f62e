package mongodb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
)

// codeNoDiskUse is 292 QueryExceededMemoryLimitNoDiskUseAllowed.
const codeNoDiskUse = 292

// TestIntegrationScanSpillsWithoutIndex: without the covering index the
// rebuild's scan is a blocking sort, which past the server's sort memory
// limit spills to disk because the find sets allowDiskUse (find honours
// it since 4.4), where a find without it fails (292). The limit is
// lowered to 64 KiB for the test (internalQueryMaxBlockingSortMemoryUsageBytes)
// and allowDiskUseByDefault turned off (6.0+), both restored after; the
// same find without allowDiskUse is run first and must fail, so the
// test shows the option at work (it skips where it cannot set them).
// Other tests sharing the server while it runs see the low limit too.
func TestIntegrationScanSpillsWithoutIndex(t *testing.T) {
	db := testDB(t)
	ctx := testCtx(t)
	var want []materialize.Submission
	var docs []any
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 2000 {
		s := materialize.Submission{ID: bson.NewObjectID(), User: fmt.Sprintf("u%03d", (i*7919)%300), Problem: int64(i % 11),
			Timestamp: base + int64(i)*1000, Status: int64(i % 3), Score: int64(i % 101)}
		want = append(want, s)
		docs = append(docs, bson.D{{Key: "_id", Value: s.ID}, {Key: "user", Value: s.User}, {Key: "problem", Value: int32(s.Problem)},
			{Key: "timestamp", Value: bson.DateTime(s.Timestamp)}, {Key: "status", Value: int32(s.Status)},
			{Key: "score", Value: int32(s.Score)}, {Key: "languageType", Value: int32(i % 3)}})
	}
	if _, err := db.submissions.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	materialize.SortGrouped(want)
	setServerParameter(t, db, "internalQueryMaxBlockingSortMemoryUsageBytes", int64(64<<10))
	setServerParameter(t, db, "allowDiskUseByDefault", false) // absent before 6.0: the default there is false
	noDisk := options.Find().SetProjection(submissionProjection).SetSort(scanSort).SetAllowDiskUse(false)
	cur, err := db.submissions.Find(ctx, bson.D{}, noDisk)
	if err == nil {
		err = cur.All(ctx, &[]bson.Raw{})
	}
	var se mongo.ServerError
	if !(err != nil && errors.As(err, &se) && se.HasErrorCode(codeNoDiskUse)) {
		t.Skipf("the scan's find without allowDiskUse did not fail with 292 (%v): the server spills anyway, nothing to show", err)
	}
	var got []materialize.Submission
	if err := db.ScanSubmissions(ctx, func(s materialize.Submission) error { got = append(got, s); return nil },
		func(e *materialize.DecodeError) { t.Errorf("undecodable: %v", e) }); err != nil {
		t.Fatalf("scan without the covering index past the sort memory limit: %v", err)
	}
	if !slices.EqualFunc(got, want, func(a, b materialize.Submission) bool { return a.ID == b.ID }) {
		t.Errorf("scan: %d submissions, want %d in (user, problem, timestamp, _id) order", len(got), len(want))
	}
}

// setServerParameter sets the server parameter name to v for t and
// restores its value at cleanup; it skips t when the parameter cannot
// be read or set, except allowDiskUseByDefault where the server has none
// (before 6.0).
func setServerParameter(t *testing.T, db *DB, name string, v any) {
	t.Helper()
	ctx := testCtx(t)
	admin := db.client.Database("admin")
	raw, err := admin.RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: name, Value: 1}}).Raw()
	if err != nil {
		if name == "allowDiskUseByDefault" {
			return
		}
		t.Skipf("getParameter %s: %v", name, err)
	}
	old := raw.Lookup(name)
	if err := admin.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: name, Value: v}}).Err(); err != nil {
		t.Skipf("setParameter %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.RunCommand(ctx, bson.D{{Key: "setParameter", Value: 1}, {Key: name, Value: old}}).Err(); err != nil {
			t.Errorf("restore %s: %v", name, err)
		}
	})
}
