package mongodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// The lease and the checkpoint live in ONE document of
// Config.CheckpointCollection:
//
//	{_id: "checkpoint",
//	 lease:      {owner: <string>, epoch: <int64>, expires: <date>},
//	 checkpoint: {token, startAt, clusterTime, rebuiltAt, savedAt, epoch, owner}}
//
// so that fencing is a single-document conditional update, atomic without
// transactions: SaveCheckpoint's filter requires lease.epoch == cp.Epoch,
// and Acquire changes the epoch in the same document, so once another
// instance has taken the lease no save of a deposed instance can match,
// whatever their timing. Epoch 0 means "no lease in use": such a save
// matches only a document without a lease field (or creates it). Release
// only expires the lease and keeps its epoch, so epochs never repeat and an
// old epoch can never become current again.
const stateID = "checkpoint"

// Field names in the state document.
const (
	fieldLease      = "lease"
	fieldCheckpoint = "checkpoint"
)

// stateRead returns the filter and projection of a read of one field of
// the state document.
func stateRead(field string) (filter, projection bson.D) {
	return bson.D{{Key: "_id", Value: stateID}}, bson.D{{Key: field, Value: 1}}
}

// LoadCheckpoint implements resume.Store: the saved checkpoint (read with
// majority read concern); ok is false when none was saved.
func (d *DB) LoadCheckpoint(ctx context.Context) (resume.Checkpoint, bool, error) {
	var doc struct {
		Checkpoint *resume.Checkpoint `bson:"checkpoint"`
	}
	filter, projection := stateRead(fieldCheckpoint)
	err := d.state.FindOne(ctx, filter, options.FindOne().SetProjection(projection)).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return resume.Checkpoint{}, false, nil
	}
	if err != nil {
		return resume.Checkpoint{}, false, fail(d.cfg.Database, needs(d.state.Name(), "find"), "load checkpoint from "+d.state.Name(), err)
	}
	if doc.Checkpoint == nil {
		return resume.Checkpoint{}, false, nil
	}
	return *doc.Checkpoint, true, nil
}

// saveCheckpointWrite returns the filter, update and upsert flag of
// SaveCheckpoint: fenced on lease.epoch == cp.Epoch, or on the absence of
// a lease (upserting the document) when cp.Epoch is 0.
func saveCheckpointWrite(cp resume.Checkpoint) (filter, update bson.D, upsert bool) {
	update = bson.D{{Key: "$set", Value: bson.D{{Key: fieldCheckpoint, Value: cp}}}}
	if cp.Epoch == 0 {
		return bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease, Value: bson.D{{Key: "$exists", Value: false}}}}, update, true
	}
	return bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease + ".epoch", Value: cp.Epoch}}, update, false
}

// SaveCheckpoint implements resume.Store. It replaces the checkpoint with
// one conditional update of the state document, which matches only while
// the lease epoch is cp.Epoch (cp.Epoch 0: while no lease exists); when it
// matches nothing, another instance took over and the result is
// resume.ErrFenced. Majority write concern, bounded by
// Config.WriteTimeout.
//
// On a standalone mongod it saves nothing and returns ErrStandalone: a
// stream start there could never be resumed from.
func (d *DB) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	if d.standalone {
		return watch.WithClass(watch.NotPrimary, fmt.Errorf("save checkpoint: %w", ErrStandalone))
	}
	filter, update, upsert := saveCheckpointWrite(cp)
	wctx, cancel := d.writeCtx(ctx)
	defer cancel()
	res, err := d.state.UpdateOne(wctx, filter, update, options.UpdateOne().SetUpsert(upsert))
	if upsert && mongo.IsDuplicateKeyError(err) {
		// The document exists with a lease: the insert the upsert tried
		// collided with it.
		return fmt.Errorf("save checkpoint at epoch 0: a lease exists: %w", resume.ErrFenced)
	}
	if err != nil {
		return fail(d.cfg.Database, needs(d.state.Name(), "update", "insert"), "save checkpoint to "+d.state.Name(), err)
	}
	if res.MatchedCount == 0 && res.UpsertedCount == 0 {
		return fmt.Errorf("save checkpoint at epoch %d: %w", cp.Epoch, resume.ErrFenced)
	}
	return nil
}

// Lease expiry is decided by the server's clock alone: the conditional
// updates compare lease.expires with $$NOW, the server's current time
// (aggregation variable, MongoDB 4.2+; the adapter requires 4.4), and set
// expires to $$NOW + ttl. No instance's clock enters the decision, so a
// standby whose clock runs ahead cannot take a lease the holder still
// renews. ($$NOW in a find filter needs $expr; in an update it needs the
// pipeline form.)
const serverNow = "$$NOW"

// leaseDoc is the pipeline expression of a lease held by owner at epoch
// until the server's now + ttl.
func leaseDoc(owner string, epoch any, ttl time.Duration) bson.D {
	return bson.D{
		{Key: "owner", Value: literal(owner)},
		{Key: "epoch", Value: epoch},
		{Key: "expires", Value: bson.D{{Key: "$add", Value: bson.A{serverNow, ttl.Milliseconds()}}}},
	}
}

// acquireWrite returns the filter and update pipeline of Acquire. The
// filter matches the state document when there is no lease or the lease
// expired by the server's clock (expires <= $$NOW, whoever held it); the
// pipeline sets a new lease for owner with the next epoch (1 when none)
// expiring at $$NOW + ttl.
func acquireWrite(owner string, ttl time.Duration) (filter bson.D, update bson.A) {
	filter = bson.D{
		{Key: "_id", Value: stateID},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: fieldLease, Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "$expr", Value: bson.D{{Key: "$lte", Value: bson.A{"$" + fieldLease + ".expires", serverNow}}}}},
		}},
	}
	epoch := bson.D{{Key: "$add", Value: bson.A{bson.D{{Key: "$ifNull", Value: bson.A{"$" + fieldLease + ".epoch", int64(0)}}}, int64(1)}}}
	update = bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: fieldLease, Value: leaseDoc(owner, epoch, ttl)}}}}}
	return filter, update
}

