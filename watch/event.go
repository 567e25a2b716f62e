package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Position is where a change stream opens: after a resume token, or at a
// cluster time (startAtOperationTime) when there is no token yet, or at
// the current time when both are empty.
type Position struct {
	Token   bson.Raw
	StartAt bson.Timestamp
}

// Feed opens change streams on the source database.
type Feed interface {
	Open(ctx context.Context, at Position) (Stream, error)
}

// Stream is an open change stream. Next waits up to the stream's await
// time for one event; ok is false when none arrived, and ResumeToken then
// covers everything the server has looked at (the postBatchResumeToken),
// so a quiet stream still advances.
type Stream interface {
	Next(ctx context.Context) (ev Event, ok bool, err error)
	ResumeToken() bson.Raw
	Close(ctx context.Context) error
}

// Errors a Feed or Stream wraps so the engine can classify them.
var (
	// ErrHistoryLost: the resume point is no longer in the oplog
	// (ChangeStreamHistoryLost).
	ErrHistoryLost = errors.New("change stream history lost")
	// ErrTransient: a network error, primary step-down or other error
	// after which reopening the stream from the last checkpoint succeeds.
	ErrTransient = errors.New("transient change stream error")
	// ErrResumeImpossible: the stream can never get past its checkpoint,
	// although the history is there (an event over 16 MB,
	// BSONObjectTooLarge; a token the server refuses,
	// InvalidResumeToken): reopening at the same place fails the same way,
	// so the engine rebuilds and streams from the rebuild's start.
	ErrResumeImpossible = errors.New("change stream cannot resume at the checkpoint")
	// ErrBadEvent: Stream.Next read an event it could not fully decode;
	// the Event returned with it holds what could be read (at least the
	// resume token), so the stream can move past it.
	ErrBadEvent = errors.New("undecodable change event")
)

// Event is one decoded change event.
type Event struct {
	Token       bson.Raw // the event's _id, its resume token
	ClusterTime bson.Timestamp
	Change      materialize.Change
	// Values are the new values of the derived paths an update of a user
	// or homework set (Pipeline's derivedValues: a user's three derived
	// fields, a homework's studentStatus.<user>.<problem key>), in the
	// event's order; nil for every other event. They decide whether the
	// event is the echo of the daemon's own write (see echoes).
	Values []PathValue
}

// PathValue is the value an update event gave one dotted path.
type PathValue struct {
	Path  string
	Value bson.RawValue
}

// Watched are the collections whose changes alter derived values; user
// documents matter when inserted, replaced, or when their derived fields
// are written.
var Watched = []string{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem}

