// Package resume keeps the materializer's durable checkpoints: the resume
// token of the last change event whose derived writes have landed, the
// cluster time a rebuild started at, and the lease that fences them so only
// the active instance can move them forward.
package resume

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Checkpoint is the saved position of the change stream.
//
// Token is a resume token (an event's _id or a postBatchResumeToken);
// when it is empty the stream starts at StartAt, the cluster time a rebuild
// read before its scan. ClusterTime is the cluster time of the last event
// the token covers (zero when unknown), used for lag reporting.
type Checkpoint struct {
	Token       bson.Raw       `bson:"token,omitempty"`
	StartAt     bson.Timestamp `bson:"startAt"`
	ClusterTime bson.Timestamp `bson:"clusterTime"`
	RebuiltAt   time.Time      `bson:"rebuiltAt,omitempty"` // when the last rebuild finished
	// CaughtUpAt is set when the token is a quiet stream's
	// postBatchResumeToken: the daemon had processed everything then.
	CaughtUpAt time.Time `bson:"caughtUpAt,omitempty"`
	SavedAt    time.Time `bson:"savedAt"`
	Epoch      int64     `bson:"epoch"` // lease epoch of the instance that saved it
	Owner      string    `bson:"owner,omitempty"`
}

// Empty reports whether c names no position at all.
func (c Checkpoint) Empty() bool { return len(c.Token) == 0 && c.StartAt.IsZero() }

// ErrFenced is returned by Store.SaveCheckpoint when the caller's lease epoch is no
// longer current: another instance took over and this one must stop.
var ErrFenced = errors.New("checkpoint fenced: lease epoch is stale")

// Store persists checkpoints.
type Store interface {
	// LoadCheckpoint returns the saved checkpoint; ok is false when there
	// is none.
	LoadCheckpoint(ctx context.Context) (cp Checkpoint, ok bool, err error)
	// SaveCheckpoint stores cp if cp.Epoch is the current lease epoch (or no lease is
	// in use, Epoch 0 with no lease document); otherwise ErrFenced.
	SaveCheckpoint(ctx context.Context, cp Checkpoint) error
}
