package offline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/progress"
)

// TestRunCancelledAfterTheLastByte: a cancel that arrives once every
// byte of the corrected copy is written, before it is moved into place,
// still stops the run: it returns the cancel and the output directory is
// not created (the command then exits as interrupted, saying the partial
// output was removed). The cancel comes from the progress report of the
// last file copied (a collection the derivation does not read, sorted
// last, large enough to be reported), after which nothing else checks
// the context.
func TestRunCancelledAfterTheLastByte(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in")
	pad := strings.Repeat("x", 1024)
	var filler []bson.Raw
	for i := range 1500 { // 1.5 MiB: past the reporter's byte check
		filler = append(filler, mtest.Raw("_id", int32(i), "pad", pad))
	}
	if err := dump.Write(in, map[string][]bson.Raw{
		materialize.CollUser:       {mtest.Raw("_id", "al", "submission", int32(3), "AC_submission", int32(0), "AC_problem_ids", bson.A{})},
		materialize.CollProblem:    nil,
		materialize.CollHomework:   nil,
		materialize.CollSubmission: nil,
		"zzz_filler":               filler,
	}); err != nil {
		t.Fatal(err)
	}
	// The filler's metadata would be copied after it (and that copy
	// would see the cancel): a dump may lack it.
	if err := os.Remove(filepath.Join(in, "zzz_filler.metadata.json")); err != nil {
		t.Fatal(err)
	}
	d, err := dump.Resolve(in, "normal-oj")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { // every check is an interval later: each reports
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Hour)
		return clock
	}
	cancelled := false
	sink := func(s progress.Status) {
		if s.Phase == "writing" && s.PhaseTotal > 0 && s.PhaseDone >= s.PhaseTotal {
			cancelled = true
			cancel()
		}
	}
	out := filepath.Join(root, "out")
	_, err = Run(ctx, d, Options{Out: out, Progress: progress.New(sink, now, time.Second, 0)})
	if !cancelled {
		t.Fatal("no progress report of the last byte written: the cancel never came")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want the cancel", err)
	}
	if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("output %s exists after a cancelled run (stat: %v)", out, serr)
	}
}
