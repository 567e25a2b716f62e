package mongodb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/watch"
)

// Open implements watch.Feed: a change stream on the whole database with
// watch.Pipeline, which filters and projects events server-side.
//
//   - at.Token set: the stream starts after that token (startAfter, which
//     behaves as resumeAfter for an ordinary event's token or a
//     postBatchResumeToken, and unlike resumeAfter also accepts the token
//     of an invalidate event, so a checkpoint taken at a dropDatabase can
//     be reopened);
//   - else at.StartAt set: the stream starts at that cluster time,
//     inclusive (startAtOperationTime);
//   - else: the stream starts now.
//
// fullDocument stays at its default (no updateLookup): the projected
// insert/replace documents carry what Extract needs and updates carry only
// changed field names. Errors wrap watch.ErrHistoryLost or
// watch.ErrTransient as classifyStreamError decides.
func (d *DB) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	cs, err := d.db.Watch(ctx, watch.Pipeline(), streamOptions(d.cfg, at))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("open change stream: %w", err)
		}
		return nil, classifyStreamError("open change stream", err)
	}
	return &Stream{cs: cs}, nil
}

// streamOptions returns the change stream options for cfg and at.
func streamOptions(cfg Config, at watch.Position) *options.ChangeStreamOptionsBuilder {
	opts := options.ChangeStream().SetFullDocument(options.Default)
	if cfg.MaxAwait > 0 {
		opts.SetMaxAwaitTime(cfg.MaxAwait)
	}
	if cfg.ChangeStreamBatchSize > 0 {
		opts.SetBatchSize(cfg.ChangeStreamBatchSize)
	}
	switch {
	case len(at.Token) > 0:
		opts.SetStartAfter(at.Token)
	case !at.StartAt.IsZero():
		ts := at.StartAt
		opts.SetStartAtOperationTime(&ts)
	}
	return opts
}

// Stream is an open change stream (watch.Stream). It is not safe for
// concurrent use.
type Stream struct {
	cs *mongo.ChangeStream
}

// Next implements watch.Stream. It asks the server once for the next event
// (a getMore waiting up to Config.MaxAwait when the current batch is
// empty). ok is false when none arrived; ResumeToken then covers what the
// server looked at.
//
// An event watch.DecodeEvent cannot fully read is still returned with
// ok true, holding what could be read (at least its resume token), and an
// error wrapping watch.ErrBadEvent and the decode error: the caller
// reports it and moves past it. Any other error is fatal for this stream
// (the caller closes it and reopens from its checkpoint) and wraps
// watch.ErrHistoryLost or watch.ErrTransient when classifyStreamError
// says so. A stream the server closed (after an invalidate event) returns
// an error wrapping watch.ErrTransient. When ctx ends, its error is
// returned unclassified and the stream is unusable.
func (s *Stream) Next(ctx context.Context) (watch.Event, bool, error) {
	if s.cs.TryNext(ctx) {
		raw := slices.Clone(s.cs.Current)
		ev, err := watch.DecodeEvent(raw)
		if err != nil {
			if len(ev.Token) == 0 {
				ev.Token = s.ResumeToken()
			}
			return ev, true, fmt.Errorf("%w: %w", watch.ErrBadEvent, err)
		}
		return ev, true, nil
	}
	if err := s.cs.Err(); err != nil {
		if ctx.Err() != nil {
			return watch.Event{}, false, fmt.Errorf("change stream: %w", err)
		}
		return watch.Event{}, false, classifyStreamError("change stream", err)
	}
	if s.cs.ID() == 0 {
		return watch.Event{}, false, fmt.Errorf("change stream closed by the server (invalidated): %w", watch.ErrTransient)
	}
	return watch.Event{}, false, nil
}

// ResumeToken implements watch.Stream: the driver's cached resume token
// (the last event's _id, or the postBatchResumeToken of the last batch
// once it is consumed, so it advances on a quiet stream); nil before the
// server sent any.
func (s *Stream) ResumeToken() bson.Raw {
	t := s.cs.ResumeToken()
	if t == nil {
		return nil
	}
	return slices.Clone(t)
}

// Close implements watch.Stream: it kills the server cursor.
func (s *Stream) Close(ctx context.Context) error {
	if err := s.cs.Close(ctx); err != nil {
		return fmt.Errorf("close change stream: %w", err)
	}
	return nil
}

