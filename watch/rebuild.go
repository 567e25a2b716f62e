package watch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
)

// RebuildOptions control a full recompute.
type RebuildOptions struct {
	// DryRun computes and counts what would change and writes nothing
	// (neither derived values nor the key index).
	DryRun bool
	// MaxDiffs is how many differences to keep in the report (verify).
	MaxDiffs int
	// FlushEvery is how many writes are buffered before one bulk Apply
	// (10,000 when zero; adapters split it into server-sized bulk writes).
	FlushEvery int
	// Guard, when set, is called before every bulk write of at most 1000
	// models (guardChunk); an error stops the rebuild, a deadline bounds
	// that one write (see Engine.WriteGuard).
	Guard func(ctx context.Context) (time.Time, error)
	// Progress counts the documents read (nil: silent); Rebuild calls its
	// Finish at the end.
	Progress *progress.Reporter
	// Decided, when set, is called with every fault the rebuild decides
	// (the engine counts them); a write the policy skips is also counted in
	// the report (Rejected, RejectedErrors).
	Decided func(*Fault)
}

// Rebuild recomputes every user and every studentStatus entry from the
// whole source, writes the values that differ (unless opts.DryRun) and
// records every submission's pair in the key index. It reads the cluster
// time before its scan and returns it in the report, so a stream started
// there misses nothing that changed during the rebuild. Submissions are
// streamed in (user, problem, timestamp, _id) order; memory holds the
// catalog (problems, homeworks with entry values, users) and one group.
func Rebuild(ctx context.Context, st RebuildStore, d *materialize.Deriver, opts RebuildOptions) (*drift.Report, error) {
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 10_000
	}
	rep := &drift.Report{}
	dec := decider{decided: opts.Decided}
	scanErr := func(err error) error { return dec.fault(ctx, PhaseRebuildScan, err) }
	var err error
	if rep.StartAt, err = st.ClusterTime(ctx); err != nil {
		return nil, scanErr(fmt.Errorf("read cluster time: %w", err))
	}
	opts.Progress.Phase("catalog")
	problems, bad, err := st.AllProblems(ctx)
	if err != nil {
		return nil, scanErr(fmt.Errorf("read problems: %w", err))
	}
	rep.Malformed = append(rep.Malformed, bad...)
	opts.Progress.Add(len(problems) + len(bad))
	hws, bad, err := st.AllHomeworks(ctx)
	if err != nil {
		return nil, scanErr(fmt.Errorf("read homeworks: %w", err))
	}
	rep.Malformed = append(rep.Malformed, bad...)
	opts.Progress.Add(len(hws) + len(bad))
	users, bad, err := st.AllUsers(ctx)
	if err != nil {
		return nil, scanErr(fmt.Errorf("read users: %w", err))
	}
	rep.Malformed = append(rep.Malformed, bad...)
	opts.Progress.Add(len(users) + len(bad))
	opts.Progress.Phase("submissions")

	cat := materialize.NewCatalog()
	stored := make(map[bson.ObjectID]*HomeworkDoc, len(hws))
	for _, p := range problems {
		cat.AddProblem(*p)
	}
	for _, h := range hws {
		cat.AddHomework(h.Homework)
		stored[h.ID] = h
		rep.Malformed = append(rep.Malformed, h.Skipped...)
	}
	// A write error is decided in PhaseRebuildApply: a refusal for good is
	// skipped and reported, anything else stops the rebuild.
	skipped := func(err error) error {
		f := dec.fault(ctx, PhaseRebuildApply, err)
		if f.Action != ActSkip {
			return f
		}
		rep.Rejected++
		if len(rep.RejectedErrors) < 10 {
			rep.RejectedErrors = append(rep.RejectedErrors, err.Error())
		}
		return nil
	}
	onKeys := func(_ map[bson.ObjectID][]materialize.Pair, err error) error { return skipped(err) }
	sink := &rebuildSink{ctx: ctx, st: st, opts: opts, rep: rep, users: users, stored: stored,
		onErr: func(_ *Writes, err error) error { return skipped(err) }}
	// The pairs' results borrow a BulkDeriver's buffers (the sink keeps a
	// Clone of what drifted); it shares d's compiled programs, and d, the
	// caller's, shared with the incremental path, keeps owning its results.
	b := materialize.NewBulkBuilder(d.Bulk(), cat, sink)

	var group []materialize.Submission
	keys := make(map[bson.ObjectID][]materialize.Pair)
	var pairBuf []materialize.Pair
	flushGroup := func() error {
		if len(group) == 0 {
			return nil
		}
		g := group[0]
		err := b.Group(g.User, g.Problem, group)
		group = group[:0]
		return err
	}
	err = st.ScanSubmissions(ctx, func(s materialize.Submission) error {
		rep.Submissions++
		opts.Progress.Add(1)
		if len(group) > 0 && (group[0].User != s.User || group[0].Problem != s.Problem) {
			if err := flushGroup(); err != nil {
				return err
			}
		}
		group = append(group, s)
		if !opts.DryRun {
			// One backing array per flush instead of one slice per
			// submission; the first ones small, doubling, so a rebuild
			// of a few submissions does not allocate and clear 2.4 MB.
			if len(pairBuf) == cap(pairBuf) {
				pairBuf = make([]materialize.Pair, 0, min(10*opts.FlushEvery, max(1024, 2*cap(pairBuf))))
			}
			p := materialize.Pair{User: s.User, Problem: s.Problem}
			if prev, seen := keys[s.ID]; seen {
				// A cursor is not isolated: a submission whose (user,
				// problem) changes during the scan is seen twice. Keep both.
				if !slices.Contains(prev, p) {
					keys[s.ID] = append(slices.Clip(prev), p)
				}
			} else {
				pairBuf = append(pairBuf, p)
				keys[s.ID] = pairBuf[len(pairBuf)-1 : len(pairBuf) : len(pairBuf)]
			}
			if len(keys) >= 10*opts.FlushEvery {
				n, err := recordKeysGuarded(ctx, st, keys, opts.Guard, onKeys)
				rep.KeyIndexRecords += n
				if err != nil {
					return err
				}
				clear(keys)
			}
		}
		return nil
	}, func(e *materialize.DecodeError) { rep.Malformed = append(rep.Malformed, e) })
	if err != nil {
		return nil, scanErr(fmt.Errorf("scan submissions: %w", err))
	}
	if err := flushGroup(); err != nil {
		return nil, scanErr(err)
	}
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	if err := b.Finish(names); err != nil {
		return nil, scanErr(err)
	}
	if err := sink.flush(); err != nil {
		return nil, scanErr(err)
	}
	if !opts.DryRun && len(keys) > 0 {
		n, err := recordKeysGuarded(ctx, st, keys, opts.Guard, onKeys)
		rep.KeyIndexRecords += n
		if err != nil {
			return nil, scanErr(err)
		}
	}
	rep.PenaltyErrors = b.PenaltyErrors
	opts.Progress.Finish()
	return rep, nil
}

