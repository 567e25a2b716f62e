package watch

import (
	"context"
	"errors"
	"fmt"

	"github.com/normal-oj/noj-materializer/resume"
)

// Class is what kind of failure an error is. An error is classified once,
// where it is first understood (the database adapter for driver errors,
// the engine for its own), by wrapping it with WithClass; the fault policy
// then decides the response from the class and the phase alone.
type Class uint8

// Error classes.
const (
	// Unclassified: nothing marked the error.
	Unclassified Class = iota
	// Transient: a network error, a timeout, a primary step-down, a
	// retryable label: the same call succeeds later.
	Transient
	// Overloaded: the server asked the client to back off
	// (SystemOverloadedError, a killed or throttled operation).
	Overloaded
	// HistoryLost: the resume point is no longer in the oplog.
	HistoryLost
	// ResumeImpossible: the stream can never get past its checkpoint
	// although the history is there (an event over 16 MB, a refused token).
	ResumeImpossible
	// Refused: the server refused one write for good (a document past
	// 16 MB, a validator, a bad path): the same write fails every time.
	Refused
	// Unauthorized: the connected user lacks a privilege (13 Unauthorized).
	Unauthorized
	// NotPrimary: the deployment cannot take this command here (a
	// secondary reached with directConnection, a standalone, a wrong
	// topology) and no retry will find a primary.
	NotPrimary
	// Cancelled: the caller's context ended; not a failure.
	Cancelled
	// Fatal: no retry can help and the operator must act.
	Fatal
	// LeaseLost: this instance may no longer write: a checkpoint save was
	// fenced (resume.ErrFenced: another instance holds a later epoch) or
	// the lease could expire before a write completes (ErrLeaseExpiring).
	// The engine classifies these itself (Classify); no adapter marks them.
	LeaseLost
)

var classNames = [...]string{
	Unclassified: "unclassified", Transient: "transient", Overloaded: "overloaded",
	HistoryLost: "history_lost", ResumeImpossible: "resume_impossible", Refused: "refused",
	Unauthorized: "unauthorized", NotPrimary: "not_primary", Cancelled: "cancelled", Fatal: "fatal",
	LeaseLost: "lease_lost",
}

// String is the class's name as metrics and logs carry it.
func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", c)
}

// classError carries a class with the error it classifies.
type classError struct {
	class Class
	err   error
}

func (e *classError) Error() string { return e.err.Error() }
func (e *classError) Unwrap() error { return e.err }

// WithClass marks err as being of class c. The outermost mark of a chain
// wins, so a layer that knows better may reclassify. A nil err stays nil.
func WithClass(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: c, err: err}
}

// ClassOf returns the class err was marked with (the outermost mark); an
// error wrapping one of the older sentinels (ErrTransient, ErrHistoryLost,
// ErrResumeImpossible, ErrWriteRejected: Refused) has that sentinel's
// class; otherwise Unclassified.
func ClassOf(err error) Class {
	var ce *classError
	switch {
	case err == nil:
		return Unclassified
	case errors.As(err, &ce):
		return ce.class
	case errors.Is(err, ErrHistoryLost):
		return HistoryLost
	case errors.Is(err, ErrResumeImpossible):
		return ResumeImpossible
	case errors.Is(err, ErrTransient):
		return Transient
	case errors.Is(err, ErrWriteRejected):
		return Refused
	}
	return Unclassified
}

// numClasses is the number of classes (the rows of the policy table).
const numClasses = int(LeaseLost) + 1

// Classes returns every class in the policy table's row order.
func Classes() []Class {
	out := make([]Class, numClasses)
	for i := range out {
		out[i] = Class(i)
	}
	return out
}

// Phase is the step an error came from.
type Phase uint8

// Phases.
const (
	// PhaseStreamOpen: opening the change stream at the checkpoint.
	PhaseStreamOpen Phase = iota
	// PhaseStreamNext: reading the next change event.
	PhaseStreamNext
	// PhaseCheckpointLoad: reading the saved checkpoint.
	PhaseCheckpointLoad
	// PhaseSourceRead: a batch's reads of source documents and of the key
	// index.
	PhaseSourceRead
	// PhaseKeyIndexWrite: a batch's key-index records (RecordKeys).
	PhaseKeyIndexWrite
	// PhaseDerivedWrite: a batch's derived values (Writer.Apply).
	PhaseDerivedWrite
	// PhaseCheckpointSave: saving a checkpoint (fenced by the epoch).
	PhaseCheckpointSave
	// PhaseRebuildScan: a rebuild's reads (cluster time, catalog,
	// submissions).
	PhaseRebuildScan
	// PhaseRebuildApply: a rebuild's writes (derived values, key index).
	PhaseRebuildApply
	// PhaseLease: acquiring or renewing the lease.
	PhaseLease
	// PhaseIndexBuild: the start-up index builds (CREATE_INDEXES).
	PhaseIndexBuild
	// PhaseClose: closing a change stream.
	PhaseClose
	// PhasePendingCheck: the lease holder's periodic query for
	// submissions left pending (PendingCheck).
	PhasePendingCheck
)

