package watch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// dupScan re-delivers one submission at its new (user, problem) during the
// scan, as a MongoDB index scan does when a document's indexed key moves
// forward while the cursor is open.
type dupScan struct {
	*memstore.Store
	moved bson.ObjectID
}

func (d *dupScan) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	var again *materialize.Submission
	err := d.Store.ScanSubmissions(ctx, func(s materialize.Submission) error {
		if err := fn(s); err != nil {
			return err
		}
		if s.ID == d.moved {
			// Back-End moves the submission to user "carol" right now.
			doc := d.Store.Get(materialize.CollSubmission, s.ID)
			must(d.Store.Update(materialize.CollSubmission, setFields(doc, "user", "carol"), []string{"user"}))
			n := s
			n.User = "carol"
			again = &n
		}
		return nil
	}, bad)
	if err != nil {
		return err
	}
	if again != nil {
		return fn(*again) // seen again at its new position (after "bob")
	}
	return nil
}

// TestRebuildKeepsEveryPairOfAMovedSubmission: a cursor is not isolated,
// so a submission moved to another user during the rebuild scan is seen at
// both positions; the key index must keep both pairs, or the move's event
// cannot recompute the old pair.
func TestRebuildKeepsEveryPairOfAMovedSubmission(t *testing.T) {
	st := memstore.New()
	hw := bson.NewObjectID()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, u := range []string{"alice", "bob", "carol"} {
		must(st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D("alice", mtest.D("7", start), "bob", mtest.D("7", start), "carol", mtest.D("7", start)))))
	ts := end.Add(-time.Hour)
	s1 := bson.NewObjectIDFromTimestamp(ts)
	s2 := bson.NewObjectIDFromTimestamp(ts.Add(time.Minute))
	must(st.Load(materialize.CollSubmission,
		mtest.Raw("_id", s1, "user", "alice", "problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100)),
		mtest.Raw("_id", s2, "user", "bob", "problem", int32(7), "languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(ts), "status", int32(0), "score", int32(100))))
	// The stored values are already right for the pre-move state (as Back-End's
	// old code or an earlier materializer left them): bring them there first
	// with a plain rebuild on a throwaway engine, then forget its key index.
	pre := memstore.New()
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		must(pre.Load(c, st.Collection(c)...))
	}
	if _, err := watch.Rebuild(context.Background(), pre, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	st = memstore.New()
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		must(st.Load(c, pre.Collection(c)...))
	}
	ds := &dupScan{Store: st, moved: s1}
	eng := &watch.Engine{Store: ds, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Metrics: watch.NewMetrics(nil),
		Config: watch.Config{BatchSize: 64, BatchMaxWait: time.Hour}}
	if err := eng.Drain(context.Background()); err != nil { // initial rebuild, then the stream replays the move
		t.Fatal(err)
	}
	ds.moved = bson.ObjectID{}
	if err := eng.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diffs := biDiffConverged(st); len(diffs) > 0 {
		for _, d := range diffs {
			t.Log(d)
		}
		t.Errorf("after the stream drained, stored derived values differ from Derive (%d diffs)", len(diffs))
	}
}

// TestRebuildReportCounts: a rebuild's report counts every compared and
// every drifted value (as the independent reference finds them), keeps at
// most MaxDiffs differences with their stored and derived values, and
// Drift is their sum; a dry run writes nothing, a real one exactly those.
func TestRebuildReportCounts(t *testing.T) {
	ctx := context.Background()
	w := newWorld(11)
	for i := 0; i < 60; i++ {
		w.step()
	}
	diffs := reference.Check(refDB(w.st.Docs()))
	var users, entries int
	for _, d := range diffs {
		if strings.HasPrefix(d, "user ") {
			users++
		} else {
			entries++
		}
	}
	if users == 0 || entries < 3 {
		t.Fatalf("setup: %d users and %d entries drifted, want some of each", users, entries)
	}
	for _, maxDiffs := range []int{0, 2, 1000} {
		rep, err := watch.Rebuild(ctx, w.st, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true, MaxDiffs: maxDiffs})
		if err != nil {
			t.Fatal(err)
		}
		if rep.DriftedUsers != users || rep.DriftedEntries != entries || rep.Drift() != users+entries {
			t.Errorf("MaxDiffs %d: drifted %d users, %d entries (Drift %d); the reference finds %d and %d",
				maxDiffs, rep.DriftedUsers, rep.DriftedEntries, rep.Drift(), users, entries)
		}
		if want := min(maxDiffs, users+entries); len(rep.Diffs) != want {
			t.Errorf("MaxDiffs %d: %d diffs kept, want %d", maxDiffs, len(rep.Diffs), want)
		}
		for _, d := range rep.Diffs {
			if d.Derived == "" || !strings.HasPrefix(d.Derived, "{") && !strings.HasPrefix(d.Derived, "[") {
				t.Errorf("diff %+v: derived value not rendered as Extended JSON", d)
			}
			// Stored documents read like derived ones: relaxed Extended JSON.
			if strings.HasPrefix(d.Stored, "{") && strings.Contains(d.Stored, "$numberInt") {
				t.Errorf("diff %+v: stored value in canonical, not relaxed, Extended JSON", d)
			}
		}
	}
	if s := w.st.Stats(); s.UserWrites+s.EntryWrites != 0 {
		t.Fatalf("dry runs wrote %d values", s.UserWrites+s.EntryWrites)
	}
	rep, err := watch.Rebuild(ctx, w.st, materialize.NewDeriver(), watch.RebuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := w.st.Stats(); s.UserWrites != users || s.EntryWrites != entries || rep.Drift() != users+entries {
		t.Errorf("rebuild wrote %d users and %d entries (drift %d), want %d and %d", s.UserWrites, s.EntryWrites, rep.Drift(), users, entries)
	}
	checkConverged(t, w.st, "after the rebuild")
}

// flushRecorder records the size of every Apply call.
type flushRecorder struct {
	*memstore.Store
	sizes  []int
	reject bool
}

func (f *flushRecorder) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	f.sizes = append(f.sizes, w.Len())
	if f.reject {
		return bson.Timestamp{}, fmt.Errorf("document too large: %w", watch.ErrWriteRejected)
	}
	return f.Store.Apply(ctx, w)
}

// TestRebuildFlushEvery: a rebuild buffers at most FlushEvery writes per
// Apply (10,000 when zero); writes the server refuses for good are counted
// in the report and the rebuild goes on.
func TestRebuildFlushEvery(t *testing.T) {
	ctx := context.Background()
	drifted := func() *memstore.Store {
		w := newWorld(11)
		for i := 0; i < 60; i++ {
			w.step()
		}
		return w.st
	}
	n := len(reference.Check(refDB(drifted().Docs())))
	if n < 5 {
		t.Fatalf("setup: %d drifted values", n)
	}
	// A flush applies its user writes and its entry writes as separate
	// guarded chunks (applyGuarded), so one flush is one or two Apply calls.
	for _, c := range []struct {
		flush    int
		max      int // largest Apply
		minCalls int
		maxCalls int
	}{
		{0, n, 1, 2},
		{-3, n, 1, 2},
		{2, 2, (n + 1) / 2, n},
	} {
		fr := &flushRecorder{Store: drifted()}
		if _, err := watch.Rebuild(ctx, fr, materialize.NewDeriver(), watch.RebuildOptions{FlushEvery: c.flush}); err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, sz := range fr.sizes {
			sum += sz
		}
		if sum != n || slices.Max(fr.sizes) > c.max || len(fr.sizes) < c.minCalls || len(fr.sizes) > c.maxCalls {
			t.Errorf("FlushEvery %d: Apply sizes %v, want %d writes in %d to %d calls of at most %d", c.flush, fr.sizes, n, c.minCalls, c.maxCalls, c.max)
		}
	}
	fr := &flushRecorder{Store: drifted(), reject: true}
	rep, err := watch.Rebuild(ctx, fr, materialize.NewDeriver(), watch.RebuildOptions{FlushEvery: 2})
	if err != nil {
		t.Fatalf("rebuild with refused writes: %v, want it to go on", err)
	}
	if rep.Rejected != len(fr.sizes) || rep.Rejected < 2 {
		t.Errorf("rejected %d of %d bulk writes", rep.Rejected, len(fr.sizes))
	}
}

// busyStore is a database written to while a rebuild runs:
//
//   - an oplog hole: when the rebuild reads the cluster time, a write has
//     just been given an oplog time 10s before that cluster time but is not
//     yet visible to reads, so the scan does not see it (only a stream
//     starting somewhat before the rebuild's start time delivers it);
//   - writes during the scan, after the scan passed the documents they
//     change (only a start time read before the scan covers them).
type busyStore struct {
	*memstore.Store
	hole       func() bson.ObjectID // the hole write; returns the hidden submission
	duringScan func()               // the writes during the scan
	hidden     bson.ObjectID
	readTime   int
}

func (b *busyStore) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	b.readTime++
	if b.readTime > 1 || b.hole == nil {
		return b.Store.ClusterTime(ctx)
	}
	b.hidden = b.hole()
	ct, err := b.Store.ClusterTime(ctx) // the hole write's oplog time
	if err != nil {
		return ct, err
	}
	return bson.Timestamp{T: ct.T + 10, I: 1}, nil
}

