package mongodb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// bulk sends models to coll as unordered bulk writes of at most
// writeChunk models, each bounded by Config.WriteTimeout, with the
// database's majority write concern. Unordered: one failing model (say, a
// homework whose studentStatus.<user> is not a document) does not stop
// the others; the error reports every failure.
//
// Models the server refused for good (every write error of the chunk is a
// permanentWriteCodes code and there is no write concern error or error
// label) do not stop the other chunks; they are reported at the end
// wrapped in watch.ErrWriteRejected and marked watch.Refused, since
// retrying them cannot succeed. Any other error (NotWritablePrimary,
// step-down, shutdown, network, an unknown code) stops at its chunk and
// is marked with its class (classify; n names the privilege an
// Unauthorized error lacks): the engine decides, and saves no checkpoint
// past it.
//
// at is the latest operationTime of the chunks (writeSession's), zero
// when any chunk's is unknown: every write of models is at or before it.
func (d *DB) bulk(ctx context.Context, coll *mongo.Collection, what string, n need, models []mongo.WriteModel) (at bson.Timestamp, err error) {
	var rejected []error
	known := true
	for chunk := range slices.Chunk(models, writeChunk) {
		wctx, cancel := d.writeCtx(ctx)
		t, err := d.writeSession(wctx, func(ctx context.Context) error {
			_, err := coll.BulkWrite(ctx, chunk, bulkWriteOptions())
			return err
		})
		cancel()
		if t.IsZero() {
			known = false
		} else if at.Before(t) {
			at = t
		}
		if r, ok := refusedWrites(err); ok {
			rejected = append(rejected, r...)
			continue
		}
		if err != nil {
			return bson.Timestamp{}, fail(d.cfg.Database, n, fmt.Sprintf("write %d %s to %s", len(chunk), what, coll.Name()), err)
		}
	}
	if len(rejected) > 0 {
		return bson.Timestamp{}, watch.WithClass(watch.Refused,
			fmt.Errorf("%d %s to %s refused: %w: %w", len(rejected), what, coll.Name(), errors.Join(rejected...), watch.ErrWriteRejected))
	}
	if !known {
		return bson.Timestamp{}, nil
	}
	return at, nil
}

// permanentWriteCodes are the server's per-write error codes that a retry
// of the same update on the same document cannot fix (names from the
// server's src/mongo/base/error_codes.yml; 17419 is an assertion code):
//
//	    2 BadValue                  a value the update cannot apply
//	    9 FailedToParse             the update document itself
//	   14 TypeMismatch              e.g. $set below a non-document
//	   28 PathNotViable             studentStatus.<user> is not a document
//	   52 DollarPrefixedFieldName   a '$' key the server refuses
//	   55 InvalidDBRef              a '$ref'-shaped document
//	   56 EmptyFieldName            an empty key in the path
//	   57 DottedFieldName           a '.' in a stored key
//	   66 ImmutableField            _id would change
//	  121 DocumentValidationFailure the collection's validator refuses it
//	10334 BSONObjectTooLarge        the document would exceed 16 MB
//	17419 (Location17419)           "Resulting document after update is
//	                                larger than 16777216"
//
// Everything else is retried: through mongos and during fail-overs,
// NotWritablePrimary (10107), PrimarySteppedDown (189),
// InterruptedDueToReplStateChange (11602), ShutdownInProgress (91),
// network and unknown errors arrive as per-write errors too.
var permanentWriteCodes = map[int]string{
	2: "BadValue", 9: "FailedToParse", 14: "TypeMismatch", 28: "PathNotViable",
	52: "DollarPrefixedFieldName", 55: "InvalidDBRef", 56: "EmptyFieldName", 57: "DottedFieldName",
	66: "ImmutableField", 121: "DocumentValidationFailure", 10334: "BSONObjectTooLarge",
	17419: "Location17419 (document after update larger than 16 MB)",
}

// refusedWrites reports whether err (from Collection.BulkWrite or a
// single-document write) is a mongo.BulkWriteException (mongo/errors.go:695)
// or mongo.WriteException (errors.go:576) whose write errors are all
// permanent (permanentWriteCodes), with no write concern error (the
// writes may not be durable) and no error label (RetryableWriteError,
// NetworkError... mark it retryable); it returns one error per refused
// model. ok is false for nil and for every other error, which classify
// calls Transient or worse.
func refusedWrites(err error) (rejected []error, ok bool) {
	type writeErr struct {
		index, code int
		msg         string
	}
	var errs []writeErr
	var bwe mongo.BulkWriteException
	var we mongo.WriteException
	switch {
	case err == nil:
		return nil, false
	case errors.As(err, &bwe):
		if bwe.WriteConcernError != nil || len(bwe.Labels) > 0 {
			return nil, false
		}
		for _, e := range bwe.WriteErrors {
			errs = append(errs, writeErr{e.Index, e.Code, e.Message})
		}
	case errors.As(err, &we):
		if we.WriteConcernError != nil || len(we.Labels) > 0 {
			return nil, false
		}
		for _, e := range we.WriteErrors {
			errs = append(errs, writeErr{e.Index, e.Code, e.Message})
		}
	default:
		return nil, false
	}
	if len(errs) == 0 || mongo.IsNetworkError(err) {
		return nil, false
	}
	for _, e := range errs {
		if _, permanent := permanentWriteCodes[e.code]; !permanent {
			return nil, false
		}
	}
	for _, e := range errs {
		rejected = append(rejected, fmt.Errorf("model %d: code %d (%s): %s", e.index, e.code, permanentWriteCodes[e.code], e.msg))
	}
	return rejected, true
}