// Pipeline is the change stream pipeline: it keeps only events of the
// watched collections (and user inserts, replaces and updates, so a write
// to the derived fields by anyone else is corrected; and the events that
// invalidate the stream) and projects them server-side to what key
// extraction reads: operationType, ns, documentKey, clusterTime, a
// submission's user and problem (an insert's or replace's fullDocument;
// moved: the new values an update set, of updatedFields.user and
// .problem), the *names* of changed fields, and, for updates of users and
// homeworks, the new values of the derived paths only (derivedValues: the
// echo test, see echoes). No event carries a whole homework, so a
// homework near 16 MB cannot break the stream.
//
// Every operator is of MongoDB 4.4 or earlier ($filter 3.2; $split,
// $objectToArray (3.4.4), $in 3.4, $type 3.4, $bsonSize 4.4), and a
// change stream's pipeline may hold $project with any expression; _id,
// the resume token, is kept as the server made it.
func Pipeline() bson.A {
	names := bson.M{"$concatArrays": bson.A{
		bson.M{"$map": bson.M{
			"input": bson.M{"$objectToArray": bson.M{"$ifNull": bson.A{"$updateDescription.updatedFields", bson.M{}}}},
			"in":    "$$this.k",
		}},
		bson.M{"$ifNull": bson.A{"$updateDescription.removedFields", bson.A{}}},
		bson.M{"$map": bson.M{
			"input": bson.M{"$ifNull": bson.A{"$updateDescription.truncatedArrays", bson.A{}}},
			"in":    "$$this.field",
		}},
	}}
	// A name in changedFields costs up to 12 bytes more than its field in
	// updatedFields (an array element's index, up to 7 digits, and the
	// string's length, against a value as small as null's none:
	// 12 - the value's size, that is 20 - $bsonSize({v: value})): an
	// update of many fields of small values would make the event larger
	// than the server's, and near 16 MB past what a change stream returns
	// (BSONObjectTooLarge). So when that excess, summed over updatedFields
	// (removedFields are names on both sides), may pass MaxNamesExcess
	// bytes, an update of a homework, user or problem carries none:
	// "every field may have changed", that one document recomputed. The
	// sizes are taken value by value ($bsonSize, MongoDB 4.4, errors
	// past 16 MiB: a value is within its document, updatedFields need
	// not be). A submission's names are kept whatever their size:
	// without them it would need a rebuild, as the event the server could
	// not return does.
	namesFit := bson.M{"$or": bson.A{
		bson.M{"$eq": bson.A{"$ns.coll", materialize.CollSubmission}},
		bson.M{"$lte": bson.A{
			bson.M{"$reduce": bson.M{
				"input":        bson.M{"$objectToArray": bson.M{"$ifNull": bson.A{"$updateDescription.updatedFields", bson.M{}}}},
				"initialValue": 0,
				"in": bson.M{"$add": bson.A{"$$value",
					bson.M{"$subtract": bson.A{20, bson.M{"$bsonSize": bson.M{"v": "$$this.v"}}}}}},
			}},
			MaxNamesExcess,
		}},
	}}
	changed := bson.M{"$cond": bson.A{
		bson.M{"$and": bson.A{bson.M{"$eq": bson.A{"$operationType", "update"}}, namesFit}},
		names,
		"$$REMOVE",
	}}
	// derivedValues: only for an update that set at most
	// MaxDerivedValues fields (the daemon's own writes set one entry, or
	// a user's three derived fields). Each value shipped carries its path
	// twice (changedFields, and k beside it), so an update of many
	// entries in one statement (a dotted $set of every entry of a large
	// homework) would make the event larger than the server's own and
	// could take it past the 16 MB a change stream returns
	// (BSONObjectTooLarge): the stream could never pass it. With at most
	// three values the event stays within those paths' names and a few
	// hundred bytes of the server's (whose values are in a document of at
	// most 16 MB; the limit on an event is 16 MB + 16 KB).
	updated := bson.M{"$objectToArray": bson.M{"$ifNull": bson.A{"$updateDescription.updatedFields", bson.M{}}}}
	derived := bson.M{"$cond": bson.A{
		bson.M{"$and": bson.A{
			bson.M{"$eq": bson.A{"$operationType", "update"}},
			bson.M{"$in": bson.A{"$ns.coll", bson.A{materialize.CollUser, materialize.CollHomework}}},
			bson.M{"$lte": bson.A{bson.M{"$size": updated}, MaxDerivedValues}},
		}},
		bson.M{"$filter": bson.M{
			"input": updated,
			"as":    "f",
			"cond":  derivedPathExpr("$$f.k"),
		}},
		"$$REMOVE",
	}}
	// An update that set a submission's user and/or problem: the new
	// values (materialize.Move), present only then, so no other event
	// grows.
	unset := func(f string) bson.M {
		return bson.M{"$eq": bson.A{bson.M{"$type": "$updateDescription.updatedFields." + f}, "missing"}}
	}
	moved := bson.M{"$cond": bson.A{
		bson.M{"$and": bson.A{unset("user"), unset("problem")}},
		"$$REMOVE",
		bson.M{"user": "$updateDescription.updatedFields.user", "problem": "$updateDescription.updatedFields.problem"},
	}}
	return bson.A{
		bson.M{"$match": bson.M{"$or": bson.A{
			bson.M{"ns.coll": bson.M{"$in": bson.A{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem}}},
			bson.M{"ns.coll": materialize.CollUser, "operationType": bson.M{"$in": bson.A{"insert", "replace", "update"}}},
			bson.M{"operationType": bson.M{"$in": bson.A{"drop", "rename", "dropDatabase", "invalidate"}}},
		}}},
		bson.M{"$project": bson.M{
			"operationType":        1,
			"ns":                   1,
			"to":                   1,
			"documentKey":          1,
			"clusterTime":          1,
			"fullDocument.user":    1,
			"fullDocument.problem": 1,
			"moved":                moved,
			"changedFields":        changed,
			"derivedValues":        derived,
		}},
	}
}

// MaxNamesExcess is how many bytes more than their fields in the server's
// updatedFields the changed fields' names of an update of a homework,
// user or problem may take, at most, for Pipeline to ship them
// (changedFields).
const MaxNamesExcess = 256

// MaxDerivedValues is the most fields an update may set for Pipeline to
// ship its derived paths' values (derivedValues): a user's three derived
// fields. The daemon's entry writes set one path each.
const MaxDerivedValues = 3