func (b *busyStore) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	first := true
	return b.Store.ScanSubmissions(ctx, func(s materialize.Submission) error {
		if s.ID == b.hidden {
			return nil // not yet visible
		}
		if err := fn(s); err != nil {
			return err
		}
		if first && b.duringScan != nil {
			first = false
			b.duringScan()
		}
		return nil
	}, bad)
}

// TestRebuildHandoffMissesNothing: the stream that follows a rebuild
// delivers every write the rebuild's scan did not see, both the writes
// made while the scan ran (the rebuild must read its start time before the
// scan) and a write in an oplog hole just before that start time (the
// stream must start a margin before it). Stored values start equal to the
// derivation of the state before the rebuild, so the rebuild writes
// nothing and no echo of its own writes recomputes the keys for it.
func TestRebuildHandoffMissesNothing(t *testing.T) {
	ctx := context.Background()
	hw := bson.ObjectID{11: 0xa1}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ts := func(h int) bson.DateTime { return bson.NewDateTimeFromTime(end.Add(-time.Duration(h) * time.Hour)) }
	sid := func(n byte) bson.ObjectID { return bson.ObjectID{0: 0x69, 11: n} }
	pre := memstore.New()
	start := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	for _, u := range []string{"alice", "bob", "carol"} {
		must(pre.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	must(pre.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	must(pre.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D("alice", mtest.D("7", start), "bob", mtest.D("7", start), "carol", mtest.D("7", start)))))
	must(pre.Load(materialize.CollSubmission,
		mtest.Raw("_id", sid(1), "user", "alice", "problem", int32(7), "timestamp", ts(9), "status", int32(1), "score", int32(60)),
		mtest.Raw("_id", sid(2), "user", "bob", "problem", int32(7), "timestamp", ts(8), "status", int32(1), "score", int32(40))))
	if _, err := watch.Rebuild(ctx, pre, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	st := memstore.New() // the converged state, no events, no key index
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		must(st.Load(c, pre.Collection(c)...))
	}
	checkConverged(t, st, "setup")

	bs := &busyStore{Store: st}
	bs.hole = func() bson.ObjectID { // carol's first submission, judged
		id := sid(3)
		must(st.Insert(materialize.CollSubmission, mtest.Raw("_id", id, "user", "carol", "problem", int32(7), "timestamp", ts(7), "status", int32(0), "score", int32(100))))
		return id
	}
	bs.duringScan = func() { // bob's submission re-judged, twice (two events)
		doc := st.Get(materialize.CollSubmission, sid(2))
		must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(2), "score", int32(0)), []string{"status", "score"}))
		doc = st.Get(materialize.CollSubmission, sid(2))
		must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(0), "score", int32(100)), []string{"status", "score"}))
	}
	eng := &watch.Engine{Store: bs, Feed: st, Checkpoints: st, Log: zerolog.Nop(), Config: watch.Config{BatchSize: 64, BatchMaxWait: time.Hour}}
	if err := eng.Drain(ctx); err != nil { // no checkpoint: rebuild, then stream from its start time
		t.Fatal(err)
	}
	if bs.readTime == 0 || bs.hidden.IsZero() {
		t.Fatal("setup: the rebuild never read the cluster time")
	}
	if s := st.Stats(); s.Saves == 0 {
		t.Fatal("no checkpoint saved")
	}
	checkConverged(t, st, "after the rebuild and the stream that follows it")
}

