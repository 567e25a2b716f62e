package mongodb

import (
	"bytes"
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestScanSubmissionsFindOptions: the rebuild's scan is one find over
// every submission in (user, problem, timestamp, _id) order, projected to
// the fields a submission's decoding reads, with allowDiskUse. Without
// the sort the grouped fold would split a (user, problem) pair; without
// the projection the scan reads whole documents (code, output) and no
// index covers it; without allowDiskUse a scan without the covering
// index fails past 100 MB of sort memory on 4.4 and 5.0, or with
// allowDiskUseByDefault off (TestIntegrationScanSpillsWithoutIndex runs
// that on a server). The expected values are written out here, not taken
// from the package's own variables.
func TestScanSubmissionsFindOptions(t *testing.T) {
	d, md, sent := mockDB(t)
	md.AddResponses(emptyCursor("normal-oj.submission"))
	if err := d.ScanSubmissions(context.Background(), func(materialize.Submission) error { return nil }, func(*materialize.DecodeError) {}); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 1 || cmds[0].Index(0).Key() != "find" {
		t.Fatalf("commands %v, want one find", cmds)
	}
	find := cmds[0]
	want := []struct {
		field string
		value any
	}{
		{"find", "submission"},
		{"filter", bson.D{}},
		{"sort", bson.D{{Key: "user", Value: 1}, {Key: "problem", Value: 1}, {Key: "timestamp", Value: 1}, {Key: "_id", Value: 1}}},
		{"projection", bson.D{{Key: "_id", Value: 1}, {Key: "user", Value: 1}, {Key: "problem", Value: 1},
			{Key: "languageType", Value: 1}, {Key: "timestamp", Value: 1}, {Key: "status", Value: 1}, {Key: "score", Value: 1}}},
		{"allowDiskUse", true},
	}
	for _, w := range want {
		got, err := find.LookupErr(w.field)
		if err != nil {
			t.Errorf("find has no %s, want %v", w.field, w.value)
			continue
		}
		_, b, err := bson.MarshalValue(w.value)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Value, b) {
			t.Errorf("find %s = %s, want %v", w.field, got, w.value)
		}
	}
	for _, absent := range []string{"hint", "limit", "skip", "max", "min"} {
		if v, err := find.LookupErr(absent); err == nil {
			t.Errorf("find has %s %s, want none", absent, v)
		}
	}
}

// TestRebuildScansProjections: the rebuild's scans of users and problems
// read only the fields the derivation uses (values written out here):
// a user's three derived fields, a problem's homeworks list. Without a
// projection each reads whole documents (a problem's description and
// test case metadata, a user's profile) for nothing.
func TestRebuildScansProjections(t *testing.T) {
	d, md, sent := mockDB(t)
	scans := []struct {
		name string
		coll string
		call func() error
		want bson.D
	}{
		{"AllUsers", "user", func() error { _, _, err := d.AllUsers(context.Background()); return err },
			bson.D{{Key: "submission", Value: 1}, {Key: "AC_submission", Value: 1}, {Key: "AC_problem_ids", Value: 1}}},
		{"AllProblems", "problem", func() error { _, _, err := d.AllProblems(context.Background()); return err },
			bson.D{{Key: "homeworks", Value: 1}}},
	}
	for _, s := range scans {
		md.AddResponses(emptyCursor("normal-oj." + s.coll))
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		cmds := sent()
		if len(cmds) != 1 {
			t.Fatalf("%s: %d commands, want one find", s.name, len(cmds))
		}
		_, want, err := bson.MarshalValue(s.want)
		if err != nil {
			t.Fatal(err)
		}
		if got := cmds[0].Lookup("projection"); !bytes.Equal(got.Value, want) {
			t.Errorf("%s: projection %s, want %v", s.name, got, s.want)
		}
	}
}