// rebuildSink compares each derived value with the stored one and buffers
// the differing ones into bulk writes.
type rebuildSink struct {
	ctx    context.Context
	st     RebuildStore
	opts   RebuildOptions
	rep    *drift.Report
	onErr  func(*Writes, error) error
	users  map[string]StoredUser
	stored map[bson.ObjectID]*HomeworkDoc
	w      Writes
}

func (s *rebuildSink) User(name string, st materialize.UserStats) error {
	su, ok := s.users[name]
	if !ok {
		return nil // no user document: never create one
	}
	s.rep.Users++
	if su.OK && su.Stats.Equal(st) {
		return nil
	}
	s.rep.DriftedUsers++
	if len(s.rep.Diffs) < s.opts.MaxDiffs {
		s.rep.Diffs = append(s.rep.Diffs, drift.UserDiff(name, su.Stats, su.OK, st))
	}
	s.w.Users = append(s.w.Users, UserWrite{User: name, Stats: st})
	return s.maybeFlush()
}

func (s *rebuildSink) Entry(h bson.ObjectID, user, pk string, e materialize.Entry) error {
	s.rep.Entries++
	doc := s.stored[h]
	v, ok := doc.Stored[user][pk]
	if ok && e.MatchesStored(v) {
		return nil
	}
	s.rep.DriftedEntries++
	if len(s.rep.Diffs) < s.opts.MaxDiffs {
		s.rep.Diffs = append(s.rep.Diffs, drift.EntryDiff(h, user, pk, v, ok, e))
	}
	// e is the BulkDeriver's until the next pair.
	s.w.Entries = append(s.w.Entries, EntryWrite{Homework: h, User: user, ProblemKey: pk, Entry: e.Clone()})
	return s.maybeFlush()
}

func (s *rebuildSink) maybeFlush() error {
	if s.w.Len() >= s.opts.FlushEvery {
		return s.flush()
	}
	return nil
}

func (s *rebuildSink) flush() error {
	if s.w.Len() == 0 {
		return nil
	}
	if !s.opts.DryRun {
		// A rebuild's writes are not recorded as the engine's echoes
		// (echoes): their change events are recomputed, at a cost only.
		if err := applyGuarded(s.ctx, s.st, &s.w, s.opts.Guard, s.onErr, nil); err != nil {
			return err
		}
	}
	s.w = Writes{}
	return nil
}
