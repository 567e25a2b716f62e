package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/normal-oj/noj-materializer/watch"
)

// Server error codes the classification uses (names from the server's
// src/mongo/base/error_codes.yml).
const (
	codeHostUnreachable               = 6
	codeHostNotFound                  = 7
	codeUnauthorized                  = 13
	codeAuthenticationFailed          = 18
	codeNamespaceNotFound             = 26
	codeCursorNotFound                = 43
	codeMaxTimeMSExpired              = 50
	codeCommandNotFound               = 59
	codeStaleShardVersion             = 63
	codeIndexOptionsConflict          = 85
	codeIndexKeySpecsConflict         = 86
	codeNetworkTimeout                = 89
	codeShutdownInProgress            = 91
	codeFailedToSatisfyReadPref       = 133
	codeReadConcernMajorityNotYet     = 134
	codeCappedPositionLost            = 136
	codeReadConcernMajorityNotEnabled = 148
	codeStaleEpoch                    = 150
	codeQueryPlanKilled               = 175
	codePrimarySteppedDown            = 189
	codeNetworkInterfaceExceededTime  = 202
	codeKeyNotFound                   = 211
	codeRetryChangeStream             = 234
	codeCursorKilled                  = 237
	codeInvalidResumeToken            = 260
	codeExceededTimeLimit             = 262
	codeChangeStreamFatalError        = 280
	codeChangeStreamHistoryLost       = 286
	codeSocketException               = 9001
	codeNotWritablePrimary            = 10107
	codeBSONObjectTooLarge            = 10334
	codeInterruptedAtShutdown         = 11600
	codeInterrupted                   = 11601
	codeInterruptedDueToReplChange    = 11602
	codeStaleConfig                   = 13388
	codeNotPrimaryNoSecondaryOk       = 13435
	codeNotPrimaryOrSecondary         = 13436
)

// Error labels the classification reads. The driver adds
// SystemOverloadedError and RetryableError to a server's overload
// responses and to connection-establishment failures under load
// (x/mongo/driver/errors.go:78-81, x/mongo/driver/topology/connection.go:95);
// the server labels ResumableChangeStreamError itself (4.4+).
const (
	labelSystemOverloaded = "SystemOverloadedError"
	labelRetryable        = "RetryableError"
)

// transientLabels mark an error that the same call survives later.
var transientLabels = []string{"ResumableChangeStreamError", "RetryableWriteError", "NetworkError", "TransientTransactionError", labelRetryable}

// transientCodes are server errors after which the same call (or a
// reopened stream) is expected to work:
//   - the change-streams specification's resumable codes for servers
//     before 4.4 (the driver's resumableChangeStreamErrors,
//     mongo/change_stream.go:42-60) and CursorNotFound, which it always
//     resumes (change_stream.go:779): step-down, shutdown, network, stale
//     routing codes;
//   - CappedPositionLost (the oplog moved under a getMore; the reopen
//     decides whether history is lost), ReadConcernMajorityNotAvailableYet
//     and MaxTimeMSExpired (the server's RetriableError category);
//   - KeyNotFound (211: no key yet to sign or check a $clusterTime, as
//     after a restore or a key rotation) and QueryPlanKilled (175: the
//     plan's index or collection was dropped under a read): the next
//     attempt plans, or signs, again.
var transientCodes = []int{
	codeHostUnreachable, codeHostNotFound, codeNetworkTimeout, codeShutdownInProgress,
	codePrimarySteppedDown, codeExceededTimeLimit, codeSocketException, codeNotWritablePrimary,
	codeInterruptedAtShutdown, codeInterruptedDueToReplChange, codeNotPrimaryNoSecondaryOk,
	codeNotPrimaryOrSecondary, codeStaleShardVersion, codeStaleEpoch, codeStaleConfig,
	codeRetryChangeStream, codeFailedToSatisfyReadPref, codeCursorNotFound, codeMaxTimeMSExpired,
	codeCappedPositionLost, codeNetworkInterfaceExceededTime, codeReadConcernMajorityNotYet,
	codeKeyNotFound, codeQueryPlanKilled,
}

// overloadedCodes are an operator's or the server's answer to load:
// CursorKilled (killCursors) and Interrupted (killOp). The driver does not
// resume those (the server does not label them ResumableChangeStreamError,
// change_stream.go:772-791); retrying at once would repeat what was killed.
var overloadedCodes = []int{codeCursorKilled, codeInterrupted}

