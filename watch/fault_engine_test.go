package watch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// sleeps is a fake Engine.Sleep: it records every backoff and returns at
// once; after limit sleeps it cancels the run (a test of a loop that
// should have stopped ends instead of spinning).
type sleeps struct {
	mu     sync.Mutex
	d      []time.Duration
	limit  int
	cancel context.CancelFunc
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	if s.limit > 0 && len(s.d) >= s.limit && s.cancel != nil {
		s.cancel()
	}
}

func (s *sleeps) list() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// runFor runs eng until cond holds (then cancels and returns Run's
// result), Run returns by itself, or sl's limit of sleeps cancels it. It
// fails the test after hang of real time.
func runFor(t *testing.T, eng *watch.Engine, sl *sleeps, cond func() bool) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sl.cancel = cancel
	eng.Sleep = sl.sleep
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	deadline := time.After(hang)
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("Run neither reached the condition nor returned in %s", hang)
		case <-time.After(2 * time.Millisecond):
			if cond != nil && cond() {
				cancel()
				return <-done
			}
		}
	}
}

// TestHistoryLostFailingRebuildBacksOff: after the
// history was lost, a rebuild that fails (every read fails) was retried at
// once, forever: 200 rebuilds in 5 ms and no sleep. Every retry of the
// rebuild now waits a backoff, and the backoff grows.
func TestHistoryLostFailingRebuildBacksOff(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	f.st.TruncateOplog()
	f.st.Fail = func(op string) error {
		if op == "read" {
			return memstore.ErrInjected
		}
		return nil
	}
	eng := newEngine(f.st)
	eng.Config.MinBackoff = time.Millisecond
	eng.Config.MaxBackoff = time.Second
	eng.Metrics = watch.NewMetrics(nil)
	rebuilds := func() float64 { return testutil.ToFloat64(eng.Metrics.Rebuilds.WithLabelValues("history_lost")) }
	sl := &sleeps{limit: 12}
	if err := runFor(t, eng, sl, func() bool { return rebuilds() >= 50 }); err != nil {
		t.Fatalf("Run = %v, want nil (cancelled)", err)
	}
	got := sl.list()
	n := rebuilds()
	if n < 2 {
		t.Fatalf("%v history-lost rebuilds, want the failing rebuild retried", n)
	}
	if float64(len(got)) < n-1 {
		t.Fatalf("%v rebuild attempts with %d sleeps: a failing rebuild is retried without a backoff", n, len(got))
	}
	if last := got[len(got)-1]; last < 64*time.Millisecond {
		t.Errorf("backoffs %v: the %dth retry of a failing rebuild waits %s, want the backoff to grow (>= 64ms)", got, len(got), last)
	}
}

// TestBackoffResetsAfterProgress: the backoff
// counter only grew over a run, so after some failures long ago every
// reopen waited near the cap. A saved checkpoint now resets it: the first
// failure after progress waits the first backoff again.
func TestBackoffResetsAfterProgress(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	var mu sync.Mutex
	opens, saved, nextFailed := 0, false, false
	f.st.Fail = func(op string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == "stream.open" && opens < 4:
			opens++
			return memstore.ErrInjected // the stream cannot be opened four times
		case op == "checkpoint.save":
			saved = true
		case op == "stream.next" && saved && !nextFailed:
			nextFailed = true
			return memstore.ErrInjected // then a blip, after progress
		}
		return nil
	}
	eng := newEngine(f.st)
	eng.Config.MinBackoff = 8 * time.Millisecond
	eng.Config.MaxBackoff = time.Minute
	eng.Config.IdlePause = time.Millisecond
	sl := &sleeps{}
	err := runFor(t, eng, sl, func() bool {
		mu.Lock()
		failed := nextFailed // not held across f.user: Fail runs under the store's lock
		mu.Unlock()
		return failed && len(sl.list()) >= 5 && f.user(t).Submission == 1
	})
	if err != nil {
		t.Fatal(err)
	}
	var backoffs []time.Duration
	for _, d := range sl.list() {
		if d != eng.Config.IdlePause {
			backoffs = append(backoffs, d)
		}
	}
	if len(backoffs) != 5 {
		t.Fatalf("backoffs %v, want 5 (four failed opens, one failed read)", backoffs)
	}
	if backoffs[3] < 32*time.Millisecond {
		t.Errorf("backoffs %v: the fourth consecutive failure waits %s, want the backoff to grow (>= 32ms)", backoffs, backoffs[3])
	}
	if first := backoffs[4]; first > 8*time.Millisecond {
		t.Errorf("backoffs %v: the first failure after a saved checkpoint waits %s, want the first backoff again (<= 8ms)", backoffs, first)
	}
}