// derivedPathExpr is the aggregation expression that is true when path
// (an expression giving a dotted path of an updated field) is a path the
// daemon writes on the event's document: on a user, one of the three
// derived fields; on a homework, studentStatus.<user>.<problem key>
// (exactly three components: a write of a user's whole status or of an
// entry's field is never an echo, and its value is not shipped). It is
// DerivedPath on the server.
func derivedPathExpr(path string) bson.M {
	parts := bson.M{"$split": bson.A{path, "."}}
	return bson.M{"$or": bson.A{
		bson.M{"$and": bson.A{
			bson.M{"$eq": bson.A{"$ns.coll", materialize.CollUser}},
			bson.M{"$in": bson.A{path, bson.A{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}}},
		}},
		bson.M{"$and": bson.A{
			bson.M{"$eq": bson.A{"$ns.coll", materialize.CollHomework}},
			bson.M{"$eq": bson.A{bson.M{"$size": parts}, 3}},
			bson.M{"$eq": bson.A{bson.M{"$arrayElemAt": bson.A{parts, 0}}, materialize.FieldStudentStatus}},
		}},
	}}
}

// DerivedPath reports whether path, changed by an update of a document
// of coll, is one Pipeline ships the value of (derivedPathExpr).
func DerivedPath(coll, path string) bool {
	switch coll {
	case materialize.CollUser:
		return path == materialize.FieldSubmission || path == materialize.FieldACSubmission || path == materialize.FieldACProblemIDs
	case materialize.CollHomework:
		parts := strings.Split(path, ".")
		return len(parts) == 3 && parts[0] == materialize.FieldStudentStatus
	}
	return false
}

// DecodeEvent reads a change event as Pipeline projects it. An event whose
// operation, namespace or document key cannot be read (or whose operation
// is unknown) returns an error and an Event with an empty Op, which the
// engine answers with a rebuild; one whose _id has a type Back-End never
// writes returns an error and an empty Collection (nothing derivable
// changed); one whose changed fields cannot be read returns an error and
// the Event widened to "every field changed", which the engine processes.
func DecodeEvent(raw bson.Raw) (Event, error) {
	var ev Event
	if t, err := raw.LookupErr("_id"); err == nil {
		if d, ok := t.DocumentOK(); ok {
			ev.Token = d
		}
	}
	if len(ev.Token) == 0 {
		return ev, fmt.Errorf("change event: no resume token")
	}
	if ts, err := raw.LookupErr("clusterTime"); err == nil {
		if t, i, ok := ts.TimestampOK(); ok {
			ev.ClusterTime = bson.Timestamp{T: t, I: i}
		}
	}
	op, ok := raw.Lookup("operationType").StringValueOK()
	if !ok {
		return ev, fmt.Errorf("change event: no operationType")
	}
	c := &ev.Change
	c.Op = materialize.Op(op)
	switch c.Op {
	case materialize.OpDrop, materialize.OpRename, materialize.OpDropDatabase, materialize.OpInvalidate:
		c.Collection, _ = raw.Lookup("ns", "coll").StringValueOK()
		c.RenamedTo, _ = raw.Lookup("to", "coll").StringValueOK()
		return ev, nil
	case materialize.OpInsert, materialize.OpUpdate, materialize.OpReplace, materialize.OpDelete:
	case "create", "createIndexes", "dropIndexes", "modify", "shardCollection", "reshardCollection", "refineCollectionShardKey":
		// DDL that changes no document.
		return ev, nil
	default:
		// An operation this version does not know may have changed
		// anything: the caller cannot narrow it (Op "" asks for a rebuild).
		c.Op = ""
		return ev, fmt.Errorf("change event: unknown operationType %q", op)
	}
	coll, ok := raw.Lookup("ns", "coll").StringValueOK()
	if !ok {
		c.Op = ""
		return ev, fmt.Errorf("change event %s: no ns.coll", op)
	}
	c.Collection = coll
	id, err := raw.LookupErr("documentKey", "_id")
	if err != nil {
		c.Op = ""
		return ev, fmt.Errorf("change event %s on %s: no documentKey._id", op, coll)
	}
	var idErr error
	switch coll {
	case materialize.CollSubmission:
		if c.SubmissionID, ok = id.ObjectIDOK(); !ok {
			idErr = fmt.Errorf("change event on submission: _id is BSON %s, not an ObjectId", id.Type)
		}
		if fd, err := raw.LookupErr("fullDocument"); err == nil && (c.Op == materialize.OpInsert || c.Op == materialize.OpReplace) {
			if d, ok := fd.DocumentOK(); ok {
				u, uok := d.Lookup("user").StringValueOK()
				p, pok := materialize.IntValue(d.Lookup("problem"))
				if uok && pok {
					c.Pair, c.HasPair = materialize.Pair{User: u, Problem: p}, true
				} else {
					// In no pair now, but the half that decodes is
					// the one a later update setting the other half
					// pairs with, and no other event names it.
					c.Move = materialize.Move{User: u, HasUser: uok, Problem: p, HasProblem: pok}
				}
			}
		}
	case materialize.CollHomework:
		if c.HomeworkID, ok = id.ObjectIDOK(); !ok {
			idErr = fmt.Errorf("change event on homework: _id is BSON %s, not an ObjectId", id.Type)
		}
	case materialize.CollProblem:
		if c.ProblemID, ok = materialize.IntValue(id); !ok {
			idErr = fmt.Errorf("change event on problem: _id is BSON %s, not an integer", id.Type)
		}
	case materialize.CollUser:
		if c.UserID, ok = id.StringValueOK(); !ok {
			idErr = fmt.Errorf("change event on user: _id is BSON %s, not a string", id.Type)
		}
	}
	if idErr != nil {
		// A document Back-End never writes; it cannot be derived from, so
		// the event is dropped after being reported.
		c.Collection = ""
		return ev, idErr
	}
	if c.Op == materialize.OpUpdate {
		if coll == materialize.CollSubmission {
			c.Move = decodeMove(raw)
		}
		f, err := raw.LookupErr("changedFields")
		if err != nil {
			return ev, nil // unknown: every field may have changed
		}
		arr, ok := f.ArrayOK()
		if !ok {
			return ev, fmt.Errorf("change event %s on %s: changedFields is BSON %s", op, coll, f.Type)
		}
		vals, err := arr.Values()
		if err != nil {
			return ev, fmt.Errorf("change event %s on %s: changedFields: %w", op, coll, err)
		}
		c.Fields = make([]string, 0, len(vals))
		for _, v := range vals {
			s, ok := v.StringValueOK()
			if !ok {
				c.Fields = nil
				return ev, fmt.Errorf("change event %s on %s: changed field is BSON %s", op, coll, v.Type)
			}
			c.Fields = append(c.Fields, s)
		}
		if coll == materialize.CollUser || coll == materialize.CollHomework {
			var err error
			if ev.Values, err = decodeValues(raw); err != nil {
				// The event is processed as any other: only the echo
				// test, which needs the values, is off for it.
				return ev, fmt.Errorf("change event %s on %s: %w", op, coll, err)
			}
		}
	}
	return ev, nil
}

