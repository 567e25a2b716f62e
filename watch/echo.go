package watch

import (
	"bytes"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// echoes records the daemon's own last acknowledged write of each derived
// path, so that the change events those writes cause (their echoes) are
// skipped instead of recomputed and found equal: one landing at a time,
// the echoes would cost a batch of reads of their own.
//
// The rule. An update event of a user or homework document is skipped
// iff
//
//	(a) every path it changed (Change.Fields: updatedFields only, no
//	    removedFields or truncatedArrays) is a path the daemon writes: a
//	    user's three derived fields, or studentStatus.<user>.<problem key>
//	    whose user and key hold no '.' and start with no '$' (and the
//	    update set at most MaxDerivedValues fields: Pipeline ships no
//	    values otherwise, so a larger update is never skipped);
//	(b) the event's value of each path (Event.Values) is byte for byte the
//	    BSON the daemon's last acknowledged write of that path set; and
//	(c) the event's cluster time is not zero and not after that write's
//	    acknowledged operationTime T (Writer.Apply's).
//
// Why it is exact. The daemon's write W of value V to path P was derived
// from reads causally after its batch's last event c, and every later
// read of the store is causally after T (the MongoDB adapter's reads wait
// for its write clock, which Apply advanced to T; the in-memory store is
// linearizable). An event E passing the rule says that P was set to V at
// some time t ≤ T, by W or by another writer. If any source document
// changed after c, that change is a later event in the stream, processed
// after W, whose recompute reads causally after T, so after t: it sees
// P as E left it (or later) and writes the derived value if P differs.
// If none changed, V is still the derived value and E set P to the right
// value. Either way, recomputing E would find nothing the stream does not
// correct anyway. A write by anyone at a time after T is never skipped,
// whatever its value, and neither is one of another value.
//
// Without (c) it is not exact: a record lingering after the daemon's
// value went stale would skip another writer's later write of that stale
// value. A record is therefore dropped (prune) once the stream passes T,
// so records are bounded by the writes in flight. Only writes applied
// without error are recorded (a refused or failed write may have landed
// in part), and only with a known T (zero: nothing recorded, nothing
// skipped). The records live in one stream of one engine (reset when a
// stream opens): after a restart, a reopened stream or a lease handed
// over the echoes are recomputed, which costs reads and is never wrong.
type echoes struct {
	m map[echoKey]echoWrite
}

// echoKey names one derived path of one document.
type echoKey struct {
	coll string
	user string        // a user document's _id (CollUser)
	hw   bson.ObjectID // a homework's _id (CollHomework)
	path string        // the dotted path as an update event names it
}

// echoWrite is one acknowledged write of a path: its value's BSON (type
// byte, then the value) and the write's operationTime.
type echoWrite struct {
	value []byte
	at    bson.Timestamp
}

func encodedValue(t bson.Type, data []byte) []byte {
	return append([]byte{byte(t)}, data...)
}

// record notes the writes of w, acknowledged with operationTime at.
func (e *echoes) record(w *Writes, at bson.Timestamp) {
	if at.IsZero() || w == nil {
		return
	}
	if e.m == nil {
		e.m = make(map[echoKey]echoWrite)
	}
	for _, uw := range w.Users {
		for _, f := range uw.Stats.Fields() {
			t, data, err := bson.MarshalValue(f.Value)
			if err != nil {
				continue // not reached: Fields holds integers and an array of them
			}
			e.m[echoKey{coll: materialize.CollUser, user: uw.User, path: f.Key}] = echoWrite{value: encodedValue(t, data), at: at}
		}
	}
	for _, ew := range w.Entries {
		if !plainComponent(ew.User) || !plainComponent(ew.ProblemKey) {
			// The path would not name the entry unambiguously (and
			// the MongoDB adapter writes it by a pipeline, whose
			// event may name other paths): never skipped.
			continue
		}
		path := materialize.FieldStudentStatus + "." + ew.User + "." + ew.ProblemKey
		e.m[echoKey{coll: materialize.CollHomework, hw: ew.Homework, path: path}] = echoWrite{
			value: encodedValue(bson.TypeEmbeddedDocument, ew.Entry.AppendBSON(nil)), at: at}
	}
}

// plainComponent reports whether s is one component of a dotted path
// that names a field literally.
func plainComponent(s string) bool {
	return s != "" && !strings.Contains(s, ".") && !strings.HasPrefix(s, "$")
}

// matches reports whether ev is the echo of a recorded write: the rule
// (a), (b), (c) above.
func (e *echoes) matches(ev Event) bool {
	c := ev.Change
	if len(e.m) == 0 || c.Op != materialize.OpUpdate || len(c.Fields) == 0 || ev.ClusterTime.IsZero() {
		return false
	}
	k := echoKey{coll: c.Collection}
	switch c.Collection {
	case materialize.CollUser:
		k.user = c.UserID
	case materialize.CollHomework:
		k.hw = c.HomeworkID
	default:
		return false
	}
	for _, f := range c.Fields {
		if !DerivedPath(c.Collection, f) {
			return false // (a)
		}
		v, ok := valueOf(ev.Values, f)
		if !ok {
			return false // (a): a removed or truncated path, or no value shipped
		}
		k.path = f
		w, ok := e.m[k]
		if !ok || w.at.Before(ev.ClusterTime) { // (c)
			return false
		}
		if len(w.value) != 1+len(v.Value) || w.value[0] != byte(v.Type) || !bytes.Equal(w.value[1:], v.Value) { // (b)
			return false
		}
	}
	return true
}

func valueOf(vals []PathValue, path string) (bson.RawValue, bool) {
	for _, v := range vals {
		if v.Path == path {
			return v.Value, true
		}
	}
	return bson.RawValue{}, false
}

// prune drops the records of writes acknowledged before t, the cluster
// time of an event the stream delivered: the stream's later events are
// at t or after it, so (c) fails for every one of them.
func (e *echoes) prune(t bson.Timestamp) {
	for k, w := range e.m {
		if w.at.Before(t) {
			delete(e.m, k)
		}
	}
}

// reset drops every record.
func (e *echoes) reset() { clear(e.m) }

// len is the number of paths recorded.
func (e *echoes) len() int { return len(e.m) }