// resumeImpossibleCodes are command errors after which reopening at the
// same checkpoint fails the same way forever: BSONObjectTooLarge (an
// event over 16 MB at the resume point) and InvalidResumeToken (a token
// the server cannot use).
var resumeImpossibleCodes = []int{codeBSONObjectTooLarge, codeInvalidResumeToken}

// fatalCodes are command errors no retry can help: the command does not
// exist, majority reads are off, or the deployment is not what it must be.
var fatalCodes = []int{codeCommandNotFound, codeReadConcernMajorityNotEnabled}

// historyLostMessages identify a ChangeStreamFatalError (280) that means
// the resume point left the oplog (servers before 4.2.x used 280 for it).
var historyLostMessages = []string{"no longer be in the oplog", "resume token was not found", "history"}

// classify returns the class of an error of the driver (or of the
// adapter's own code around it). It is where the adapter decides what
// kind of failure an error is (with nextFail, for the one 260 that only
// the stream's state tells apart); every method marks what it returns
// with it (see fail). In order:
//
//   - context.Canceled: Cancelled (the caller stopped; checked first since
//     the driver labels a read interrupted by a cancel NetworkError);
//   - watch.ErrWriteRejected, or a WriteException/BulkWriteException whose
//     write errors are all permanentWriteCodes with no write concern error
//     and no label: Refused;
//   - 13 Unauthorized, 18 AuthenticationFailed: Unauthorized;
//   - 286 ChangeStreamHistoryLost, 280 saying the resume point left the
//     oplog: HistoryLost;
//   - SystemOverloadedError label, CursorKilled, Interrupted: Overloaded;
//   - a network error, a timeout (context deadline, server selection,
//     maxTimeMS), a transient label (RetryableError included) or code, a
//     write concern error, any other write error: Transient;
//   - BSONObjectTooLarge and InvalidResumeToken as command errors:
//     ResumeImpossible (but see nextFail);
//   - CommandNotFound, ReadConcernMajorityNotEnabled, any other
//     ChangeStreamFatalError, mongo.ErrClientDisconnected: Fatal;
//   - anything else: Unclassified (the fault policy decides).
func classify(err error) watch.Class {
	switch {
	case err == nil:
		return watch.Unclassified
	case watch.ClassOf(err) != watch.Unclassified:
		return watch.ClassOf(err) // classified already (by this function, or a fake's sentinel)
	case errors.Is(err, context.Canceled):
		return watch.Cancelled
	case errors.Is(err, watch.ErrWriteRejected):
		return watch.Refused
	}
	if _, ok := refusedWrites(err); ok {
		return watch.Refused
	}
	var se mongo.ServerError
	isServer := errors.As(err, &se)
	var le mongo.LabeledError
	labeled := errors.As(err, &le)
	switch {
	case isServer && (se.HasErrorCode(codeUnauthorized) || se.HasErrorCode(codeAuthenticationFailed)):
		return watch.Unauthorized
	case isHistoryLost(se):
		return watch.HistoryLost
	case labeled && le.HasErrorLabel(labelSystemOverloaded), isServer && hasAnyCode(se, overloadedCodes):
		return watch.Overloaded
	case mongo.IsNetworkError(err), mongo.IsTimeout(err), labeled && hasAnyLabel(le, transientLabels),
		isServer && hasAnyCode(se, transientCodes):
		return watch.Transient
	}
	if isWriteException(err) {
		// A write concern error (the writes may not be durable yet) or a
		// per-write code that is not known to be permanent: retry.
		return watch.Transient
	}
	switch {
	case isServer && hasAnyCode(se, resumeImpossibleCodes):
		return watch.ResumeImpossible
	case isServer && (hasAnyCode(se, fatalCodes) || se.HasErrorCode(codeChangeStreamFatalError)),
		errors.Is(err, mongo.ErrClientDisconnected):
		return watch.Fatal
	}
	return watch.Unclassified
}