// TestKeyIndexWriteRefusedIsSkipped: a key-index
// write the server refuses for good was retried forever and the
// checkpoint never moved. It is now skipped, counted and logged with the
// submission's _id; the batch's derived values land and the checkpoint
// moves. What the lost record costs: a later delete of that submission
// finds no pair (the key index is its only record), so it is unresolved
// and answered with a rebuild, which leaves the state correct.
func TestKeyIndexWriteRefusedIsSkipped(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"ErrWriteRejected", fmt.Errorf("record keys: 1 key records to materializer_submission_keys refused: model 0: code 121 (DocumentValidationFailure): %w", watch.ErrWriteRejected)},
		{"marked Refused", watch.WithClass(watch.Refused, errors.New("record keys: code 121 (DocumentValidationFailure)"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			before, _, _ := f.st.LoadCheckpoint(context.Background())
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
			f.st.Fail = func(op string) error {
				if op == "keys.record" {
					return c.err
				}
				return nil
			}
			var logs bytes.Buffer
			eng := newEngine(f.st)
			eng.Log = zerolog.New(&logs)
			eng.Config.IdlePause = time.Millisecond
			eng.Metrics = watch.NewMetrics(nil)
			sl := &sleeps{limit: 20}
			moved := func() bool {
				cp, _, _ := f.st.LoadCheckpoint(context.Background())
				return !bytes.Equal(cp.Token, before.Token) && f.user(t).Submission == 1
			}
			if err := runFor(t, eng, sl, moved); err != nil {
				t.Fatalf("Run = %v", err)
			}
			if !moved() {
				t.Fatalf("after %d retries the checkpoint has not moved: a refused key-index write is retried forever", len(sl.list()))
			}
			if e := f.entry(t); len(e.SubmissionIDs) != 1 || e.Score != 100 {
				t.Errorf("entry %+v: the batch's derived writes did not land", e)
			}
			if !strings.Contains(logs.String(), id.Hex()) {
				t.Errorf("log does not name the submission %s whose key record was skipped:\n%s", id.Hex(), logs.String())
			}
			f.st.Fail = nil
			// The submission is deleted: only its key record knew its pair.
			must(f.st.Delete(materialize.CollSubmission, id))
			m := watch.NewMetrics(nil)
			eng2 := newEngine(f.st)
			eng2.Metrics = m
			if err := eng2.Drain(context.Background()); err != nil {
				t.Fatal(err)
			}
			if testutil.ToFloat64(m.UnresolvedPairs) != 1 || testutil.ToFloat64(m.Rebuilds.WithLabelValues("unresolved")) != 1 {
				t.Errorf("unresolved %v, rebuilds %v: the delete of a submission without a key record must rebuild",
					testutil.ToFloat64(m.UnresolvedPairs), testutil.ToFloat64(m.Rebuilds.WithLabelValues("unresolved")))
			}
			checkConverged(t, f.st, "after the delete of a submission whose key record was refused")
		})
	}
}

// errNoPrivilege is a 13 Unauthorized as the adapter marks it: the
// message names the privilege.
var errNoPrivilege = errors.New(`(Unauthorized) not authorized on normal-oj to execute command { update: "user" }: grant action "update" on normal-oj.user`)

