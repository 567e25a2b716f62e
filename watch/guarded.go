package watch

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// guardChunk is the most models one guarded write carries: one bulk write
// of the MongoDB adapter (its writeChunk). The rebuild asks the write
// guard before each such chunk, so the guard's deadline bounds one bulk
// write, not a whole flush of up to 100,000 key records or 10,000 derived
// values: on a slow server a flush then takes as long as it needs while
// the lease is renewed, instead of outliving one deadline and restarting
// the rebuild's scan.
const guardChunk = 1000

// recordKeysGuarded records keys in chunks of at most guardChunk
// submissions, asking guard before each; it returns how many were
// recorded. A chunk's error goes to onErr, which decides: nil skips that
// chunk (the fault policy's skip), an error stops the writes.
func recordKeysGuarded(ctx context.Context, st KeyIndex, keys map[bson.ObjectID][]materialize.Pair, guard func(context.Context) (time.Time, error),
	onErr func(chunk map[bson.ObjectID][]materialize.Pair, err error) error) (int, error) {
	n := 0
	chunk := make(map[bson.ObjectID][]materialize.Pair, min(len(keys), guardChunk))
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		defer clear(chunk)
		wctx, cancel, err := guardCtx(ctx, guard)
		if err != nil {
			return onErr(chunk, err)
		}
		err = st.RecordKeys(wctx, chunk)
		cancel()
		if err != nil {
			return onErr(chunk, fmt.Errorf("record key index: %w", err))
		}
		n += len(chunk)
		return nil
	}
	for id, pairs := range keys {
		chunk[id] = pairs
		if len(chunk) == guardChunk {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// applyGuarded applies w in chunks of at most guardChunk writes of one
// kind (users, then entries), asking guard before each, so that each call
// of st.Apply is one bulk write of the MongoDB adapter. A chunk's error
// goes to onErr, which decides: nil skips that chunk (a write the server
// refused for good), an error stops the writes. Each chunk applied
// without error goes to applied (when set) with its operationTime; a
// refused or failed chunk never does (it may have landed in part).
// Without a guard (no lease: tests, the in-memory store) w is applied in
// one call, since chunks exist only to bound each write by the guard's
// deadline and cost an in-memory store one re-encoding of a homework per
// chunk.
func applyGuarded(ctx context.Context, st Writer, w *Writes, guard func(context.Context) (time.Time, error),
	onErr func(part *Writes, err error) error, applied func(part *Writes, at bson.Timestamp)) error {
	apply := func(part *Writes) error {
		wctx, cancel, err := guardCtx(ctx, guard)
		if err != nil {
			return onErr(part, err)
		}
		at, err := st.Apply(wctx, part)
		cancel()
		if err != nil {
			return onErr(part, fmt.Errorf("write derived values: %w", err))
		}
		if applied != nil {
			applied(part, at)
		}
		return nil
	}
	if guard == nil {
		return apply(w)
	}
	for i := 0; i < len(w.Users); i += guardChunk {
		if err := apply(&Writes{Users: w.Users[i:min(i+guardChunk, len(w.Users))]}); err != nil {
			return err
		}
	}
	for i := 0; i < len(w.Entries); i += guardChunk {
		if err := apply(&Writes{Entries: w.Entries[i:min(i+guardChunk, len(w.Entries))]}); err != nil {
			return err
		}
	}
	return nil
}
