package watch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// wantPolicy is the fault policy written out again, independently of
// watch/fault.go: one line per class, one action per phase in the order
// stream_open, stream_next, checkpoint_load, source_read, key_index_write,
// derived_write, checkpoint_save, rebuild_scan, rebuild_apply, lease,
// index_build, close, pending_check.
const wantPolicy = `
unclassified      exit    exit    retry   retry   retry   retry   retry   retry   retry   retry   exit  skip  retry
transient         reopen  reopen  retry   retry   retry   retry   retry   retry   retry   retry   exit  skip  retry
overloaded        reopen  reopen  retry   retry   retry   retry   retry   retry   retry   retry   exit  skip  retry
history_lost      rebuild rebuild exit    exit    exit    exit    exit    exit    exit    exit    exit  skip  skip
resume_impossible rebuild rebuild exit    exit    exit    exit    exit    exit    exit    exit    exit  skip  skip
refused           exit    exit    exit    exit    skip    skip    exit    exit    skip    exit    exit  skip  skip
unauthorized      exit    exit    exit    exit    exit    exit    exit    exit    exit    exit    exit  skip  skip
not_primary       exit    exit    exit    exit    exit    exit    exit    exit    exit    exit    exit  skip  skip
cancelled         stop    stop    stop    stop    stop    stop    stop    stop    stop    stop    stop  skip  stop
fatal             exit    exit    exit    exit    exit    exit    exit    exit    exit    exit    exit  skip  skip
lease_lost        stand_by stand_by stand_by stand_by stand_by stand_by stand_by stand_by stand_by stand_by stand_by skip  stand_by
`

var wantPhases = []string{"stream_open", "stream_next", "checkpoint_load", "source_read", "key_index_write",
	"derived_write", "checkpoint_save", "rebuild_scan", "rebuild_apply", "lease", "index_build", "close", "pending_check"}

// TestDecide walks every cell of the policy (class × phase) and checks
// the action against the table above; every class and phase of the code
// must have a line and a column there.
func TestDecide(t *testing.T) {
	want := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(wantPolicy), "\n") {
		f := strings.Fields(line)
		if len(f) != 1+len(wantPhases) {
			t.Fatalf("test table line %q has %d cells, want %d", line, len(f)-1, len(wantPhases))
		}
		want[f[0]] = f[1:]
	}
	if got := len(watch.Phases()); got != len(wantPhases) {
		t.Fatalf("%d phases in the code, %d in the test's table", got, len(wantPhases))
	}
	if got := len(watch.Classes()); got != len(want) {
		t.Fatalf("%d classes in the code, %d in the test's table", got, len(want))
	}
	cells := 0
	for _, c := range watch.Classes() {
		row, ok := want[c.String()]
		if !ok {
			t.Errorf("class %s has no line in the test's table", c)
			continue
		}
		for i, p := range watch.Phases() {
			if p.String() != wantPhases[i] {
				t.Fatalf("phase %d is %s, want %s", i, p, wantPhases[i])
			}
			if got := watch.Decide(c, p).String(); got != row[i] {
				t.Errorf("Decide(%s, %s) = %s, want %s", c, p, got, row[i])
			}
			cells++
		}
	}
	if cells != 11*13 {
		t.Errorf("%d cells walked, want 143", cells)
	}
}

// TestClassify: the one classification of the engine.
func TestClassify(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	errX := errors.New("x")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want watch.Class
	}{
		{"nil", live, nil, watch.Unclassified},
		{"unmarked", live, errX, watch.Unclassified},
		{"shutdown wins over any class", ended, watch.WithClass(watch.Unauthorized, errX), watch.Cancelled},
		{"shutdown, context error", ended, fmt.Errorf("read: %w", context.Canceled), watch.Cancelled},
		{"context.Canceled with a live ctx is not a shutdown", live, context.Canceled, watch.Unclassified},
		{"a Cancelled mark with a live ctx is not a shutdown", live, watch.WithClass(watch.Cancelled, context.Canceled), watch.Unclassified},
		{"a Cancelled mark with an ended ctx", ended, watch.WithClass(watch.Cancelled, context.Canceled), watch.Cancelled},
		{"fenced", live, fmt.Errorf("save checkpoint: %w", resume.ErrFenced), watch.LeaseLost},
		{"lease expiring", live, fmt.Errorf("write guard: %w", watch.ErrLeaseExpiring), watch.LeaseLost},
		{"lease before a mark", live, watch.WithClass(watch.Transient, watch.ErrLeaseExpiring), watch.LeaseLost},
		{"marked", live, fmt.Errorf("w: %w", watch.WithClass(watch.Overloaded, errX)), watch.Overloaded},
		{"outermost mark wins", live, watch.WithClass(watch.Fatal, watch.WithClass(watch.Transient, errX)), watch.Fatal},
		{"ErrTransient", live, fmt.Errorf("%w: %w", errX, watch.ErrTransient), watch.Transient},
		{"ErrHistoryLost", live, fmt.Errorf("%w: %w", errX, watch.ErrHistoryLost), watch.HistoryLost},
		{"ErrResumeImpossible", live, fmt.Errorf("%w: %w", errX, watch.ErrResumeImpossible), watch.ResumeImpossible},
		{"ErrWriteRejected", live, fmt.Errorf("apply: %w", watch.ErrWriteRejected), watch.Refused},
		{"deadline of a write, live ctx", live, fmt.Errorf("bulk write: %w", context.DeadlineExceeded), watch.Transient},
		{"marked deadline keeps its mark", live, watch.WithClass(watch.Unauthorized, context.DeadlineExceeded), watch.Unauthorized},
	} {
		if got := watch.Classify(c.ctx, c.err); got != c.want {
			t.Errorf("%s: Classify(%v) = %s, want %s", c.name, c.err, got, c.want)
		}
	}
}