// TestUserFieldsAbsentMeanDefault: users from before 2020 lack the three
// derived fields and Back-End can leave AC_* absent; mongoengine reads
// them as 0, 0, []. verify (a dry-run rebuild) reports no drift for them
// when the derived values are the defaults, run writes nothing for them,
// and a user whose derived value differs from the default is still
// reported and written.
func TestUserFieldsAbsentMeanDefault(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hw := bson.NewObjectID()
	users := []bson.Raw{
		mtest.Raw("_id", "old", "username", "old"),          // before 2020, never submitted
		mtest.Raw("_id", "partial", "submission", int32(1)), // AC_* absent, one WA
		mtest.Raw("_id", "solver", "username", "solver"),    // absent, but one AC: drift
		mtest.Raw("_id", "current", "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{}),
	}
	must(st.Load(materialize.CollUser, users...))
	must(st.Load(materialize.CollProblem, mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})))
	must(st.Load(materialize.CollHomework, mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
		"studentStatus", mtest.D())))
	sub := func(user string, score int32) bson.Raw {
		return mtest.Raw("_id", bson.NewObjectID(), "user", user, "problem", int32(7), "languageType", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", map[bool]int32{true: 0, false: 1}[score == 100], "score", score)
	}
	must(st.Load(materialize.CollSubmission, sub("partial", 0), sub("solver", 100)))

	rep, err := watch.Rebuild(ctx, st, materialize.NewDeriver(), watch.RebuildOptions{DryRun: true, MaxDiffs: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Users != 4 || rep.DriftedUsers != 1 {
		t.Fatalf("verify compared %d users, %d drifted (%+v); want 4 compared and only solver drifted", rep.Users, rep.DriftedUsers, rep.Diffs)
	}
	if d := rep.Diffs[0]; d.ID != "solver" {
		t.Errorf("drifted user %s, want solver", d.ID)
	}

	// run: the first pass rebuilds (no checkpoint); then Back-End replaces
	// every user document with one lacking the fields again (as a pre-2020
	// document or an update leaving AC_* absent), and the stream recomputes
	// each user: only solver, whose derived value is not the default, is
	// written.
	if err := newEngine(st).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, doc := range users {
		must(st.Replace(materialize.CollUser, doc))
	}
	st.ResetStats()
	if err := newEngine(st).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.UserWrites != 1 {
		t.Errorf("run wrote %d user documents, want 1 (solver only)", s.UserWrites)
	}
	if raw := st.Get(materialize.CollUser, "old"); string(raw) != string(users[0]) {
		t.Errorf("run rewrote a user whose absent fields already equal the defaults: %s", raw)
	}
	checkConverged(t, st, "after run")
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

func (s *slowStore) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	if err := s.spend(ctx, w.Len()); err != nil {
		return bson.Timestamp{}, err
	}
	return s.Store.Apply(ctx, w)
}

func (s *slowStore) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	if err := s.spend(ctx, len(keys)); err != nil {
		return err
	}
	return s.Store.RecordKeys(ctx, keys)
}

// TestRebuildGuardPerChunk: the write guard's deadline
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
