package mongodb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
// changed field names. Errors are marked with their class (classify);
// when ctx ended, watch.Cancelled.
func (d *DB) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	cs, err := d.db.Watch(ctx, watch.Pipeline(), streamOptions(d.cfg, at))
	if err != nil {
		return nil, streamFail(ctx, d.cfg.Database, "open change stream", err)
	}
	st := &Stream{cs: cs, db: d.cfg.Database, database: d.db, wait: getMoreBound(d.cfg), killBound: closeTimeout}
	if len(at.Token) > 0 {
		st.opened = slices.Clone(cs.ResumeToken())
	}
	return st, nil
}

// serverMaxAwait is the server's maxAwaitTimeMS when a getMore names none.
const serverMaxAwait = time.Second

// getMoreMargin is how much longer than its maxAwaitTimeMS one getMore may
// take, a resume the driver runs within it included (killCursors, a new
// aggregate), before Next abandons it as a timeout.
const getMoreMargin = 10 * time.Second

// getMoreBound bounds one Next's getMore: cfg's maxAwaitTimeMS (the
// server's default when unset) plus getMoreMargin.
func getMoreBound(cfg Config) time.Duration {
	if cfg.MaxAwait > 0 {
		return cfg.MaxAwait + getMoreMargin
	}
	return serverMaxAwait + getMoreMargin
}

// streamNeeds is the privilege of a database-level change stream.
var streamNeeds = needs("", "changeStream", "find")

// streamFail marks err of a change stream operation: watch.Cancelled
// when ctx ended (the driver's error then says little about the server),
// else its class.
func streamFail(ctx context.Context, db, op string, err error) error {
	if ctx.Err() != nil {
		return watch.WithClass(watch.Cancelled, fmt.Errorf("%s: %w", op, err))
	}
	return legacySentinel(fail(db, streamNeeds, op, err))
}

// legacySentinel adds to a classified stream error the sentinel the
// engine tested before the fault policy read classes (errors.Is with
// watch.ErrTransient, ErrHistoryLost, ErrResumeImpossible), so an engine
// that still does keeps retrying, rebuilding or exiting as before. The
// class stays the outermost mark, which watch.ClassOf reads. Remove once
// no engine tests the sentinels.
func legacySentinel(err error) error {
	var s error
	switch c := watch.ClassOf(err); c {
	case watch.Transient, watch.Overloaded:
		s = watch.ErrTransient
	case watch.HistoryLost:
		s = watch.ErrHistoryLost
	case watch.ResumeImpossible:
		s = watch.ErrResumeImpossible
	default:
		return err
	}
	return watch.WithClass(watch.ClassOf(err), fmt.Errorf("%w: %w", err, s))
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
	cs        *mongo.ChangeStream
	db        string          // the database's name, for errors
	database  *mongo.Database // for the killCursors of a cut cursor
	wait      time.Duration   // bounds one getMore (getMoreBound)
	killBound time.Duration   // bounds Close's killCursors (closeTimeout)
	// opened: when opened with startAfter, the driver's resume token once
	// open (the first batch's postBatchResumeToken, or the token given);
	// while the driver's token is still this one, it resumes with the
	// wrong option (see Next). Nil when opened otherwise.
	opened bson.Raw
	// left is the getMore a cancelled Next left running; nil when none.
	left *leftGetMore
	// cut is the cursor whose getMore the bound s.wait cut off, which
	// Close kills; 0 when none. The driver closed it under the ended
	// context, so no killCursors left (see Next).
	cut int64
}

// streamCursorColl is the collection a database-level change stream's
// cursor is on: the server answers its aggregate with the namespace
// "<db>.$cmd.aggregate", from which the driver takes the collection its
// own killCursors names (x/mongo/driver/batch_cursor.go:119-129, 209-210,
// 341-345).
const streamCursorColl = "$cmd.aggregate"

// leftGetMore is a getMore that Next stopped waiting for when its
// context ended.
type leftGetMore struct {
	done   chan struct{}      // closed when the getMore returned
	cancel context.CancelFunc // cancels it (then no killCursors is sent)
	token  bson.Raw           // the resume token when Next left
}