// nextFail marks err of Stream.Next as streamFail does, but for a refusal
// classify cannot tell apart: resumedAtStart reports that the stream was
// opened with startAfter and the driver's resume token is still the one
// it was opened at. The driver then resumes with resumeAfter and that
// token (mongo/change_stream.go:528-535) where the change streams
// specification asks for startAfter, and from an invalidate event's token
// the server refuses resumeAfter with InvalidResumeToken (260). That
// refusal is the driver's, not the checkpoint's: Transient, and the
// reopening at the checkpoint, with startAfter, succeeds. Past that token
// the driver's resumeAfter is the specification's too, and a 260 is
// classify's ResumeImpossible.
func nextFail(ctx context.Context, db string, err error, resumedAtStart bool) error {
	if ctx.Err() == nil && resumedAtStart && isInvalidResumeToken(err) {
		return legacySentinel(watch.WithClass(watch.Transient, fmt.Errorf(
			"change stream: the driver resumed a stream opened with startAfter using resumeAfter, which the server refuses from an invalidate event's token; reopen with startAfter: %w", err)))
	}
	return streamFail(ctx, db, "change stream", err)
}

// isInvalidResumeToken reports whether err is the server's
// InvalidResumeToken (260).
func isInvalidResumeToken(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeInvalidResumeToken)
}

// isAuthenticationFailed reports whether err is 18 AuthenticationFailed
// (and not 13 Unauthorized).
func isAuthenticationFailed(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeAuthenticationFailed) && !se.HasErrorCode(codeUnauthorized)
}

func isHistoryLost(se mongo.ServerError) bool {
	if se == nil {
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

func hasAnyCode(se mongo.ServerError, codes []int) bool {
	for _, c := range codes {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}

func hasAnyLabel(le mongo.LabeledError, labels []string) bool {
	for _, l := range labels {
		if le.HasErrorLabel(l) {
			return true
		}
	}
	return false
}

func isWriteException(err error) bool {
	var we mongo.WriteException
	var bwe mongo.BulkWriteException
	return errors.As(err, &we) || errors.As(err, &bwe)
}

// need is the privilege an operation needs: actions on a collection of
// the database ("" is the database resource itself). An Unauthorized
// error names it, so the operator can grant exactly what is missing.
type need struct {
	colls   []string
	actions []string
}

func needs(coll string, actions ...string) need { return need{colls: []string{coll}, actions: actions} }

// needsEach is the privilege of an operation reading several collections
// (an aggregate with $unionWith needs find on each: the server checks
// find on every collection a $unionWith names).
func needsEach(colls []string, actions ...string) need { return need{colls: colls, actions: actions} }

// fail returns err, prefixed with op, marked with its class (classify);
// nil stays nil. An Unauthorized error also says which privilege op needs
// on which resource of database db, and where the role is documented;
// an AuthenticationFailed one (also Unauthorized) says to check the
// credentials instead.
func fail(db string, n need, op string, err error) error {
	if err == nil {
		return nil
	}
	c := classify(err)
	if c == watch.Unauthorized && isAuthenticationFailed(err) {
		// No privilege is missing: the credentials are wrong (or were
		// rotated under a running daemon, whose new connections then fail
		// their handshake).
		return watch.WithClass(c, fmt.Errorf("%s: %w; authentication failed: check the URI's user name, password, authSource and authMechanism", op, err))
	}
	if c == watch.Unauthorized && len(n.actions) > 0 {
		res := make([]string, len(n.colls))
		for i, coll := range n.colls {
			res[i] = fmt.Sprintf("collection %s.%s", db, coll)
			if coll == "" {
				res[i] = fmt.Sprintf("database %s (collection: \"\")", db)
			}
		}
		return watch.WithClass(c, fmt.Errorf("%s: %w; not authorized: the user needs action(s) %s on %s (see the nojMaterializer role in docs/install.md#a-least-privilege-role)",
			op, err, quoteAll(n.actions), strings.Join(res, " and on ")))
	}
	return watch.WithClass(c, fmt.Errorf("%s: %w", op, err))
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// closeTimeout bounds a cursor's close (killCursors) when the caller's
// context has no earlier deadline: with the server unreachable, the
// driver would otherwise wait for server selection and the round trip
// under a context that never ends, holding shutdown and the lease's
// release behind it. A cursor not killed expires on the server by itself
// (cursorTimeoutMillis, 10 minutes by default).
const closeTimeout = 5 * time.Second

// boundClose returns ctx bounded by closeTimeout.
func boundClose(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, closeTimeout)
}
