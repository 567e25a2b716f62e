package main

import (
	"testing"

	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestVerifyDumpUserFieldsAbsent: a clean dump plus a user document from
// before 2020 (no submission, AC_submission, AC_problem_ids) and one whose
// AC_* fields Back-End left absent, neither with a judged submission:
// mongoengine reads them as 0, 0, [], so verify --dump finds no drift.
func TestVerifyDumpUserFieldsAbsent(t *testing.T) {
	cleanConfigEnv(t)
	docs := applyExpected(t, readVectors(t)[0])
	docs.Users = append(docs.Users,
		mtest.Raw("_id", "pre2020", "username", "pre2020", "email", "pre2020@example.com"),
		mtest.Raw("_id", "acabsent", "username", "acabsent", "submission", int32(0)))
	dir := t.TempDir()
	writeDump(t, dir, docs, nil)
	r := runCLI(t, "verify", "--dump", dir)
	if r.code != exitOK {
		t.Fatalf("verify --dump reported drift for users whose absent fields equal the defaults\n%v", r)
	}
}
