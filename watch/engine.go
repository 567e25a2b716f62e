// Package watch tails change streams and keeps derived values current:
// it groups change events into batches, coalesces their dirty keys,
// recomputes each key once from the source documents, writes only values
// that differ, and only then saves the batch's resume token. Every step is
// idempotent, so a batch replayed after a crash (at-least-once delivery)
// recomputes the same values and writes nothing new.
package watch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
	"github.com/normal-oj/noj-materializer/resume"
)

// HistoryLostPolicy says what Run does when its resume token is no longer
// in the oplog.
type HistoryLostPolicy string

// History-lost policies.
const (
	OnHistoryLostRebuild HistoryLostPolicy = "rebuild" // rebuild, then stream from the rebuild's start time
	OnHistoryLostExit    HistoryLostPolicy = "exit"    // return the error (the process exits non-zero)
)

// Config tunes the engine. Zero values take the defaults in parentheses.
type Config struct {
	BatchSize          int           // events per batch at most (500)
	BatchMaxWait       time.Duration // a batch closes this long after its first event (200ms)
	CheckpointInterval time.Duration // a quiet stream saves its postBatchResumeToken this often (10s)
	// CheckpointEvery is the least spacing between checkpoints saved after
	// batches (1s); negative: a checkpoint after every batch. A processed
	// batch whose token is not saved yet is saved once the spacing has
	// elapsed (at the next batch or quiet poll), when a batch rebuilt,
	// and on every way out of the stream (shutdown, errors).
	CheckpointEvery time.Duration
	HistoryLost     HistoryLostPolicy // (rebuild)
	MinBackoff      time.Duration     // first retry delay after a transient error (100ms)
	MaxBackoff      time.Duration     // cap of the exponential backoff (30s)
	IdlePause       time.Duration     // pause after an empty poll, for feeds whose Next does not block (0)
	Epoch           int64             // lease epoch (fencing token) every checkpoint carries; 0 without a lease
	Owner           string            // instance id recorded with checkpoints
}

