package watch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestConfigDefaults: zero and negative settings take the documented
// defaults; positive ones are kept.
func TestConfigDefaults(t *testing.T) {
	want := watch.Config{BatchSize: 500, BatchMaxWait: 200 * time.Millisecond, CheckpointInterval: 10 * time.Second, CheckpointEvery: time.Second,
		HistoryLost: watch.OnHistoryLostRebuild, MinBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second}
	set := watch.Config{BatchSize: 3, BatchMaxWait: time.Second, CheckpointInterval: time.Minute, CheckpointEvery: 2 * time.Second, HistoryLost: watch.OnHistoryLostExit,
		MinBackoff: time.Second, MaxBackoff: time.Hour, IdlePause: time.Millisecond, Epoch: 4, Owner: "x"}
	for _, c := range []struct {
		name     string
		in, want watch.Config
	}{
		{"zero", watch.Config{}, want},
		{"negative", watch.Config{BatchSize: -1, BatchMaxWait: -1, CheckpointInterval: -1, MinBackoff: -1, MaxBackoff: -1}, want},
		{"set", set, set},
		// Negative is a setting: a checkpoint after every batch.
		{"checkpoint after every batch", watch.Config{CheckpointEvery: -1}, func() watch.Config { w := want; w.CheckpointEvery = -1; return w }()},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := memstore.New()
			eng := &watch.Engine{Store: st, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Config: c.in}
			if err := eng.ProcessBatch(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			wantCfg := c.want
			if c.name == "negative" {
				wantCfg.IdlePause = c.in.IdlePause
			}
			if eng.Config != wantCfg {
				t.Errorf("config %+v, want %+v", eng.Config, wantCfg)
			}
		})
	}
}

// TestTransientBackoffGrows: consecutive transient errors wait
// MinBackoff·2^(n-1), capped at MaxBackoff, each with jitter over its upper
// half.
func TestTransientBackoffGrows(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	fails := 0
	f.st.Fail = func(op string) error {
		if op == "stream.open" && fails < 5 {
			fails++
			return memstore.ErrInjected
		}
		return nil
	}
	var mu sync.Mutex
	var sleeps []time.Duration
	eng := newEngine(f.st)
	eng.Config.MinBackoff = 8 * time.Millisecond
	eng.Config.MaxBackoff = 40 * time.Millisecond
	eng.Sleep = func(_ context.Context, d time.Duration) {
		mu.Lock()
		sleeps = append(sleeps, d)
		mu.Unlock()
	}
	if err := runUntil(t, eng, func() bool { return f.user(t).Submission == 1 }); err != nil {
		t.Fatal(err)
	}
	f.st.Fail = nil
	mu.Lock()
	defer mu.Unlock()
	caps := []time.Duration{8, 16, 32, 40, 40}
	if len(sleeps) != len(caps) {
		t.Fatalf("slept %v, want %d backoffs", sleeps, len(caps))
	}
	for i, c := range caps {
		d := c * time.Millisecond
		if sleeps[i] < d/2 || sleeps[i] > d {
			t.Errorf("retry %d waited %s, want in [%s, %s]", i+1, sleeps[i], d/2, d)
		}
	}
}

// TestHistoryLostStreamsOn: after the history-lost rebuild, the same Run
// goes on streaming: a submission judged afterwards is counted without a
// restart.
func TestHistoryLostStreamsOn(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	f.st.TruncateOplog()
	eng := newEngine(f.st)
	eng.Config.IdlePause = time.Millisecond
	eng.Metrics = watch.NewMetrics(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(hang); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("Run returned (%v) while waiting for %s", err, what)
			default:
			}
			if cond() {
				return
			}
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	wait("the history-lost rebuild", func() bool {
		return testutil.ToFloat64(eng.Metrics.Rebuilds.WithLabelValues("history_lost")) == 1 && f.user(t).Submission == 1
	})
	id2 := f.submit(t, f.end.Add(-30*time.Minute))
	f.land(t, id2, 0, 100)
	wait("the next submission streamed", func() bool { return f.user(t).Submission == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	checkConverged(t, f.st, "after history loss and more streaming")
}
