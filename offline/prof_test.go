package offline

import (
	"context"
	"os"
	"testing"

	"github.com/normal-oj/noj-materializer/dump"
)

// TestProfileDump runs Run on the dump named by OFFLINE_PROFILE_DUMP
// (skipped without it), for go test -cpuprofile / -memprofile.
func TestProfileDump(t *testing.T) {
	dir := os.Getenv("OFFLINE_PROFILE_DUMP")
	if dir == "" {
		t.Skip("OFFLINE_PROFILE_DUMP not set")
	}
	d, err := dump.Resolve(dir, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("OFFLINE_PROFILE_OUT")
	rep, err := Run(context.Background(), d, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d submissions, %d entries, %d drifted", rep.Submissions, rep.Entries, rep.DriftedEntries)
}
