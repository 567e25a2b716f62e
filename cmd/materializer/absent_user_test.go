package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestVerifyDumpUserFieldsAbsent: a clean dump plus a user document from
// before 2020 (no submission, AC_submission, AC_problem_ids) and one whose
// AC_* fields Back-End left absent, neither with a judged submission:
// mongoengine reads them as 0, 0, [], so verify --dump finds no drift and
// rebuild --dump --out copies both documents unchanged.
func TestVerifyDumpUserFieldsAbsent(t *testing.T) {
	cleanConfigEnv(t)
	docs := applyExpected(t, readVectors(t)[0])
	absent := []bson.Raw{
		mtest.Raw("_id", "pre2020", "username", "pre2020", "email", "pre2020@example.com"),
		mtest.Raw("_id", "acabsent", "username", "acabsent", "submission", int32(0)),
	}
	docs.Users = append(docs.Users, absent...)
	dir := t.TempDir()
	writeDump(t, dir, docs, nil)
	r := runCLI(t, "verify", "--dump", dir)
	if r.code != exitOK {
		t.Fatalf("verify --dump reported drift for users whose absent fields equal the defaults\n%v", r)
	}
	out := filepath.Join(t.TempDir(), "fixed")
	if r := runCLI(t, "rebuild", "--dump", dir, "--out", out); r.code != exitOK {
		t.Fatalf("rebuild --dump: want exit 0\n%v", r)
	}
	d, err := dump.Resolve(out, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	users, err := d.Read("user")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range absent {
		found := false
		for _, u := range users {
			if bytes.Equal(u, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("rebuild --dump rewrote %s", want)
		}
	}
}