// TestUnauthorizedExits: 13 Unauthorized on a read
// or a write was retried forever (Run returned nil after 20 refused
// writes). Run now returns at once, without a retry, with an error that
// names the privilege, whatever phase met it.
func TestUnauthorizedExits(t *testing.T) {
	for _, op := range []string{"stream.open", "stream.next", "read", "keys.record", "write.user", "write.entry", "checkpoint.save", "checkpoint.load"} {
		t.Run(op, func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			id := f.submit(t, f.end.Add(-time.Hour))
			f.land(t, id, 0, 100)
			f.st.Fail = func(o string) error {
				if o == op {
					return watch.WithClass(watch.Unauthorized, errNoPrivilege)
				}
				return nil
			}
			eng := newEngine(f.st)
			eng.Config.IdlePause = time.Millisecond
			sl := &sleeps{limit: 20}
			err := runFor(t, eng, sl, nil)
			if !errors.Is(err, errNoPrivilege) {
				t.Fatalf("Run = %v after %d retries, want the Unauthorized error", err, len(sl.list()))
			}
			if !strings.Contains(err.Error(), `"update" on normal-oj.user`) {
				t.Errorf("Run = %v, want the privilege named", err)
			}
			if n := len(sl.list()); n != 0 {
				t.Errorf("%d retries of an Unauthorized error, want none", n)
			}
		})
	}
}

// overloadFeed wraps a memstore feed: the first fails Opens and Nexts
// fail as a server shedding load does (SystemOverloadedError), marked
// Overloaded by the adapter and nothing else.
type overloadFeed struct {
	*memstore.Store
	mu          sync.Mutex
	open, next  int
	errOverload error
}

func (f *overloadFeed) take(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (f *overloadFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	if f.take(&f.open) {
		return nil, f.errOverload
	}
	s, err := f.Store.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &overloadStream{Stream: s, f: f}, nil
}

type overloadStream struct {
	watch.Stream
	f *overloadFeed
}

func (s *overloadStream) Next(ctx context.Context) (watch.Event, bool, error) {
	if s.f.take(&s.f.next) {
		return watch.Event{}, false, s.f.errOverload
	}
	return s.Stream.Next(ctx)
}

// TestOverloadedBacksOff: stream errors of a
// server asking clients to back off (SystemOverloadedError /
// RetryableError labels, 211, 175) ended the process, and the restarts
// added load. They now back off and reopen, never exit.
func TestOverloadedBacksOff(t *testing.T) {
	f := newFixture(t)
	drain(t, f.st)
	id := f.submit(t, f.end.Add(-time.Hour))
	f.land(t, id, 0, 100)
	errOverload := watch.WithClass(watch.Overloaded,
		errors.New("(SystemOverloadedError) server is overloaded, labels [SystemOverloadedError RetryableError]"))
	feed := &overloadFeed{Store: f.st, open: 2, next: 3, errOverload: errOverload}
	eng := newEngine(f.st)
	eng.Feed = feed
	eng.Config.IdlePause = time.Millisecond
	eng.Config.MinBackoff = time.Millisecond
	sl := &sleeps{limit: 50}
	err := runFor(t, eng, sl, func() bool { return f.user(t).Submission == 1 })
	if err != nil {
		t.Fatalf("Run = %v, want it to back off and go on", err)
	}
	var backoffs int
	for _, d := range sl.list() {
		if d != eng.Config.IdlePause {
			backoffs++
		}
	}
	if backoffs < 5 {
		t.Errorf("%d backoffs for 5 overloaded errors", backoffs)
	}
	checkConverged(t, f.st, "after an overloaded server")
}

// closeFeed opens memstore streams whose Close records its context.
type closeFeed struct {
	*memstore.Store
	mu        sync.Mutex
	closes    int
	deadlines []time.Duration // time left at Close; -1: no deadline
}

func (f *closeFeed) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s, err := f.Store.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	return &closeStream{Stream: s, f: f}, nil
}

type closeStream struct {
	watch.Stream
	f *closeFeed
}

func (s *closeStream) Close(ctx context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.closes++
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	s.f.deadlines = append(s.f.deadlines, left)
	return nil
}

