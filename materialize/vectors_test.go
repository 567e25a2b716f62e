package materialize_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// vectorsDir is testdata, or the directory named by
// MATERIALIZER_VECTORS_DIR (same file names, same format).
func vectorsDir() string {
	if d := os.Getenv("MATERIALIZER_VECTORS_DIR"); d != "" {
		return d
	}
	return "testdata"
}

func readDeriveVectors(t testing.TB) []mtest.Vector {
	t.Helper()
	path := filepath.Join(vectorsDir(), "derive.jsonl")
	vs, err := mtest.ReadVectors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return vs
}

// TestVectors runs every case of derive.jsonl: the full derivation of the
// case's documents must equal its expect section exactly, and count the
// same number of penalty errors.
func TestVectors(t *testing.T) {
	vs := readDeriveVectors(t)
	passed := 0
	for _, v := range vs {
		ok := t.Run(v.Name, func(t *testing.T) {
			res := materialize.Derive(v.DB)
			for _, d := range mtest.Diff(v, res) {
				t.Error(d)
			}
		})
		if ok {
			passed++
		}
	}
	msg := fmt.Sprintf("derive vectors: %d/%d passed", passed, len(vs))
	t.Log(msg)
	fmt.Println(msg)
}

// TestDeriveTwice is the seed's first Done case at the pure level:
// deriving, storing the result, and deriving again from the updated
// documents gives the vectors' expected values both times.
func TestDeriveTwice(t *testing.T) {
	for _, v := range readDeriveVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			first := materialize.Derive(v.DB)
			applied := mtest.Apply(t, v.DB, first)
			second := materialize.Derive(applied)
			for _, d := range mtest.Diff(v, second) {
				t.Error("after storing the first derivation:", d)
			}
			// The stored documents now match the expectation as they are.
			for _, d := range mtest.DiffStored(v, applied) {
				t.Error(d)
			}
		})
	}
}

// TestStaleState is the seed's second Done case: the vectors' documents
// carry stale derived values left by the old non-idempotent code
// (double-counted submissions, repeated submissionIds); the derivation
// ignores them and gives the expected values.
func TestStaleState(t *testing.T) {
	stale := 0
	for _, v := range readDeriveVectors(t) {
		if len(mtest.DiffStored(v, v.DB)) > 0 {
			stale++
			res := materialize.Derive(v.DB)
			if d := mtest.Diff(v, res); len(d) > 0 {
				t.Errorf("%s: %v", v.Name, d[0])
			}
		}
	}
	if stale == 0 {
		t.Fatal("no vector carries stale derived values; the test would prove nothing")
	}
	t.Logf("%d vectors start from stale derived values", stale)
}

func TestDecodeErrors(t *testing.T) {
	oid := bson.NewObjectID()
	cases := []struct {
		name  string
		coll  string
		doc   bson.Raw
		field string
	}{
		{"submission without user", "submission", mtest.Raw("_id", oid, "problem", 1, "timestamp", bson.DateTime(0)), "user"},
		{"submission user null", "submission", mtest.Raw("_id", oid, "user", nil, "problem", 1, "timestamp", bson.DateTime(0)), "user"},
		{"submission without problem", "submission", mtest.Raw("_id", oid, "user", "u", "timestamp", bson.DateTime(0)), "problem"},
		{"submission without timestamp", "submission", mtest.Raw("_id", oid, "user", "u", "problem", 1), "timestamp"},
		{"submission problem string", "submission", mtest.Raw("_id", oid, "user", "u", "problem", "1", "timestamp", bson.DateTime(0)), "problem"},
		{"submission score fractional", "submission", mtest.Raw("_id", oid, "user", "u", "problem", 1, "timestamp", bson.DateTime(0), "score", 1.5), "score"},
		{"submission status string", "submission", mtest.Raw("_id", oid, "user", "u", "problem", 1, "timestamp", bson.DateTime(0), "status", "0"), "status"},
		{"submission timestamp string", "submission", mtest.Raw("_id", oid, "user", "u", "problem", 1, "timestamp", "2020"), "timestamp"},
		{"submission id string", "submission", mtest.Raw("_id", "x", "user", "u", "problem", 1, "timestamp", bson.DateTime(0)), "_id"},
		{"homework studentStatus array", "homework", mtest.Raw("_id", oid, "studentStatus", bson.A{}), "studentStatus"},
		{"homework penalty int", "homework", mtest.Raw("_id", oid, "penalty", 3), "penalty"},
		{"homework end string", "homework", mtest.Raw("_id", oid, "duration", mtest.D("end", "x")), "duration.end"},
		{"problem homeworks string", "problem", mtest.Raw("_id", 1, "homeworks", "x"), "homeworks"},
		{"problem homework element", "problem", mtest.Raw("_id", 1, "homeworks", bson.A{oid, 3}), "homeworks.1"},
		{"problem id string", "problem", mtest.Raw("_id", "1"), "_id"},
		{"user id int", "user", mtest.Raw("_id", 1), "_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			switch c.coll {
			case "submission":
				_, err = materialize.DecodeSubmission(c.doc)
			case "homework":
				_, err = materialize.DecodeHomework(c.doc)
			case "problem":
				_, err = materialize.DecodeProblem(c.doc)
			case "user":
				_, err = materialize.DecodeUserID(c.doc)
			}
			de, ok := err.(*materialize.DecodeError)
			if !ok {
				t.Fatalf("err = %v, want *DecodeError", err)
			}
			if de.Collection != c.coll || de.Field != c.field || de.ID == "" {
				t.Fatalf("err = %+v, want collection %s field %s", de, c.coll, c.field)
			}
		})
	}
}

func TestDecodeDefaults(t *testing.T) {
	oid := bson.NewObjectID()
	raw, _ := bson.Marshal(mtest.D("_id", oid, "user", "u", "problem", int64(7), "timestamp", bson.DateTime(5), "status", nil))
	s, err := materialize.DecodeSubmission(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := materialize.Submission{ID: oid, User: "u", Problem: 7, Timestamp: 5, Status: -2, Score: -1}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	raw, _ = bson.Marshal(mtest.D("_id", oid, "penalty", nil, "studentStatus", nil))
	h, err := materialize.DecodeHomework(raw)
	if err != nil {
		t.Fatal(err)
	}
	if h.Penalty != "score = 0" || h.End != materialize.DefaultEnd || len(h.Students) != 0 {
		t.Fatalf("got %+v", h)
	}
	raw, _ = bson.Marshal(mtest.D("_id", oid, "studentStatus", mtest.D("a.b", mtest.D("1", nil), "bad", 3)))
	h, err = materialize.DecodeHomework(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !h.HasEntry("a.b", 1) || len(h.Skipped) != 1 || h.Skipped[0].Field != "studentStatus.bad" {
		t.Fatalf("got %+v", h)
	}
}
