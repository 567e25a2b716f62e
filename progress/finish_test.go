package progress_test

import (
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/progress"
)

// TestFinishHasNoETA: the final report says the work is over: no time
// left, even when fewer documents were done than the total expected (an
// estimate, or a stop), where an interval report would still give one.
func TestFinishHasNoETA(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var got []progress.Status
	r := progress.New(func(s progress.Status) { got = append(got, s) }, clock, time.Second, 10_000)
	now = now.Add(2 * time.Second)
	for range 2048 { // past the reporter's check (every 1024 calls): one interval report
		r.Add(1)
	}
	now = now.Add(time.Second)
	r.Finish()
	if len(got) != 2 || got[0].Final || !got[1].Final {
		t.Fatalf("reports %+v, want one interval report and the final one", got)
	}
	if got[0].ETA <= 0 {
		t.Errorf("interval report ETA %s, want the time left of 10000 at the rate so far", got[0].ETA)
	}
	if got[1].ETA != 0 {
		t.Errorf("final report ETA %s, want 0", got[1].ETA)
	}
}