// Server error codes the classification uses.
const (
	codeChangeStreamFatalError       = 280
	codeChangeStreamHistoryLost      = 286
	codeCappedPositionLost           = 136
	codeCursorNotFound               = 43
	codeExceededTimeLimit            = 262
	codeMaxTimeMSExpired             = 50
	codeInterruptedDueToReplChange   = 11602
	codeInterruptedAtShutdown        = 11600
	codeShutdownInProgress           = 91
	codePrimarySteppedDown           = 189
	codeNotWritablePrimary           = 10107
	codeNotPrimaryNoSecondaryOk      = 13435
	codeNotPrimaryOrSecondary        = 13436
	codeHostUnreachable              = 6
	codeHostNotFound                 = 7
	codeNetworkTimeout               = 89
	codeSocketException              = 9001
	codeRetryChangeStream            = 234
	codeFailedToSatisfyReadPref      = 133
	codeStaleShardVersion            = 63
	codeStaleEpoch                   = 150
	codeStaleConfig                  = 13388
	codeNetworkInterfaceExceededTime = 202
	codeCursorKilled                 = 237
	codeInterrupted                  = 11601
	codeReadConcernMajorityNotYet    = 134
	codeBSONObjectTooLarge           = 10334
	codeInvalidResumeToken           = 260
)

// transientCodes are server errors after which reopening the stream from
// the checkpoint is expected to work: the driver's resumable change stream
// errors (resumableChangeStreamErrors, mongo/change_stream.go:42-60, which
// the driver resumes once by itself, change_stream.go:757-767), step-down
// and shutdown codes, CappedPositionLost (the oplog moved under a getMore;
// the reopen decides whether history is lost), CursorKilled and
// Interrupted (an operator's killOp or killCursors: the driver does not
// resume those on 4.4+, change_stream.go:772-791, since the server does
// not label them ResumableChangeStreamError) and
// ReadConcernMajorityNotAvailableYet (the server's RetriableError
// category, src/mongo/base/error_codes.yml).
var transientCodes = []int{
	codeHostUnreachable, codeHostNotFound, codeNetworkTimeout, codeShutdownInProgress,
	codePrimarySteppedDown, codeExceededTimeLimit, codeSocketException, codeNotWritablePrimary,
	codeInterruptedAtShutdown, codeInterruptedDueToReplChange, codeNotPrimaryNoSecondaryOk,
	codeNotPrimaryOrSecondary, codeStaleShardVersion, codeStaleEpoch, codeStaleConfig,
	codeRetryChangeStream, codeFailedToSatisfyReadPref, codeCursorNotFound, codeMaxTimeMSExpired,
	codeCappedPositionLost, codeNetworkInterfaceExceededTime,
	codeCursorKilled, codeInterrupted, codeReadConcernMajorityNotYet,
}

// resumeImpossibleCodes are server errors after which reopening at the
// same checkpoint fails the same way forever: BSONObjectTooLarge (an
// event over 16 MB at the resume point) and InvalidResumeToken (a token
// the server cannot use).
var resumeImpossibleCodes = []int{codeBSONObjectTooLarge, codeInvalidResumeToken}

// transientLabels are error labels marking an error as transient.
var transientLabels = []string{"ResumableChangeStreamError", "RetryableWriteError", "NetworkError", "TransientTransactionError"}

// historyLostMessages identify a ChangeStreamFatalError (280) that means
// the resume point left the oplog (servers before 4.2.x used 280 for it).
var historyLostMessages = []string{"no longer be in the oplog", "resume token was not found", "history"}

// classifyStreamError wraps err from opening or reading a change stream,
// prefixed with op:
//   - code 286 ChangeStreamHistoryLost, or 280 ChangeStreamFatalError whose
//     message says the resume point left the oplog: watch.ErrHistoryLost;
//   - network errors, errors labelled ResumableChangeStreamError,
//     RetryableWriteError, NetworkError or TransientTransactionError,
//     step-down, shutdown and other resumable codes, and timeouts
//     (including server selection): watch.ErrTransient;
//   - BSONObjectTooLarge (10334) or InvalidResumeToken (260):
//     watch.ErrResumeImpossible (the engine rebuilds);
//   - anything else: returned wrapped with op only.
//
// The driver already resumes once by itself on resumable errors; what
// reaches here failed that resume or was not resumable for the driver.
func classifyStreamError(op string, err error) error {
	if err == nil {
		return nil
	}
	if isHistoryLost(err) {
		return fmt.Errorf("%s: %w: %w", op, watch.ErrHistoryLost, err)
	}
	if isResumeImpossible(err) {
		return fmt.Errorf("%s: %w: %w", op, watch.ErrResumeImpossible, err)
	}
	if isTransient(err) {
		return fmt.Errorf("%s: %w: %w", op, watch.ErrTransient, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isHistoryLost(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	if se.HasErrorCode(codeChangeStreamHistoryLost) {
		return true
	}
	for _, m := range historyLostMessages {
		if se.HasErrorCodeWithMessage(codeChangeStreamFatalError, m) {
			return true
		}
	}
	return false
}

func isResumeImpossible(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range resumeImpossibleCodes {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}

func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) {
		return true
	}
	var le mongo.LabeledError
	if errors.As(err, &le) {
		for _, l := range transientLabels {
			if le.HasErrorLabel(l) {
				return true
			}
		}
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range transientCodes {
			if se.HasErrorCode(c) {
				return true
			}
		}
	}
	return false
}