// TestStreamCloseBounded: the change stream was
// closed under context.WithoutCancel, with no deadline, so with the
// server unreachable shutdown and the lease release waited behind
// killCursors. Close now runs under a deadline: the 5 s of a killCursors
// after BatchMaxWait, the longest the getMore of a poll the stop
// interrupted keeps waiting on the server (the feed's maxAwaitTimeMS is
// the same setting). With a flat 5 s, a BatchMaxWait of 5 s or more cut
// that getMore at every stop and left its cursor on the server.
func TestStreamCloseBounded(t *testing.T) {
	for _, maxWait := range []time.Duration{200 * time.Millisecond, 6 * time.Second, time.Minute} {
		t.Run(maxWait.String(), func(t *testing.T) {
			f := newFixture(t)
			drain(t, f.st)
			feed := &closeFeed{Store: f.st}
			eng := newEngine(f.st)
			eng.Feed = feed
			eng.Config.IdlePause = time.Millisecond
			eng.Config.BatchMaxWait = maxWait
			opened := func() bool { return testutil.ToFloat64(eng.Metrics.StreamOpen) == 1 }
			eng.Metrics = watch.NewMetrics(nil)
			if err := runFor(t, eng, &sleeps{}, opened); err != nil {
				t.Fatal(err)
			}
			feed.mu.Lock()
			defer feed.mu.Unlock()
			if feed.closes != 1 {
				t.Fatalf("%d closes, want 1", feed.closes)
			}
			// Close is called right after the stop: all but the time
			// that took is left, and the getMore's wait must fit in it.
			if left := feed.deadlines[0]; left < maxWait || left > maxWait+5*time.Second {
				t.Errorf("stream closed with %v left on its context (-1: no deadline), want more than BatchMaxWait %v and at most 5s more", left, maxWait)
			}
		})
	}
}

// guardLog is a store that records, in order, each write guard call and
// each write with its size and kind.
type guardLog struct {
	*memstore.Store
	mu  sync.Mutex
	ops []string
}

func (g *guardLog) add(op string) {
	g.mu.Lock()
	g.ops = append(g.ops, op)
	g.mu.Unlock()
}

func (g *guardLog) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	g.add(fmt.Sprintf("apply users=%d entries=%d", len(w.Users), len(w.Entries)))
	return g.Store.Apply(ctx, w)
}

func (g *guardLog) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	g.add(fmt.Sprintf("keys %d", len(keys)))
	return g.Store.RecordKeys(ctx, keys)
}

// TestBatchGuardPerBulkWrite: a batch asked the
// write guard once and then wrote everything under that one deadline (a
// deadline change over a large class could outlive it). Each write call
// of a batch is now one bulk write of at most 1,000 models of one kind,
// the guard asked right before it.
func TestBatchGuardPerBulkWrite(t *testing.T) {
	st := memstore.New()
	hw := bson.ObjectID{11: 0xa1}
	ss := bson.D{}
	const n = 1500
	for i := range n {
		u := fmt.Sprintf("u%04d", i)
		must(st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
		ss = append(ss, bson.E{Key: u, Value: mtest.D("7", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))})
	}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", ss)))
	gl := &guardLog{Store: st}
	eng := &watch.Engine{Store: gl, Feed: st, Checkpoints: st, Log: zerolog.Nop(),
		Config: watch.Config{BatchSize: 10 * n, BatchMaxWait: time.Hour}}
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ts := end.Add(-time.Duration(i+1) * time.Minute)
		must(st.Insert(materialize.CollSubmission, mtest.Raw("_id", bson.NewObjectIDFromTimestamp(ts), "user", fmt.Sprintf("u%04d", i),
			"problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100))))
	}
	gl.ops = nil
	eng.WriteGuard = func(context.Context) (time.Time, error) {
		gl.add("guard")
		return time.Now().Add(time.Hour), nil
	}
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	writes := 0
	for i, op := range gl.ops {
		if op == "guard" {
			continue
		}
		writes++
		if i == 0 || gl.ops[i-1] != "guard" {
			t.Errorf("write %q (#%d) without a guard call right before it; ops: %v", op, i, gl.ops)
		}
		var users, entries, keys int
		if _, err := fmt.Sscanf(op, "apply users=%d entries=%d", &users, &entries); err == nil {
			if users > 0 && entries > 0 {
				t.Errorf("%q mixes users and entries in one write", op)
			}
			if users+entries > 1000 {
				t.Errorf("%q: more than 1,000 models in one write", op)
			}
		} else if _, err := fmt.Sscanf(op, "keys %d", &keys); err == nil && keys > 1000 {
			t.Errorf("%q: more than 1,000 key records in one write", op)
		}
	}
	if writes < 6 { // 1500 keys, 1500 users, 1500 entries: two chunks each
		t.Errorf("%d write calls for %d keys, users and entries, want at least 6; ops: %v", writes, n, gl.ops)
	}
	checkConverged(t, st, "after a batch of 1,500 judged submissions")
}
