package mongodb

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// ErrNotEmpty is returned by Seed when the database already holds
// submissions.
var ErrNotEmpty = errors.New("refusing to add demo data to a database that has submissions")

// Seed inserts demo documents (collection → documents) for the `seed`
// command and returns how many it inserted. It refuses to touch a database
// that already holds submissions, so it cannot be pointed at production
// data by mistake. It needs the insert privilege the daemon's own role
// does not have.
func (d *DB) Seed(ctx context.Context, docs map[string][]bson.Raw) (int, error) {
	n, err := d.submissions.EstimatedDocumentCount(ctx)
	if err != nil {
		return 0, fail(d.cfg.Database, needs(d.submissions.Name(), "find"), "seed: count submissions", err)
	}
	if n > 0 {
		return 0, fmt.Errorf("seed: database %s already holds %d submissions: %w", d.cfg.Database, n, ErrNotEmpty)
	}
	total := 0
	for coll, ds := range docs {
		for start := 0; start < len(ds); start += writeChunk {
			batch := make([]any, 0, writeChunk)
			for _, doc := range ds[start:min(start+writeChunk, len(ds))] {
				batch = append(batch, doc)
			}
			res, err := d.db.Collection(coll).InsertMany(ctx, batch, options.InsertMany().SetOrdered(false))
			if err != nil {
				return total, fail(d.cfg.Database, needs(coll, "insert"), "seed "+coll, err)
			}
			total += len(res.InsertedIDs)
		}
	}
	return total, nil
}