// Apply implements watch.Writer: one unordered bulk write of user updates
// and one of entry updates (more when a batch exceeds 1000 models). Each
// update $sets only derived fields, matches only an existing user document
// or an existing studentStatus entry, and never upserts; a document that
// vanished meanwhile is simply not matched. at is the latest
// operationTime of its bulk writes, zero when one is unknown (bulk).
func (d *DB) Apply(ctx context.Context, w *watch.Writes) (at bson.Timestamp, err error) {
	if w == nil {
		return bson.Timestamp{}, nil
	}
	var rejected []error
	known := true
	write := func(coll *mongo.Collection, what string, models []mongo.WriteModel) error {
		t, err := d.bulk(ctx, coll, what, needs(coll.Name(), "update"), models)
		if err != nil {
			if !errors.Is(err, watch.ErrWriteRejected) {
				return fmt.Errorf("apply: %w", err)
			}
			rejected = append(rejected, err) // the other collection's writes still go
			return nil
		}
		if t.IsZero() {
			known = false
		} else if at.Before(t) {
			at = t
		}
		return nil
	}
	userModels, entryModels := applyModels(w)
	if len(userModels) > 0 {
		if err := write(d.users, "user updates", userModels); err != nil {
			return bson.Timestamp{}, err
		}
	}
	if len(entryModels) > 0 {
		if err := write(d.homeworks, "entry updates", entryModels); err != nil {
			return bson.Timestamp{}, err
		}
	}
	if len(rejected) > 0 {
		return bson.Timestamp{}, watch.WithClass(watch.Refused, fmt.Errorf("apply: %w", errors.Join(rejected...)))
	}
	if !known {
		return bson.Timestamp{}, nil
	}
	return at, nil
}

// applyModels builds the update models Apply sends, without a server:
// one UpdateOneModel per user write (userWrite's filter and $set) and per
// entry write (entryWrite's), each with upsert false so a document or
// entry that does not exist is never created.
func applyModels(w *watch.Writes) (users, entries []mongo.WriteModel) {
	users = make([]mongo.WriteModel, len(w.Users))
	for i, uw := range w.Users {
		f, u := userWrite(uw)
		users[i] = mongo.NewUpdateOneModel().SetFilter(f).SetUpdate(u).SetUpsert(false)
	}
	entries = make([]mongo.WriteModel, len(w.Entries))
	for i, ew := range w.Entries {
		f, u := entryWrite(ew)
		entries[i] = mongo.NewUpdateOneModel().SetFilter(f).SetUpdate(u).SetUpsert(false)
	}
	return users, entries
}

// bulkWriteOptions are the options of every bulk write: unordered, so one
// refused model does not stop the others (driver:
// mongo/options/bulkwriteoptions.go:64 SetOrdered; the default is ordered,
// bulkwriteoptions.go:39).
func bulkWriteOptions() *options.BulkWriteOptionsBuilder {
	return options.BulkWrite().SetOrdered(false)
}

// RecordKeys implements watch.KeyIndex: for each submission, an upsert of
// {_id: id, pairs: [{u, p}...]} adding each pair once ($addToSet). The key
// collection is the materializer's own, so upserting there is fine.
func (d *DB) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	if len(keys) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, 0, len(keys))
	for id, pairs := range keys {
		if len(pairs) == 0 {
			continue
		}
		f, u := recordKeysWrite(id, pairs)
		models = append(models, mongo.NewUpdateOneModel().SetFilter(f).SetUpdate(u).SetUpsert(true))
	}
	if _, err := d.bulk(ctx, d.keys, "key records", needs(d.keys.Name(), "update", "insert"), models); err != nil {
		return fmt.Errorf("record keys: %w", err)
	}
	return nil
}

// LookupKeys implements watch.KeyIndex: the recorded pairs of the named
// submissions (those with a record), read with _id $in queries of at most
// 500 ids. Malformed pair entries are skipped.
func (d *DB) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	out := make(map[bson.ObjectID][]materialize.Pair, len(ids))
	for chunk := range slices.Chunk(ids, queryTerms) {
		err := d.find(ctx, d.keys, idIn(chunk), nil, func(raw bson.Raw) error {
			id, ok := raw.Lookup("_id").ObjectIDOK()
			if !ok {
				return nil
			}
			out[id] = decodePairs(raw.Lookup("pairs"))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("lookup keys: %w", err)
		}
	}
	return out, nil
}

// decodePairs reads a key record's pairs array, without duplicates.
func decodePairs(v bson.RawValue) []materialize.Pair {
	var out []materialize.Pair
	for _, d := range arrayDocs(v) {
		u, uok := d.Lookup("u").StringValueOK()
		p, pok := d.Lookup("p").AsInt64OK()
		if uok && pok {
			pair := materialize.Pair{User: u, Problem: p}
			if !slices.Contains(out, pair) {
				out = append(out, pair)
			}
		}
	}
	return out
}