// numPhases is the number of phases (the columns of the policy table).
const numPhases = int(PhasePendingCheck) + 1

var phaseNames = [numPhases]string{
	PhaseStreamOpen: "stream_open", PhaseStreamNext: "stream_next", PhaseCheckpointLoad: "checkpoint_load",
	PhaseSourceRead: "source_read", PhaseKeyIndexWrite: "key_index_write", PhaseDerivedWrite: "derived_write",
	PhaseCheckpointSave: "checkpoint_save", PhaseRebuildScan: "rebuild_scan", PhaseRebuildApply: "rebuild_apply",
	PhaseLease: "lease", PhaseIndexBuild: "index_build", PhaseClose: "close", PhasePendingCheck: "pending_check",
}

// String is the phase's name as metrics and logs carry it.
func (p Phase) String() string {
	if int(p) < numPhases {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", p)
}

// Phases returns every phase in the policy table's column order.
func Phases() []Phase {
	out := make([]Phase, numPhases)
	for i := range out {
		out[i] = Phase(i)
	}
	return out
}

// Action is the response the fault policy decides for an error.
type Action uint8

// Actions.
const (
	// ActRetry: back off (exponential, jitter, capped, reset by progress),
	// then run the step again from the last checkpoint: the batch is read
	// and recomputed again, a rebuild starts again. Nothing past the
	// checkpoint was saved, and every step is idempotent.
	ActRetry Action = iota + 1
	// ActReopen: back off as ActRetry does, then reopen the change stream at the
	// last checkpoint.
	ActReopen
	// ActRebuild: rebuild from the source, save a checkpoint at the rebuild's
	// start and stream on from there.
	ActRebuild
	// ActSkip: give up this one write (or close), count it in
	// materializer_fault_decisions_total, log it with its keys, and go on.
	ActSkip
	// ActExit: stop with the error (the process exits non-zero); the lease is
	// released on the way out so a standby takes over at once.
	ActExit
	// ActStandBy: stop writing and end the lease term (the lease is
	// released); the instance campaigns again as a standby. Not an exit.
	ActStandBy
	// ActStop: the caller's context ended (shutdown): return without an
	// error; an unfinished batch is abandoned, its token not saved.
	ActStop
)

var actionNames = [...]string{
	ActRetry: "retry", ActReopen: "reopen", ActRebuild: "rebuild", ActSkip: "skip", ActExit: "exit", ActStandBy: "stand_by", ActStop: "stop",
}

// String is the action's name as metrics and logs carry it.
func (a Action) String() string {
	if a > 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// policy is THE fault policy: the action for each class (row) in each
// phase (column). Nothing else decides whether an error is retried,
// skipped or ends the engine; docs/monitoring.md's table is rendered from
// it (PolicyTable) and checked by a test.
//
// Why the cells are what they are:
//   - Unclassified: the adapter marks every error it understands, so an
//     unmarked one is unknown. From a read, a write, a checkpoint or the
//     lease it is most likely a fault of the moment (a network error or a
//     fail-over the lists miss): retrying is safe (idempotent steps, no
//     checkpoint past it) and the decisions counter shows it. From the
//     change stream it is not: the adapter knows every resumable stream
//     error (the driver's list, step-down and shutdown codes), so an
//     unknown one is a configuration the stream cannot work under; the
//     engine exits, releasing the lease, and the operator sees why. At
//     start-up (index builds) every failure exits: the supervisor's
//     restart is the retry, and the operator is watching.
//   - Transient and Overloaded back off and retry in every phase; never
//     exit (an exit restarts into the same load). At start-up, exit.
//   - HistoryLost and ResumeImpossible come only from the stream: rebuild.
//     Anywhere else they are a bug of the adapter: exit.
//   - Refused: a write refused for good is skipped (retrying cannot help,
//     stalling stops every other key); a refused read, stream, checkpoint
//     or lease command is a bug or a misconfiguration: exit.
//   - Unauthorized, NotPrimary, Fatal: no retry can help: exit, naming the
//     cause (the adapter names the missing privilege).
//   - Cancelled: shutdown. LeaseLost: stand by.
//   - Close: whatever the class, a stream that cannot be closed is left to
//     the server, which kills an idle cursor after its timeout: skip.
//   - PendingCheck: a report, not a step of the derivation, which must
//     not stop for it: what a retry could fix is retried, the rest
//     skipped (both check again a minute later; the log and the
//     decisions counter show it); shutdown stops, a lost lease stands by.
var policy = func() (t [numClasses][numPhases]Action) {
	//   open, next, load, read, keyW, derW, save, scan, apply, lease, index, close, pending
	row := func(c Class, a ...Action) {
		if len(a) != numPhases {
			panic(fmt.Sprintf("watch: policy row %s has %d cells, want %d", c, len(a), numPhases))
		}
		copy(t[c][:], a)
	}
	const (
		R, O, B, S, X, L, P = ActRetry, ActReopen, ActRebuild, ActSkip, ActExit, ActStandBy, ActStop
	)
	row(Unclassified /*     */, X, X, R, R, R, R, R, R, R, R, X, S, R)
	row(Transient /*        */, O, O, R, R, R, R, R, R, R, R, X, S, R)
	row(Overloaded /*       */, O, O, R, R, R, R, R, R, R, R, X, S, R)
	row(HistoryLost /*      */, B, B, X, X, X, X, X, X, X, X, X, S, S)
	row(ResumeImpossible /* */, B, B, X, X, X, X, X, X, X, X, X, S, S)
	row(Refused /*          */, X, X, X, X, S, S, X, X, S, X, X, S, S)
	row(Unauthorized /*     */, X, X, X, X, X, X, X, X, X, X, X, S, S)
	row(NotPrimary /*       */, X, X, X, X, X, X, X, X, X, X, X, S, S)
	row(Cancelled /*        */, P, P, P, P, P, P, P, P, P, P, P, S, P)
	row(Fatal /*            */, X, X, X, X, X, X, X, X, X, X, X, S, S)
	row(LeaseLost /*        */, L, L, L, L, L, L, L, L, L, L, L, S, L)
	return t
}()

// Decide returns the fault policy's action for an error of class c in
// phase p (Config.HistoryLost "exit" turns a HistoryLost rebuild into
// Exit; see Engine). An unknown class or phase exits.
func Decide(c Class, p Phase) Action {
	if int(c) >= numClasses || int(p) >= numPhases {
		return ActExit
	}
	return policy[c][p]
}

// decide is Decide with the engine's one configurable cell: lost history
// rebuilds unless Config.HistoryLost is OnHistoryLostExit.
func decide(c Class, p Phase, onHistoryLost HistoryLostPolicy) Action {
	a := Decide(c, p)
	if a == ActRebuild && c == HistoryLost && onHistoryLost == OnHistoryLostExit {
		return ActExit
	}
	return a
}

// Classify is the one classification the engine applies to every error:
//   - the caller's context has ended: Cancelled, whatever the error says
//     (a shutdown is not a failure);
//   - resume.ErrFenced or ErrLeaseExpiring: LeaseLost;
//   - a class marked with WithClass (or a legacy sentinel): that class,
//     except Cancelled, which only ctx decides;
//   - a deadline exceeded while ctx is live (a write bounded by the lease
//     guard or the write timeout outran it): Transient;
//   - otherwise Unclassified.
func Classify(ctx context.Context, err error) Class {
	switch {
	case err == nil:
		return Unclassified
	case ctx.Err() != nil:
		return Cancelled
	case errors.Is(err, resume.ErrFenced), errors.Is(err, ErrLeaseExpiring):
		return LeaseLost
	}
	if c := ClassOf(err); c != Unclassified && c != Cancelled {
		return c
	}
	// A Cancelled mark while ctx is live is some inner context's
	// cancellation, not a shutdown: taking it for one would end Run
	// without an error. It falls through to Unclassified.
	if errors.Is(err, context.DeadlineExceeded) {
		return Transient
	}
	return Unclassified
}

// Fault is an error with the phase it came from, its class and the action
// the policy decided for it. The engine returns its errors as Faults.
type Fault struct {
	Phase  Phase
	Class  Class
	Action Action
	Err    error
}

func (f *Fault) Error() string {
	return fmt.Sprintf("%s (%s, %s): %v", f.Phase, f.Class, f.Action, f.Err)
}

func (f *Fault) Unwrap() error { return f.Err }

// decider turns errors into Faults and reports each decision once.
type decider struct {
	historyLost HistoryLostPolicy
	decided     func(*Fault) // called for every new decision (metrics); may be nil
}

// fault classifies err, met in phase p, and decides its action. An error
// that wraps a Fault already decided (a rebuild's error passed on by the
// batch that ran it) keeps that decision and is not reported again.
func (d decider) fault(ctx context.Context, p Phase, err error) *Fault {
	var f *Fault
	if errors.As(err, &f) {
		return f
	}
	c := Classify(ctx, err)
	f = &Fault{Phase: p, Class: c, Action: decide(c, p, d.historyLost), Err: err}
	if d.decided != nil {
		d.decided(f)
	}
	return f
}