// renewWrite returns the filter and update pipeline of Renew: they match
// only while owner holds the lease at epoch, and extend it to
// $$NOW + ttl, keeping owner and epoch.
func renewWrite(owner string, epoch int64, ttl time.Duration) (filter bson.D, update bson.A) {
	filter = bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease + ".owner", Value: owner}, {Key: fieldLease + ".epoch", Value: epoch}}
	update = bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: fieldLease, Value: leaseDoc(owner, literal(epoch), ttl)}}}}}
	return filter, update
}

// Acquire implements resume.LeaseStore with one findAndModify: it takes
// the lease for owner when there is none or it expired by the server's
// clock, with the next epoch, until the server's now + ttl. The state
// document is upserted only on the very first acquisition; when another
// owner holds an unexpired lease the upsert's insert collides with the
// existing document (duplicate key), which means "not acquired", and the
// current lease is returned with ok false.
func (d *DB) Acquire(ctx context.Context, owner string, ttl time.Duration) (resume.Lease, bool, error) {
	filter, update := acquireWrite(owner, ttl)
	l, ok, err := d.leaseUpdate(ctx, filter, update, true)
	if err != nil {
		return resume.Lease{}, false, fail(d.cfg.Database, leaseNeeds(d), "acquire lease in "+d.state.Name(), err)
	}
	return l, ok, nil
}

// Renew implements resume.LeaseStore: one findAndModify that extends the
// lease to the server's now + ttl only if owner still holds it at epoch;
// otherwise ok is false and the current lease is returned.
func (d *DB) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	filter, update := renewWrite(owner, epoch, ttl)
	l, ok, err := d.leaseUpdate(ctx, filter, update, false)
	if err != nil {
		return resume.Lease{}, false, fail(d.cfg.Database, leaseNeeds(d), "renew lease in "+d.state.Name(), err)
	}
	return l, ok, nil
}

// leaseNeeds is the privilege of the lease's findAndModify (with upsert).
func leaseNeeds(d *DB) need { return needs(d.state.Name(), "find", "update", "insert") }

// leaseUpdate runs one findAndModify of the state document returning the
// lease after the update (mongo.Collection.FindOneAndUpdate with
// options.After). When nothing matched (no document, or the upsert's
// insert hit the existing _id) it returns the current lease and ok false.
func (d *DB) leaseUpdate(ctx context.Context, filter bson.D, update bson.A, upsert bool) (resume.Lease, bool, error) {
	wctx, cancel := d.writeCtx(ctx)
	defer cancel()
	var doc struct {
		Lease *resume.Lease `bson:"lease"`
	}
	err := d.state.FindOneAndUpdate(wctx, filter, update, options.FindOneAndUpdate().
		SetUpsert(upsert).
		SetReturnDocument(options.After).
		SetProjection(bson.D{{Key: fieldLease, Value: 1}})).Decode(&doc)
	if mongo.IsDuplicateKeyError(err) || errors.Is(err, mongo.ErrNoDocuments) {
		l, _, err := d.Current(ctx)
		if err != nil {
			return resume.Lease{}, false, err
		}
		return l, false, nil
	}
	if err != nil {
		return resume.Lease{}, false, err
	}
	if doc.Lease == nil {
		return resume.Lease{}, false, errors.New("no lease in the updated document")
	}
	return *doc.Lease, true, nil
}

// releaseWrite returns the filter and update of Release: they match only
// while owner holds the lease at epoch, and set expires to the zero time.
func releaseWrite(owner string, epoch int64) (filter, update bson.D) {
	return bson.D{{Key: "_id", Value: stateID}, {Key: fieldLease + ".owner", Value: owner}, {Key: fieldLease + ".epoch", Value: epoch}},
		bson.D{{Key: "$set", Value: bson.D{{Key: fieldLease + ".expires", Value: time.Time{}}}}}
}

// Release implements resume.LeaseStore: if owner still holds the lease at
// epoch, it expires it (expires = the zero time), keeping owner and epoch
// so that the next owner gets a new epoch. Releasing a lease one no longer
// holds does nothing.
func (d *DB) Release(ctx context.Context, owner string, epoch int64) error {
	wctx, cancel := d.writeCtx(ctx)
	defer cancel()
	filter, update := releaseWrite(owner, epoch)
	_, err := d.state.UpdateOne(wctx, filter, update)
	if err != nil {
		return fail(d.cfg.Database, needs(d.state.Name(), "update"), "release lease in "+d.state.Name(), err)
	}
	return nil
}

// Current implements resume.LeaseStore: the lease as stored (majority
// read concern); ok is false when there is none.
func (d *DB) Current(ctx context.Context) (resume.Lease, bool, error) {
	var doc struct {
		Lease *resume.Lease `bson:"lease"`
	}
	filter, projection := stateRead(fieldLease)
	err := d.state.FindOne(ctx, filter, options.FindOne().SetProjection(projection)).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return resume.Lease{}, false, nil
	}
	if err != nil {
		return resume.Lease{}, false, fail(d.cfg.Database, needs(d.state.Name(), "find"), "read lease from "+d.state.Name(), err)
	}
	if doc.Lease == nil {
		return resume.Lease{}, false, nil
	}
	return *doc.Lease, true, nil
}