// decodeValues reads derivedValues, [{k: path, v: value}...]; missing,
// it is nil. Anything but that shape (or a path twice) is an error and
// no values: a value read from a part of it could match a write the
// rest contradicts.
func decodeValues(raw bson.Raw) ([]PathValue, error) {
	f, err := raw.LookupErr("derivedValues")
	if err != nil {
		return nil, nil
	}
	arr, ok := f.ArrayOK()
	if !ok {
		return nil, fmt.Errorf("derivedValues is BSON %s, not an array", f.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, fmt.Errorf("derivedValues: %w", err)
	}
	out := make([]PathValue, 0, len(vals))
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, fmt.Errorf("derivedValues.%d is BSON %s, not a document", i, v.Type)
		}
		k, ok := d.Lookup("k").StringValueOK()
		if !ok {
			return nil, fmt.Errorf("derivedValues.%d: k is not a string", i)
		}
		val, err := d.LookupErr("v")
		if err != nil {
			return nil, fmt.Errorf("derivedValues.%d (%s): no v", i, k)
		}
		if err := val.Validate(); err != nil {
			return nil, fmt.Errorf("derivedValues.%d (%s): %w", i, k, err)
		}
		for _, p := range out {
			if p.Path == k {
				return nil, fmt.Errorf("derivedValues: %s twice", k)
			}
		}
		out = append(out, PathValue{Path: k, Value: val})
	}
	return out, nil
}

// decodeMove reads where an update of a submission moved it: the new
// values of user and problem the pipeline projected as moved (from
// updatedFields), each half that decodes as DecodeSubmission would. A half
// removed, changed below its top level or set to a value that does not
// decode leaves a document in no pair, but the other half, if set, is
// still kept: it is what a later update setting the first half pairs
// with, and no other event names it (pairing it with the halves known
// gives pairs the submission may never be in: a superset, harmless).
// It needs no changedFields: moved holds exactly what updatedFields set
// at the top level.
func decodeMove(raw bson.Raw) materialize.Move {
	var m materialize.Move
	if v, err := raw.LookupErr("moved", "user"); err == nil {
		m.User, m.HasUser = v.StringValueOK()
	}
	if v, err := raw.LookupErr("moved", "problem"); err == nil {
		m.Problem, m.HasProblem = materialize.IntValue(v)
	}
	return m
}