func (c *Config) defaults() {
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.BatchMaxWait <= 0 {
		c.BatchMaxWait = 200 * time.Millisecond
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 10 * time.Second
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = time.Second
	}
	if c.HistoryLost == "" {
		c.HistoryLost = OnHistoryLostRebuild
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
}

// Invalidator deletes cached values derived from a pair's submissions (the
// Back-End's Redis high-score cache). Failures are the invalidator's to
// retry and count; the engine never waits on it beyond its own timeout.
type Invalidator interface {
	Invalidate(ctx context.Context, pairs []materialize.Pair)
}

// Engine runs the change-stream loop, rebuilds and batches. Fields must be
// set before Run; Store, Feed and Checkpoints are required.
type Engine struct {
	Store       Store
	Feed        Feed
	Checkpoints resume.Store
	Cache       Invalidator // optional
	Metrics     *Metrics    // optional
	Log         zerolog.Logger
	Now         func() time.Time                           // time.Now when nil
	Sleep       func(ctx context.Context, d time.Duration) // a context-aware sleep when nil
	// WriteGuard, when set, is called before every write (derived values,
	// key index, checkpoint): an error aborts the write and stops the
	// engine; a non-zero deadline bounds the write, all its bulk chunks
	// included. The Leader uses it so no write starts once the lease could
	// expire unrenewed and none outlives the lease.
	WriteGuard func(ctx context.Context) (deadline time.Time, err error)
	// Progress, when set, receives the progress of a rebuild (every
	// ProgressEvery); when nil it is logged at info level as JSON fields
	// (phase, documents, docs_per_s, elapsed_s).
	Progress progress.Sink
	Config   Config

	deriver  *materialize.Deriver
	faults   decider
	failures int // consecutive failures without progress: the backoff's exponent
	lastSave time.Time
	cp       resume.Checkpoint
	unsaved  *Event // the last event of the last processed batch, its token not saved yet
	deferred error  // a stream error met after part of a batch was read
	echoes   echoes // the last acknowledged writes of derived paths, whose echoes are skipped
	hwGuess  *homeworkGuess
}

func (e *Engine) init() {
	e.Config.defaults()
	if e.deriver == nil {
		e.deriver = materialize.NewDeriver()
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	if e.Sleep == nil {
		e.Sleep = sleepCtx
	}
	if e.Metrics == nil {
		e.Metrics = NewMetrics(nil)
	}
	e.faults = decider{historyLost: e.Config.HistoryLost, decided: e.Metrics.countDecision}
}

// fault classifies err, met in phase p, and decides its action (the one
// fault policy: Classify and Decide); every error the engine meets goes
// through it.
func (e *Engine) fault(ctx context.Context, p Phase, err error) *Fault {
	return e.faults.fault(ctx, p, err)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Run tails the change stream until ctx is cancelled (then it returns nil
// once no write is in flight: an unfinished batch is abandoned and its
// token not saved; the batches processed whole are saved, Config.
// CheckpointEvery) or the fault policy decides to exit or stand by (the
// error, a *Fault, is returned). With no checkpoint it rebuilds first and
// streams from the rebuild's start time.
//
// Every error is classified and decided once, where it is met (Classify,
// Decide: the table in fault.go); Run carries the decision out. Retry and
// reopen wait a capped exponential backoff with jitter, then start again
// from the last saved checkpoint (a rebuild that failed runs again); lost
// history rebuilds or returns according to Config.HistoryLost; a stream
// that cannot get past its checkpoint always rebuilds. The backoff grows
// with each failure and is reset by progress (a saved checkpoint, a
// finished rebuild), so Run never repeats a failed step without waiting
// and never waits long after healthy streaming.
func (e *Engine) Run(ctx context.Context) error {
	e.init()
	e.failures = 0
	rebuild := "" // the reason of a rebuild to run before streaming again
	for {
		var err error
		if rebuild != "" {
			if _, err = e.rebuildAndCheckpoint(ctx, rebuild, nil); err == nil {
				rebuild = ""
				continue
			}
		} else {
			err = e.stream(ctx, false)
		}
		if err == nil || ctx.Err() != nil {
			return nil // stream returns nil only once ctx has ended
		}
		var f *Fault
		if !errors.As(err, &f) {
			f = e.fault(ctx, PhaseStreamNext, err) // not reached: every error of stream is a Fault
		}
		switch f.Action {
		case ActStop:
			return nil
		case ActStandBy:
			e.Log.Warn().Err(f).Msg("lease lost or about to expire: writes stopped")
			return f
		case ActExit:
			if f.Class == HistoryLost {
				return fmt.Errorf("resume token no longer in the oplog (history-lost policy: exit): %w", f)
			}
			e.Log.Error().Err(f).Str("class", f.Class.String()).Str("phase", f.Phase.String()).Msg("stopping: no retry can fix this error")
			return f
		case ActRebuild:
			rebuild = f.Class.String()
			e.Metrics.Restarts.WithLabelValues(rebuild).Inc()
			e.Log.Warn().Err(f).Msg("the change stream cannot resume at the checkpoint; rebuilding and streaming from the rebuild's start time")
		default: // ActRetry, ActReopen (ActSkip is carried out where it is decided)
			if rebuild == "" {
				e.Metrics.Restarts.WithLabelValues(f.Class.String()).Inc()
			}
		}
		e.failures++
		d := backoff(e.Config.MinBackoff, e.Config.MaxBackoff, e.failures)
		if f.Action != ActRebuild {
			e.Log.Warn().Err(f).Str("class", f.Class.String()).Str("phase", f.Phase.String()).Str("action", f.Action.String()).
				Dur("retry_in", d).Int("attempt", e.failures).Msg("retrying from the last checkpoint after a backoff")
		}
		e.Sleep(ctx, d)
	}
}

// Drain processes every event available now and returns when the stream
// is quiet, saving the checkpoint. It is Run without waiting, for tests,
// the simulation and one-shot catch-up.
func (e *Engine) Drain(ctx context.Context) error {
	e.init()
	return e.stream(ctx, true)
}

// backoff returns the delay before retry n (1-based): min·2^(n-1) capped at
// max, with full jitter over its upper half so restarts of several
// instances spread out.
func backoff(minD, maxD time.Duration, n int) time.Duration {
	d := minD
	for i := 1; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// progress records that the engine moved forward (a saved checkpoint, a
// finished rebuild): the next failure waits the first backoff again.
func (e *Engine) progress() { e.failures = 0 }

// closeTimeout bounds closing a change stream (killCursors) and the save
// on the way out: with the server unreachable, shutdown and the lease
// release must not wait for the driver's own timeouts.
const closeTimeout = 5 * time.Second

// closeBound bounds Stream.Close: closeTimeout for the killCursors after
// BatchMaxWait, the longest a poll a stop interrupted keeps its getMore
// on the server (run sets the feed's maxAwaitTimeMS to it); the cursor
// can be killed only once that getMore returned, so a bound below it
// would leave the cursor at every stop.
func (e *Engine) closeBound() time.Duration { return e.Config.BatchMaxWait + closeTimeout }

// stream opens the change stream at the checkpoint and processes batches.
// Every error it returns is a *Fault.
func (e *Engine) stream(ctx context.Context, untilQuiet bool) error {
	cp, ok, err := e.Checkpoints.LoadCheckpoint(ctx)
	if err != nil {
		return e.fault(ctx, PhaseCheckpointLoad, fmt.Errorf("load checkpoint: %w", err))
	}
	if !ok || cp.Empty() {
		e.Log.Info().Msg("no checkpoint: rebuilding before streaming")
		if cp, err = e.rebuildAndCheckpoint(ctx, "initial", nil); err != nil {
			return err
		}
	}
	e.cp = cp
	e.deferred = nil // an error of a stream now closed
	// Echoes are skipped only within one stream of this engine: after a
	// reopening (an error, a lease regained) they are recomputed.
	e.echoes.reset()
	e.Metrics.EchoRecords.Set(0)
	st, err := e.Feed.Open(ctx, Position{Token: cp.Token, StartAt: cp.StartAt})
	if err != nil {
		return e.fault(ctx, PhaseStreamOpen, fmt.Errorf("open change stream: %w", err))
	}
	e.Metrics.StreamOpen.Set(1)
	defer func() {
		e.Metrics.StreamOpen.Set(0)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.closeBound())
		defer cancel()
		if err := st.Close(cctx); err != nil {
			f := e.fault(cctx, PhaseClose, fmt.Errorf("close change stream: %w", err)) // skip: the server kills an idle cursor itself
			e.Log.Warn().Err(f).Str("action", f.Action.String()).Msg("change stream not closed; the server removes its cursor after its idle timeout")
		}
	}()
	e.lastSave = e.Now()
	e.unsaved = nil
	first := true // no batch of this stream saved yet
	// On every way out (shutdown, an error of the stream, of a batch or
	// of a save), the batches processed whole are saved.
	defer e.saveOnExit(ctx)
	for {
		batch, quiet, err := e.collect(ctx, st, untilQuiet)
		if err != nil {
			return err
		}
		if len(batch) > 0 {
			rebuilt, err := e.processBatch(ctx, batch)
			if err != nil {
				return err
			}
			last := batch[len(batch)-1]
			e.unsaved = &last
			// A rebuild is never replayed for want of a save; the first
			// batch of a stream saves at once, so a save the server
			// refuses (a missing privilege, a deposed epoch fenced) is
			// met at the stream's start, not a spacing later.
			if rebuilt || first || e.Config.CheckpointEvery < 0 || e.Now().Sub(e.lastSave) >= e.Config.CheckpointEvery {
				if err := e.saveUnsaved(ctx, nil); err != nil {
					return err
				}
				first = false
			}
		}
		if quiet {
			e.Metrics.LagSeconds.Set(0) // caught up with the oplog
			if untilQuiet {
				return e.saveUnsaved(ctx, st.ResumeToken())
			}
			since := e.Now().Sub(e.lastSave)
			if (e.unsaved != nil && since >= e.Config.CheckpointEvery) || since >= e.Config.CheckpointInterval {
				// Every event read so far is processed: the
				// postBatchResumeToken covers them, and a quiet stream
				// still moves forward with it as the oplog rolls.
				if err := e.saveUnsaved(ctx, st.ResumeToken()); err != nil {
					return err
				}
			}
			if e.Config.IdlePause > 0 && len(batch) == 0 {
				e.Sleep(ctx, e.Config.IdlePause)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// saveUnsaved saves the checkpoint after the last processed batch: at
// pbrt, the quiet stream's postBatchResumeToken, when given (it covers
// every event read, all of them processed), else at the token of that
// batch's last event. With neither it saves nothing.
//
// Saving after some batches only is as safe as after each: a token is
// saved only once the writes of every batch up to it landed (each batch
// is processed whole before the next is read), and the events after the
// saved token are delivered again after a crash and recomputed from the
// source, idempotently (at-least-once). What a sparser save costs is
// replay: at most CheckpointEvery of events.
func (e *Engine) saveUnsaved(ctx context.Context, pbrt bson.Raw) error {
	if len(pbrt) > 0 {
		var ct bson.Timestamp
		if e.unsaved != nil {
			ct = e.unsaved.ClusterTime
		}
		if err := e.save(ctx, pbrt, ct, true); err != nil {
			return err
		}
		e.unsaved = nil
		return nil
	}
	if e.unsaved == nil {
		return nil
	}
	if err := e.save(ctx, e.unsaved.Token, e.unsaved.ClusterTime, false); err != nil {
		return err
	}
	e.unsaved = nil
	return nil
}

// saveOnExit saves the checkpoint after the last processed batch on the
// way out of a stream (shutdown, an error), so a restart does not replay
// what landed. It is bounded by closeTimeout (on e.Now, the clock the
// write guard's deadline is on) and runs under the write
// guard like every save, so a lease about to expire refuses it and a
// deposed epoch is fenced; a failure is decided by the fault policy
// (saveCheckpoint), logged and otherwise harmless: the events since the
// previous checkpoint are replayed.
func (e *Engine) saveOnExit(ctx context.Context) {
	if e.unsaved == nil {
		return
	}
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), e.Now().Add(closeTimeout))
	defer cancel()
	if err := e.saveUnsaved(sctx, nil); err != nil {
		e.Log.Warn().Err(err).Msg("checkpoint of the last processed batch not saved on the way out; its events are replayed from the previous checkpoint")
	}
	e.unsaved = nil
}

// collect reads events until the batch is full, its wait has elapsed, or
// the stream is quiet. quiet reports that the last poll found no event.
//
// The echoes of the daemon's own writes that pass the echo rule (echoes)
// are skipped by processBatch and cost no reads. A batch holding, besides
// those, only events that may still be echoes (onlyEchoes: updates of
// derived paths whose values did not match the records) does not close
// at a quiet poll: it waits for more events until its BatchMaxWait has
// passed (untilQuiet: never), so at a low landing rate they share the
// next landing's batch instead of costing a batch of their own. They are
// recomputed as before, at most BatchMaxWait later (a write by someone
// else to the derived fields is corrected that much later). A batch of
// skipped echoes only closes at once.
func (e *Engine) collect(ctx context.Context, st Stream, untilQuiet bool) (batch []Event, quiet bool, err error) {
	if err := e.deferred; err != nil {
		e.deferred = nil
		return nil, false, err
	}
	var deadline time.Time
	for len(batch) < e.Config.BatchSize {
		if ctx.Err() != nil {
			return nil, false, nil // abandon: nothing of this batch is written or saved
		}
		ev, ok, err := st.Next(ctx)
		if err != nil && !errors.Is(err, ErrBadEvent) {
			if ctx.Err() != nil {
				return nil, false, nil
			}
			err = e.fault(ctx, PhaseStreamNext, fmt.Errorf("read change stream: %w", err))
			if len(batch) > 0 {
				// Process what was read (its token is then saved) and
				// report the error on the next call: a stream the server
				// closes after an invalidate must not lose that event.
				e.deferred = err
				return batch, false, nil
			}
			return nil, false, err
		}
		if !ok {
			if !untilQuiet && len(batch) > 0 && e.Now().Before(deadline) && e.onlyEchoes(batch) {
				// Nothing but what may be the echoes of the daemon's own
				// writes: they would cost a batch of reads to find the
				// values equal. Wait, up to the batch's wait, for the
				// next landing to share the batch (and its reads).
				if e.Config.IdlePause > 0 {
					e.Sleep(ctx, e.Config.IdlePause)
				}
				continue
			}
			return batch, true, nil
		}
		if err != nil {
			// Never let one event stop the stream: widen it to what can
			// be recomputed safely.
			e.Metrics.BadEvents.Inc()
			e.Log.Error().Err(err).Str("collection", ev.Change.Collection).Msg("undecodable change event; recovering with a targeted recompute or a rebuild")
			if ev.Change.Op == "" {
				ev.Change.Op = materialize.OpInvalidate // unknown namespace or operation: rebuild
			}
		}
		e.Metrics.Events.WithLabelValues(ev.Change.Collection, string(ev.Change.Op)).Inc()
		batch = append(batch, ev)
		if ev.Change.Op == materialize.OpInvalidate {
			break // the server closes the stream after it
		}
		if len(batch) == 1 {
			deadline = e.Now().Add(e.Config.BatchMaxWait)
		} else if !e.Now().Before(deadline) {
			break
		}
	}
	return batch, false, nil
}

// ProcessBatch coalesces the dirty keys of events, recomputes each once,
// records new submission keys and writes the values that changed. It does
// not save the checkpoint; the caller does, after it returns nil.
func (e *Engine) ProcessBatch(ctx context.Context, events []Event) error {
	e.init()
	_, err := e.processBatch(ctx, events)
	return err
}

// processBatch is ProcessBatch; rebuilt reports that the batch ran a
// rebuild.
func (e *Engine) processBatch(ctx context.Context, events []Event) (rebuilt bool, err error) {
	start := e.Now()
	defer func() { e.Metrics.EchoRecords.Set(float64(e.echoes.len())) }()
	if len(events) > 0 {
		// The stream's events are in cluster time order: no event from
		// here on can be the echo of a write acknowledged before this one.
		e.echoes.prune(events[0].ClusterTime)
	}
	keys := materialize.NewKeys()
	skipped := 0
	for _, ev := range events {
		if e.echoes.matches(ev) {
			skipped++ // its token is saved with the batch's, as any event's
			continue
		}
		keys.Merge(materialize.Extract(ev.Change))
	}
	e.Metrics.EchoesSkipped.Add(float64(skipped))
	if keys.Empty() {
		return false, nil
	}
	// Read causally after the batch's last event: what it changed must be
	// visible to the reads that decide the values written for it.
	var last bson.Timestamp
	for _, ev := range events {
		if last.Before(ev.ClusterTime) {
			last = ev.ClusterTime
		}
	}
	out, err := recompute(WithReadAfter(ctx, last), e.Store, e.Store, e.deriver, keys, insertedInBatch(events), e.homeworkGuess())
	if err != nil {
		return false, e.fault(ctx, PhaseSourceRead, fmt.Errorf("recompute: %w", err))
	}
	e.reportMalformed(out.Malformed)
	if out.NeedRebuild {
		if out.Unresolved > 0 {
			e.Metrics.UnresolvedPairs.Add(float64(out.Unresolved))
			e.Log.Warn().Int("submissions", out.Unresolved).Msg("submission events whose (user, problem) is unknown; rebuilding")
		}
		_, err := e.rebuild(ctx, "unresolved")
		return true, err
	}
	// Each write call is one bulk write of at most guardChunk models of
	// one kind, the write guard asked right before it.
	if len(out.NewKeys) > 0 {
		_, err := recordKeysGuarded(ctx, e.Store, out.NewKeys, e.WriteGuard, func(chunk map[bson.ObjectID][]materialize.Pair, err error) error {
			f := e.fault(ctx, PhaseKeyIndexWrite, err)
			if f.Action != ActSkip {
				return f
			}
			// Refused for good: retrying cannot help and stalling
			// stops every key. The records only matter to a later
			// event of these submissions leaving these pairs (a move,
			// a replace, a delete: the key index is the only record of
			// the pair left): one of a submission with no record at all
			// rebuilds (Outcome.Unresolved); one of a submission with
			// earlier records resolves to those and may miss these.
			ids := make([]string, 0, min(len(chunk), 20))
			for id := range chunk {
				if len(ids) == cap(ids) {
					break
				}
				ids = append(ids, id.Hex())
			}
			e.Log.Error().Err(f).Int("submissions", len(chunk)).Strs("submission_ids", ids).
				Msg("key-index records refused by the server; skipped (a later move, replace or delete of these submissions may miss these pairs: rebuild)")
			return nil
		})
		if err != nil {
			return false, err
		}
	}
	if out.Writes.Len() > 0 {
		err := applyGuarded(ctx, e.Store, &out.Writes, e.WriteGuard, func(part *Writes, err error) error {
			f := e.fault(ctx, PhaseDerivedWrite, err)
			if f.Action != ActSkip {
				return f
			}
			// The server refused some writes for good (a document
			// grown past 16 MB, a validator): retrying cannot help, and
			// stopping would stall every other key. Report and go on.
			e.Metrics.WritesRejected.Inc()
			e.Log.Error().Err(f).Int("users", len(part.Users)).Int("entries", len(part.Entries)).
				Msg("derived writes refused by the server; skipped")
			return nil
		}, e.echoes.record)
		if err != nil {
			return false, err
		}
	}
	if e.Cache != nil && len(out.InvalidatePairs) > 0 {
		e.Cache.Invalidate(ctx, out.InvalidatePairs)
	}
	m := e.Metrics
	m.Batches.Inc()
	m.KeysRecomputed.WithLabelValues("user").Add(float64(out.Users))
	m.KeysRecomputed.WithLabelValues("pair").Add(float64(out.Pairs))
	m.Writes.WithLabelValues("user").Add(float64(len(out.Writes.Users)))
	m.Writes.WithLabelValues("entry").Add(float64(len(out.Writes.Entries)))
	m.WritesSkipped.WithLabelValues("user").Add(float64(out.SkippedUsers))
	m.WritesSkipped.WithLabelValues("entry").Add(float64(out.SkippedEntries))
	m.PenaltyErrors.Add(float64(out.PenaltyErrors))
	m.BatchSeconds.Observe(e.Now().Sub(start).Seconds())
	e.Log.Debug().Int("events", len(events)).Int("users", out.Users).Int("pairs", out.Pairs).
		Int("writes", out.Writes.Len()).Int("reads", out.Reads).Msg("batch processed")
	return false, nil
}

// onlyEchoes reports whether batch holds an event that may be the echo of
// a write of the daemon but was not found to be one (echoes.matches), and
// besides those only echoes that will be skipped: an update of a user's
// derived fields only, or of homework entries only (paths below
// studentStatus.<user>.). Anything else (a submission, a homework's
// configuration, an insert or replace, an update of unknown fields) makes
// the batch close as usual, and so does a batch of skipped echoes only,
// which costs no reads.
func (e *Engine) onlyEchoes(batch []Event) bool {
	unmatched := false
	for _, ev := range batch {
		if e.echoes.matches(ev) {
			continue
		}
		unmatched = true
		c := ev.Change
		if c.Op != materialize.OpUpdate || c.Fields == nil {
			return false
		}
		for _, f := range c.Fields {
			switch c.Collection {
			case materialize.CollUser:
				if f != materialize.FieldSubmission && f != materialize.FieldACSubmission && f != materialize.FieldACProblemIDs {
					return false
				}
			case materialize.CollHomework:
				rest, ok := strings.CutPrefix(f, materialize.FieldStudentStatus+".")
				if !ok || !strings.Contains(rest, ".") {
					return false
				}
			default:
				return false
			}
		}
	}
	return unmatched
}

// insertedInBatch returns the submissions whose first event in events is
// an insert carrying the pair (fullDocument's user and problem) and whose
// later events in events are updates with known changed fields, none of
// them user or problem, or replaces carrying the pair: up to the batch's
// last event, such a submission was only ever in the pairs its events
// name, so recomputing needs neither its key-index record nor its
// current document to find them (see expandSubmissions). A delete, an
// update moving it or of unknown fields, or an event that could not be
// decoded leaves it out.
func insertedInBatch(events []Event) map[bson.ObjectID]bool {
	var out map[bson.ObjectID]bool
	seen := make(map[bson.ObjectID]bool)
	for _, ev := range events {
		c := ev.Change
		if c.Collection != materialize.CollSubmission {
			continue
		}
		id := c.SubmissionID
		first := !seen[id]
		seen[id] = true
		switch {
		case first && c.Op == materialize.OpInsert && c.HasPair:
			if out == nil {
				out = make(map[bson.ObjectID]bool)
			}
			out[id] = true
		case first:
		case !out[id]:
		case c.Op == materialize.OpReplace && c.HasPair:
		case c.Op == materialize.OpUpdate && c.Fields != nil && !slices.ContainsFunc(c.Fields, materialize.MovesSubmission):
		default:
			delete(out, id)
		}
	}
	return out
}

func (e *Engine) reportMalformed(bad []*materialize.DecodeError) {
	for _, d := range bad {
		e.Metrics.Malformed.WithLabelValues(d.Collection).Inc()
		e.Log.Warn().Str("collection", d.Collection).Str("_id", d.ID).Str("field", d.Field).Str("reason", d.Reason).Msg("malformed source document skipped")
	}
}

// rebuild runs a full recompute with writes (inside a running stream; the
// stream's position is unchanged).
func (e *Engine) rebuild(ctx context.Context, reason string) (*drift.Report, error) {
	e.init()
	e.Metrics.Rebuilds.WithLabelValues(reason).Inc()
	sink := e.Progress
	if sink == nil {
		sink = e.logProgress(reason)
	}
	rep, err := Rebuild(ctx, e.Store, e.deriver, RebuildOptions{Guard: e.WriteGuard,
		Progress: progress.New(sink, e.Now, ProgressEvery, 0), Decided: e.Metrics.countDecision})
	if err != nil {
		return nil, e.fault(ctx, PhaseRebuildScan, err) // a Fault already: Rebuild decides its errors
	}
	e.progress()
	e.reportMalformed(rep.Malformed)
	e.Metrics.PenaltyErrors.Add(float64(rep.PenaltyErrors))
	e.Log.Info().Str("reason", reason).Int("submissions", rep.Submissions).Int("drifted_users", rep.DriftedUsers).
		Int("drifted_entries", rep.DriftedEntries).Int("rejected", rep.Rejected).Strs("rejected_errors", rep.RejectedErrors).Msg("rebuild finished")
	return rep, nil
}

// ProgressEvery is how often a long rebuild reports its progress.
const ProgressEvery = 5 * time.Second

// logProgress is the default progress sink of a rebuild: one info line per
// report, the figures as JSON fields.
func (e *Engine) logProgress(reason string) progress.Sink {
	return func(s progress.Status) {
		ev := e.Log.Info().Str("reason", reason).Str("phase", s.Phase).Int64("documents", s.Done).
			Float64("docs_per_s", float64(int64(s.Rate))).Float64("elapsed_s", s.Elapsed.Seconds())
		if s.Total > 0 {
			ev = ev.Int64("total", s.Total).Float64("eta_s", s.ETA.Seconds())
		}
		if s.Final {
			ev.Msg("rebuild read every document")
			return
		}
		ev.Msg("rebuild progress")
	}
}

// RebuildAndCheckpoint rebuilds and saves a checkpoint at the rebuild's
// start time, so the next stream misses nothing that happened during it.
func (e *Engine) RebuildAndCheckpoint(ctx context.Context) (*drift.Report, error) {
	e.init()
	var rep *drift.Report
	_, err := e.rebuildAndCheckpoint(ctx, "requested", &rep)
	return rep, err
}

func (e *Engine) rebuildAndCheckpoint(ctx context.Context, reason string, out **drift.Report) (resume.Checkpoint, error) {
	rep, err := e.rebuild(ctx, reason)
	if err != nil {
		return resume.Checkpoint{}, err
	}
	if out != nil {
		*out = rep
	}
	cp := resume.Checkpoint{StartAt: streamStart(rep.StartAt), ClusterTime: rep.StartAt, RebuiltAt: e.Now(), SavedAt: e.Now(),
		Epoch: e.Config.Epoch, Owner: e.Config.Owner}
	if err := e.saveCheckpoint(ctx, cp); err != nil {
		return resume.Checkpoint{}, err
	}
	return cp, nil
}

// startMargin is how far before a rebuild's snapshot time the following
// stream starts. A write whose oplog timestamp precedes the snapshot time
// but which was not yet visible to the scan (an oplog hole) is delivered by
// the stream instead; re-delivering writes the scan did see is harmless,
// since recomputation is idempotent.
const startMargin = 30 // seconds

func streamStart(t bson.Timestamp) bson.Timestamp {
	if t.T > startMargin {
		return bson.Timestamp{T: t.T - startMargin, I: 0}
	}
	return bson.Timestamp{T: 1, I: 0}
}

// save stores the checkpoint for token after the writes it covers landed:
// ct is the cluster time of the last event processed (zero: none since
// the last save), caughtUp that token is a quiet stream's
// postBatchResumeToken.
func (e *Engine) save(ctx context.Context, token bson.Raw, ct bson.Timestamp, caughtUp bool) error {
	if len(token) == 0 {
		return nil
	}
	cp := e.cp
	cp.Token = token
	cp.StartAt = bson.Timestamp{}
	cp.CaughtUpAt = time.Time{}
	if !ct.IsZero() {
		cp.ClusterTime = ct
		if !caughtUp {
			e.Metrics.LagSeconds.Set(e.Now().Sub(time.Unix(int64(ct.T), 0)).Seconds())
		}
	}
	if caughtUp {
		cp.CaughtUpAt = e.Now() // a quiet stream's postBatchResumeToken
	}
	cp.SavedAt = e.Now()
	cp.Epoch, cp.Owner = e.Config.Epoch, e.Config.Owner
	if err := e.saveCheckpoint(ctx, cp); err != nil {
		return err
	}
	e.cp = cp
	e.lastSave = cp.SavedAt
	return nil
}

// saveCheckpoint saves cp under the write guard: progress, which resets
// the backoff.
func (e *Engine) saveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	wctx, cancel, err := guardCtx(ctx, e.WriteGuard)
	if err != nil {
		return e.fault(ctx, PhaseCheckpointSave, err)
	}
	defer cancel()
	if err := e.Checkpoints.SaveCheckpoint(wctx, cp); err != nil {
		return e.fault(ctx, PhaseCheckpointSave, fmt.Errorf("save checkpoint: %w", err))
	}
	e.Metrics.Checkpoints.Inc()
	e.progress()
	return nil
}

// ErrWriteRejected is wrapped by Writer.Apply (and KeyIndex.RecordKeys)
// when the server refused some writes for a reason a retry cannot fix (the
// other writes landed): its class is Refused, which the fault policy
// skips, reports and moves past.
var ErrWriteRejected = errors.New("derived writes rejected")

// ErrLeaseExpiring is returned by a Leader's write guard when the lease
// could expire before a write completes: the engine stops, unwritten.
var ErrLeaseExpiring = errors.New("lease may expire: writes stopped")

func guardCtx(ctx context.Context, g func(context.Context) (time.Time, error)) (context.Context, context.CancelFunc, error) {
	if g == nil {
		return ctx, func() {}, nil
	}
	deadline, err := g(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("write guard: %w", err)
	}
	if deadline.IsZero() {
		return ctx, func() {}, nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	return wctx, cancel, nil
}
