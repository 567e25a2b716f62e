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
// changed field names. Errors are marked with their class (classify);
// when ctx ended, watch.Cancelled.
func (d *DB) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	cs, err := d.db.Watch(ctx, watch.Pipeline(), streamOptions(d.cfg, at))
	if err != nil {
		return nil, streamFail(ctx, d.cfg.Database, "open change stream", err)
	}
	return &Stream{cs: cs, db: d.cfg.Database}, nil
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
	cs *mongo.ChangeStream
	db string // the database's name, for errors
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
// invalidate's token starts a new stream. When ctx ends, the error is
// watch.Cancelled and the stream is unusable.
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
		return watch.Event{}, false, streamFail(ctx, s.db, "change stream", err)
	}
	if s.cs.ID() == 0 {
		return watch.Event{}, false, legacySentinel(watch.WithClass(watch.Transient, errors.New("change stream closed by the server (invalidated)")))
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

// Close implements watch.Stream: it kills the server cursor
// (killCursors) under ctx, so a caller's deadline bounds it when the
// server is unreachable: ChangeStream.Close passes ctx to the cursor's
// close (mongo/change_stream.go:609-623), which runs killCursors with it
// (x/mongo/driver/batch_cursor.go, BatchCursor.Close). With a ctx without
// deadline it is bounded by closeTimeout.
func (s *Stream) Close(ctx context.Context) error {
	ctx, cancel := boundClose(ctx)
	defer cancel()
	if err := s.cs.Close(ctx); err != nil {
		return fail(s.db, need{}, "close change stream", err)
	}
	return nil
}
