package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// The Back-End's submission fields PendingSubmissions reads, as stored
// (mongo/engine.py, the same at 0a6e25c and dfbd76a): status (-2 created,
// -1 sent to a sandbox, 0 and up judged), languageType (db_field of
// language; 3 is handwritten, graded by a teacher and never sent) and
// lastSend (db_field of last_send: the Back-End's datetime.now() when
// submit or rejudge set status -1, naive local time, UTC in its image).
const (
	fieldStatus       = "status"
	fieldLanguageType = "languageType"
	fieldLastSend     = "lastSend"
	statusPending     = -1
)

// pendingIndex holds only the submissions waiting for a result: a
// partial index on status -1, so it stays the size of the sandboxes'
// queue (plus handwritten submissions not yet graded) whatever the
// collection's, and costs a submit or a landing one small index entry
// insert or delete. languageType leads so that the query's bounds skip
// the handwritten ones ($in on the prefix): the keys examined are those
// returned (one more per language interval at most). A partial filter
// of equality only: MongoDB 4.4 accepts no $in there, and the manual of
// 7.0 and later lists no range operator.
var pendingIndex = IndexBuild{
	Collection: materialize.CollSubmission,
	Keys:       bson.D{{Key: fieldLanguageType, Value: 1}, {Key: fieldLastSend, Value: 1}},
	Name:       "pending_languageType_1_lastSend_1",
	Partial:    bson.D{{Key: fieldStatus, Value: int32(statusPending)}},
	hinted:     true,
}

// judgedLanguages are the languageType values a sandbox judges (C, C++,
// Python); handwritten (3) stays pending until a teacher grades it.
var judgedLanguages = bson.A{int32(0), int32(1), int32(2)}

// pendingFilter selects the judged submissions pending since before
// cutoff. Its status equality implies the index's partial filter, which
// the planner requires before it uses (or a hint may name) the index.
func pendingFilter(cutoff time.Time) bson.D {
	return bson.D{
		{Key: fieldStatus, Value: int32(statusPending)},
		{Key: fieldLanguageType, Value: bson.D{{Key: "$in", Value: judgedLanguages}}},
		{Key: fieldLastSend, Value: bson.D{{Key: "$lt", Value: bson.NewDateTimeFromTime(cutoff)}}},
	}
}

// pendingProjection is what a listing needs; lastSend first in the sort.
var (
	pendingProjection = bson.D{{Key: "_id", Value: 1}, {Key: "user", Value: 1}, {Key: "problem", Value: 1}, {Key: fieldLastSend, Value: 1}}
	pendingSort       = bson.D{{Key: fieldLastSend, Value: 1}}
)

// pendingFindOptions hints the partial index by name: without it the
// query would scan the collection, so a missing index must fail the
// query (BadValue) rather than cost a scan a minute.
func pendingFindOptions() *options.FindOptionsBuilder {
	return options.Find().SetProjection(pendingProjection).SetSort(pendingSort).SetHint(pendingIndex.Name)
}

// ErrPendingIndexMissing: the partial index PendingSubmissions hints is
// not on submission (EnsureIndexes builds it), or is hidden.
var ErrPendingIndexMissing = errors.New("index " + pendingIndex.Name + " on submission is missing or hidden")

// PendingSubmissions returns the judged submissions pending (status -1)
// since before cutoff, the oldest lastSend first: one find on the
// partial index (the database's majority read concern, primary read
// preference; no causal session: a report needs no read-your-writes),
// the cursor drained and closed by each. It implements
// watch.PendingSource.
func (d *DB) PendingSubmissions(ctx context.Context, cutoff time.Time) ([]watch.PendingSubmission, error) {
	const op = "find pending submissions"
	cur, err := d.submissions.Find(ctx, pendingFilter(cutoff), pendingFindOptions())
	if err != nil {
		if isBadHint(err) {
			return nil, watch.WithClass(watch.Fatal, fmt.Errorf("%s: %w (%w)", op, ErrPendingIndexMissing, err))
		}
		return nil, fail(d.cfg.Database, needs(materialize.CollSubmission, "find"), op, err)
	}
	var out []watch.PendingSubmission
	if err := each(ctx, cur, func(raw bson.Raw) error { out = append(out, decodePending(raw)); return nil }); err != nil {
		return nil, fail(d.cfg.Database, needs(materialize.CollSubmission, "find"), op, err)
	}
	return out, nil
}

// decodePending reads one projected submission leniently: a listing
// shows what is there (a malformed user or problem prints empty or 0).
func decodePending(doc bson.Raw) watch.PendingSubmission {
	var p watch.PendingSubmission
	if v, err := doc.LookupErr("_id"); err == nil {
		if oid, ok := v.ObjectIDOK(); ok {
			p.ID = oid.Hex()
		} else {
			p.ID = v.String()
		}
	}
	if v, err := doc.LookupErr("user"); err == nil {
		p.User, _ = v.StringValueOK()
	}
	if v, err := doc.LookupErr("problem"); err == nil {
		p.Problem, _ = v.AsInt64OK()
	}
	if v, err := doc.LookupErr(fieldLastSend); err == nil {
		if dt, ok := v.DateTimeOK(); ok {
			p.LastSend = time.UnixMilli(dt).UTC()
		}
	}
	return p
}

// isBadHint reports the server's refusal of a hint naming no usable
// index: 2 BadValue, "hint provided does not correspond to an existing
// index" (also for a hidden one).
func isBadHint(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeBadValue) && strings.Contains(err.Error(), "hint")
}

// codeBadValue is the server's 2 BadValue.
const codeBadValue = 2
