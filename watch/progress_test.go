package watch_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestRebuildProgressLogged: the daemon's rebuild (here the one a command
// asks for; the initial and history-lost ones share the path) logs its
// progress as JSON fields at most once per ProgressEvery, and a final line
// with every document counted.
func TestRebuildProgressLogged(t *testing.T) {
	st := rebuildStore(t, 200, 10, 2, 12_000)
	var logs bytes.Buffer
	clock := time.Unix(1_800_000_000, 0)
	eng := &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.New(&logs),
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	if _, err := eng.RebuildAndCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Msg       string  `json:"message"`
		Phase     string  `json:"phase"`
		Documents int64   `json:"documents"`
		Rate      float64 `json:"docs_per_s"`
		Elapsed   float64 `json:"elapsed_s"`
	}
	var progress []line
	var final *line
	all := logs.String()
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		switch l.Msg {
		case "rebuild progress":
			progress = append(progress, l)
		case "rebuild read every document":
			final = &l
		}
	}
	// 12,212 documents, the clock read once per 1,024 counts, one second
	// apart: a report every 5 s gives two in the run.
	if len(progress) != 2 {
		t.Fatalf("%d progress lines, want 2:\n%s", len(progress), all)
	}
	for i, p := range progress {
		if p.Phase != "submissions" || p.Documents <= 0 || p.Rate <= 0 || p.Elapsed < float64(i+1)*watch.ProgressEvery.Seconds() ||
			(i > 0 && p.Documents <= progress[i-1].Documents) {
			t.Errorf("progress line %d: %+v", i, p)
		}
	}
	if final == nil || final.Documents != 12_000+200+10+2 {
		t.Fatalf("final line %+v:\n%s", final, all)
	}
}
