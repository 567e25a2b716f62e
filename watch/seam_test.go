package watch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/memstore"
	"github.com/normal-oj/noj-materializer/watch"
)

// stuckFeed fails every stream opened at one resume token the way a
// change stream whose next event exceeds 16 MB does: the server answers
// BSONObjectTooLarge at every reopen there (the adapter classifies it as
// ErrResumeImpossible).
type stuckFeed struct {
	st    *memstore.Store
	stuck bson.Raw
}

func (f stuckFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.st.Open(ctx, at)
	if err != nil || !bytes.Equal(at.Token, f.stuck) {
		return s, err
	}
	return tooLarge{s}, nil
}

type tooLarge struct{ watch.Stream }

func (tooLarge) Next(context.Context) (watch.Event, bool, error) {
	return watch.Event{}, false, fmt.Errorf("change stream: (BSONObjectTooLarge) BSONObj size: 17825792 is invalid: %w", watch.ErrResumeImpossible)
}

// TestResumeImpossibleRebuilds pins issue 8 item 3: an event the server
// cannot return (over 16 MB) used to end Run, and the restarted process
// reopened at the same token forever. Now the engine rebuilds, saves the
// rebuild's start and streams on from there.
func TestResumeImpossibleRebuilds(t *testing.T) {
	for _, policy := range []watch.HistoryLostPolicy{watch.OnHistoryLostRebuild, watch.OnHistoryLostExit} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			cp, _, _ := f.st.LoadCheckpoint(context.Background())
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
			eng := newEngine(f.st)
			eng.Feed = stuckFeed{f.st, cp.Token}
			eng.Config.HistoryLost = policy
			eng.Config.IdlePause = time.Millisecond
			eng.Metrics = watch.NewMetrics(nil)
			if err := runUntil(t, eng, func() bool { return f.user(t).Submission == 1 }); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if n := testutil.ToFloat64(eng.Metrics.Restarts.WithLabelValues("resume_impossible")); n != 1 {
				t.Errorf("resume_impossible restarts = %v, want 1", n)
			}
			after, _, _ := f.st.LoadCheckpoint(context.Background())
			if bytes.Equal(after.Token, cp.Token) && after.StartAt == cp.StartAt {
				t.Error("checkpoint still at the stuck token")
			}
			checkConverged(t, f.st, "after an oversized event")
		})
	}
}

// failingFeed opens no stream: a fatal (unclassified) error.
type failingFeed struct{}

func (failingFeed) Open(context.Context, watch.Position) (watch.Stream, error) {
	return nil, errors.New("open change stream: (Unauthorized) not authorized on normal-oj to execute command")
}

// TestLeaderReleasesLeaseOnFatalError pins issue 8 item 3's last clause:
// an engine that stops with a fatal error (the process then exits 1) gives
// its lease up, so a standby takes over at once, not after the TTL.
func TestLeaderReleasesLeaseOnFatalError(t *testing.T) {
	st := memstore.New()
	l := &watch.Leader{Leases: st, Owner: "a", TTL: time.Hour, Log: zerolog.Nop(),
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: st, Feed: failingFeed{}, Checkpoints: st, Log: zerolog.Nop(),
				Config: watch.Config{Epoch: epoch, Owner: "a"}}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Run(ctx); err == nil {
		t.Fatal("Run = nil, want the engine's fatal error")
	}
	lease, ok, err := st.Current(ctx)
	if err != nil || !ok {
		t.Fatalf("no lease: %v", err)
	}
	if !lease.Expires.IsZero() {
		t.Errorf("lease still held until %v after a fatal error: a standby waits the whole TTL", lease.Expires)
	}
}
