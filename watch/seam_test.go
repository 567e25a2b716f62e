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

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
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

// fatalFeed opens no stream: a fatal (unclassified) error.
type fatalFeed struct{}

func (fatalFeed) Open(context.Context, watch.Position) (watch.Stream, error) {
	return nil, errors.New("open change stream: (Unauthorized) not authorized on normal-oj to execute command")
}

// TestLeaderReleasesLeaseOnFatalError pins issue 8 item 3's last clause:
// an engine that stops with a fatal error (the process then exits 1) gives
// its lease up, so a standby takes over at once, not after the TTL.
func TestLeaderReleasesLeaseOnFatalError(t *testing.T) {
	st := memstore.New()
	l := &watch.Leader{Leases: st, Owner: "a", TTL: time.Hour, Log: zerolog.Nop(),
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: st, Feed: fatalFeed{}, Checkpoints: st, Log: zerolog.Nop(),
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

// slowStore is a server that takes perModel (on a fake clock) for each
// model of a write and fails a write that would outlive its context's
// deadline, as the driver and server do with a deadline (maxTimeMS).
type slowStore struct {
	*memstore.Store
	now      time.Time
	perModel time.Duration
	largest  int // most models in one write call
}

func (s *slowStore) spend(ctx context.Context, models int) error {
	s.largest = max(s.largest, models)
	end := s.now.Add(time.Duration(models) * s.perModel)
	if dl, ok := ctx.Deadline(); ok && end.After(dl) {
		s.now = dl
		return fmt.Errorf("bulk write of %d models: %w", models, context.DeadlineExceeded)
	}
	s.now = end
	return nil
}

func (s *slowStore) Apply(ctx context.Context, w *watch.Writes) error {
	if err := s.spend(ctx, w.Len()); err != nil {
		return err
	}
	return s.Store.Apply(ctx, w)
}

func (s *slowStore) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	if err := s.spend(ctx, len(keys)); err != nil {
		return err
	}
	return s.Store.RecordKeys(ctx, keys)
}

// TestRebuildGuardPerChunk pins issue 8 item 4: the write guard's deadline
// used to cover a whole flush (3,000 derived values, 2,500 key records
// here), which a slow server cannot finish within one lease deadline, so
// the rebuild failed and restarted its scan. The guard is now asked before
// each bulk write of at most 1,000 models, each with a fresh deadline
// while the lease is renewed.
func TestRebuildGuardPerChunk(t *testing.T) {
	st := memstore.New()
	for i := range 3000 {
		must(st.Load(materialize.CollUser, mtest.Raw("_id", fmt.Sprintf("u%04d", i), "submission", int32(5), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(1), "homeworks", bson.A{})))
	for i := range 2500 {
		must(st.Load(materialize.CollSubmission, mtest.Raw("_id", bson.NewObjectID(), "user", "u0000", "problem", int32(1),
			"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(time.Unix(1_700_000_000+int64(i), 0)), "status", int32(1), "score", int32(0))))
	}
	// The fake clock runs a day ahead of the real one, so the real
	// contexts built from the guard's deadlines never expire by themselves.
	slow := &slowStore{Store: st, now: time.Now().Add(24 * time.Hour), perModel: time.Millisecond}
	guards := 0
	guard := func(context.Context) (time.Time, error) {
		guards++
		// The lease is renewed all along: each write may run until
		// 1.5 s (1,500 models) after the guard passed.
		return slow.now.Add(1500 * time.Millisecond), nil
	}
	rep, err := watch.Rebuild(context.Background(), slow, materialize.NewDeriver(), watch.RebuildOptions{Guard: guard})
	if err != nil {
		t.Fatalf("rebuild on a slow server: %v", err)
	}
	if rep.DriftedUsers != 3000 || rep.KeyIndexRecords != 2500 {
		t.Errorf("drifted users %d, key records %d; want 3000, 2500", rep.DriftedUsers, rep.KeyIndexRecords)
	}
	if slow.largest > 1000 {
		t.Errorf("one guarded write carried %d models, want at most 1000", slow.largest)
	}
	if guards < 6 {
		t.Errorf("guard asked %d times, want once per chunk (at least 6)", guards)
	}
	checkConverged(t, st, "after a rebuild on a slow server")
}

// readAfterStore records the watch.ReadAfter time of every source read.
type readAfterStore struct {
	*memstore.Store
	seen []bson.Timestamp // zero: a read without one
}

func (s *readAfterStore) note(ctx context.Context) {
	t, _ := watch.ReadAfter(ctx)
	s.seen = append(s.seen, t)
}

func (s *readAfterStore) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	s.note(ctx)
	return s.Store.Submissions(ctx, users, pairs)
}

func (s *readAfterStore) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	s.note(ctx)
	return s.Store.Users(ctx, names)
}

func (s *readAfterStore) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	s.note(ctx)
	return s.Store.Homeworks(ctx, ids, users)
}

// TestBatchReadsCausallyAfterLastEvent pins issue 8 item 7 on the engine's
// side: every read of a batch's recomputation carries the cluster time of
// the batch's last event (the adapter turns it into readConcern
// afterClusterTime), so the reads reflect what the batch's events did.
func TestBatchReadsCausallyAfterLastEvent(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	// The batch: the two events above (the engine's own writes emit more
	// afterwards, read by later batches).
	last := bson.Timestamp{}
	st, err := f.st.Open(context.Background(), watch.Position{StartAt: bson.Timestamp{T: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, ok, err := st.Next(context.Background())
		if err != nil || !ok {
			break
		}
		last = ev.ClusterTime
	}
	rs := &readAfterStore{Store: f.st}
	eng := newEngine(f.st)
	eng.Store = rs
	eng.Config.BatchSize = 100
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rs.seen) == 0 {
		t.Fatal("no source read")
	}
	if rs.seen[0] != last {
		t.Errorf("first batch read after %v, want its last event %v", rs.seen[0], last)
	}
	for i, got := range rs.seen {
		if got.IsZero() {
			t.Errorf("read %d of a batch without a cluster time to read after", i)
		}
	}
	if f.user(t).Submission != 1 {
		t.Error("batch not applied")
	}
}