// Next implements watch.Stream. It asks the server once for the next event
// (a getMore waiting up to Config.MaxAwait when the current batch is
// empty). ok is false when none arrived; ResumeToken then covers what the
// server looked at.
//
// An event watch.DecodeEvent cannot fully read is still returned with
// ok true, holding what could be read (at least its resume token), and an
// error wrapping watch.ErrBadEvent and the decode error: the caller
// reports it and moves past it. Any other error ends this stream (the
// caller closes it and reopens from its checkpoint) and is marked with
// its class (classify). A stream the server closed (cursor id 0 after an
// invalidate event) returns a watch.Transient error: reopening after the
// invalidate's token starts a new stream. When ctx ends, Next returns at
// once with a watch.Cancelled error and the stream is unusable but for
// ResumeToken (the token when Next returned) and Close.
//
// The getMore does not run under ctx. The driver, when a getMore's
// context ends, takes the error for a resumable one
// (mongo/change_stream.go:772-776: not a server error), closes the cursor
// under that ended context, so killCursors never leaves
// (x/mongo/driver/operation.go:818-819 fails any command whose context
// has ended), and zeroes the cursor id (x/mongo/driver/batch_cursor.go:
// 295-301), so a later Close sends nothing either: the server would keep
// the cursor until its idle timeout. So the getMore runs under a context
// only its own bound (getMoreBound) ends; when ctx ends first, Next
// leaves it running and Close waits for it, then kills the cursor. A
// getMore that bound cuts off meets the same fate in the driver: Next
// then remembers the cursor it ran on (a TryNext sends at most one
// getMore, on the cursor it starts with: after a resume's aggregate it
// returns, mongo/change_stream.go:737-768) and Close kills it itself.
//
// A stream opened with startAfter whose driver token is still the one it
// was opened at (no event returned, no later postBatchResumeToken) is
// resumed by the driver with resumeAfter and that token
// (mongo/change_stream.go:528-535, the initial postBatchResumeToken being
// the startAfter token), unlike the change streams specification's resume
// process (startAfter until a document was returned); from an invalidate
// event's token the server refuses that with InvalidResumeToken (260).
// nextFail marks that refusal watch.Transient: the caller's reopening at
// its checkpoint, which uses startAfter, succeeds.
func (s *Stream) Next(ctx context.Context) (watch.Event, bool, error) {
	if s.left != nil {
		return watch.Event{}, false, watch.WithClass(watch.Cancelled, errors.New("change stream: used after a cancelled Next"))
	}
	if err := ctx.Err(); err != nil {
		return watch.Event{}, false, watch.WithClass(watch.Cancelled, fmt.Errorf("change stream: %w", err))
	}
	got, err := s.tryNext(ctx)
	if err != nil {
		return watch.Event{}, false, watch.WithClass(watch.Cancelled, fmt.Errorf("change stream: %w", err))
	}
	if got {
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
		return watch.Event{}, false, nextFail(ctx, s.db, err, s.opened != nil && bytes.Equal(s.cs.ResumeToken(), s.opened))
	}
	if s.cs.ID() == 0 {
		return watch.Event{}, false, legacySentinel(watch.WithClass(watch.Transient, errors.New("change stream closed by the server (invalidated)")))
	}
	return watch.Event{}, false, nil
}

// tryNext runs ChangeStream.TryNext. An event of the current batch needs
// no command (mongo/change_stream.go:676-686 calls loopNext only on an
// empty batch) and is taken under ctx. Otherwise TryNext runs in a
// goroutine under s.wait and not ctx (see Next); when ctx ends first,
// tryNext returns ctx's error and records the getMore it left in s.left.
func (s *Stream) tryNext(ctx context.Context) (bool, error) {
	if s.cs.RemainingBatchLength() > 0 {
		return s.cs.TryNext(ctx), nil
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.wait)
	token := s.ResumeToken()
	id := s.cs.ID()
	done := make(chan struct{})
	var got bool
	go func() {
		defer close(done)
		defer cancel()
		got = s.cs.TryNext(gctx)
		if gctx.Err() != nil && s.cs.ID() == 0 {
			s.cut = id // closed by the driver under gctx: no killCursors left
		}
	}()
	select {
	case <-done:
		return got, nil
	case <-ctx.Done():
		s.left = &leftGetMore{done: done, cancel: cancel, token: token}
		return false, ctx.Err()
	}
}

// ResumeToken implements watch.Stream: the driver's cached resume token
// (the last event's _id, or the postBatchResumeToken of the last batch
// once it is consumed, so it advances on a quiet stream); nil before the
// server sent any. After a cancelled Next, the token when it returned: an
// event the getMore it left running received was never returned.
func (s *Stream) ResumeToken() bson.Raw {
	if s.left != nil {
		return slices.Clone(s.left.token)
	}
	t := s.cs.ResumeToken()
	if t == nil {
		return nil
	}
	return slices.Clone(t)
}

// Close implements watch.Stream: it kills the server cursor
// (killCursors): ChangeStream.Close passes its context to the cursor's
// close (mongo/change_stream.go:609-623), which runs killCursors with it
// (x/mongo/driver/batch_cursor.go:295-345). A getMore a cancelled Next
// left running is waited for first, under ctx alone: it ends within its
// maxAwaitTimeMS on a live server (its own bound, getMoreBound, on a
// silent one), and the cursor is still open to kill only once it has. A
// bound started before that wait would cut it whenever maxAwaitTimeMS
// passes the bound, and the cursor would be left at every stop. If ctx
// ends first, the getMore is cancelled and the cursor left to the
// server's idle timeout. The killCursors themselves (the stream's cursor,
// and one a getMore cut off by its bound left, see Next) run under ctx
// bounded by closeTimeout from when they start, so an unreachable server
// does not hold a ctx without deadline.
func (s *Stream) Close(ctx context.Context) error {
	if l := s.left; l != nil {
		select {
		case <-l.done:
		case <-ctx.Done():
			l.cancel()
			<-l.done
			_ = s.cs.Close(ctx)
			return fail(s.db, need{}, "close change stream: a getMore still running", ctx.Err())
		}
	}
	kctx, cancel := context.WithTimeout(ctx, s.killBound)
	defer cancel()
	err := s.cs.Close(kctx)
	if id := s.cut; id != 0 {
		s.cut = 0
		kill := bson.D{{Key: "killCursors", Value: streamCursorColl}, {Key: "cursors", Value: bson.A{id}}}
		if kerr := s.database.RunCommand(kctx, kill).Err(); err == nil && kerr != nil {
			err = fmt.Errorf("kill cursor %d cut off by the getMore bound: %w", id, kerr)
		}
	}
	if err != nil {
		return fail(s.db, need{}, "close change stream", err)
	}
	return nil
}
