package mongodb

import (
	"context"
	"errors"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// writeClock is the latest operationTime of the daemon's own acknowledged
// writes: the reads that decide a write is not needed read causally after
// it (causalCtx). Safe for concurrent use.
type writeClock struct {
	mu sync.Mutex
	t  bson.Timestamp
}

// advance raises the clock to t if t is later.
func (c *writeClock) advance(t bson.Timestamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.Before(t) {
		c.t = t
	}
}

// load returns the clock.
func (c *writeClock) load() bson.Timestamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// majorityAcknowledged reports whether a write's err (nil, or a write
// exception with write errors only) means the server applied it with the
// majority write concern.
func majorityAcknowledged(err error) bool {
	var we mongo.WriteException
	var bwe mongo.BulkWriteException
	switch {
	case err == nil:
		return true
	case errors.As(err, &bwe):
		return bwe.WriteConcernError == nil
	case errors.As(err, &we):
		return we.WriteConcernError == nil
	}
	return false
}

// writeSession runs write in an explicit session on d's client, so the
// response's operationTime is known (the driver advances the session's
// operation time from every response, before handling its error:
// x/mongo/driver/operation.go:1179-1185 and updateOperationTime
// :1848-1865; Session.OperationTime, mongo/session.go:391, returns it,
// the latest of the replies: AdvanceOperationTime,
// x/mongo/driver/session/client_session.go:292-306), and then advances
// d.written to it: a write the server acknowledged (even with write
// errors for some models) is in the oplog at or before that time. It
// returns that time (watch.Writer.Apply's operationTime), zero when it
// is unknown or the write was not majority-acknowledged. A write with no
// session (an implicit session) would leave the time unknown to the
// adapter. When no session can be started the write runs without one,
// the clock stays and the time returned is zero.
//
// The session is not causally consistent, as an implicit one: the driver
// sends readConcern.afterClusterTime on the writes of a causally
// consistent session once it has an operation time
// (x/mongo/driver/operation.go:1612-1619), so a retry after a fail-over
// would wait until the new primary passes the old primary's last applied
// time. The session's operation time is the latest of every reply of the
// write, a failed first attempt's included: after a fail-over the clock
// can be ahead of the write by that reply, and a read after it waits until
// the new primary's next write (its periodic no-op at the latest)
// commits. Later than needed, never earlier.
func (d *DB) writeSession(ctx context.Context, write func(context.Context) error) (bson.Timestamp, error) {
	sess, err := d.client.StartSession(options.Session().SetCausalConsistency(false))
	if err != nil {
		return bson.Timestamp{}, write(ctx)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	err = write(mongo.NewSessionContext(ctx, sess))
	// Only a write the majority acknowledged (per-write errors aside): the
	// operationTime of a failed command, or of a write concern error, may
	// belong to a write that is rolled back, a time a new primary reaches
	// only later, and reads after it would wait for nothing.
	if t := sess.OperationTime(); t != nil && majorityAcknowledged(err) {
		d.written.advance(*t)
		return *t, err
	}
	return bson.Timestamp{}, err
}
