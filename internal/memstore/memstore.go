// Package memstore is an in-memory database for the materializer: the four
// Back-End collections as raw BSON, an oplog of change events shaped as
// watch.Pipeline projects them, the key index, the checkpoint and the
// lease. It implements watch.Store, watch.Feed, resume.Store and
// resume.LeaseStore, so the engine runs unchanged on it in tests, in the
// deterministic simulation (with injected failures: Store.Fail, a lost
// oplog: TruncateOplog) and in the benchmarks (cmd/onlinebench). It is not
// linked into the materializer binary: the offline commands stream a dump
// (internal/offline, explain.ReadDump) instead of loading it here. Its
// behaviour is that of the MongoDB adapter, checked by the same suite
// (internal/storetest).
package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// ErrInjected is the error an injected failure returns.
var ErrInjected = errors.New("memstore: injected failure")

// Store is the in-memory database. The zero value is not usable; call New.
// All methods are safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	colls map[string]map[string]bson.Raw // collection → key (see docKey) → document
	order map[string][]string            // insertion order of keys, for stable scans
	subs  *subIndex                      // the submissions by user and by pair; nil until a read needs it

	oplog   []bson.Raw // change events; event i has cluster time i+1
	own     []bool     // own[i]: event i was emitted by Apply (an echo of a derived write)
	horizon int        // events before this index were truncated (history lost)

	keys  map[bson.ObjectID][]materialize.Pair
	cp    *resume.Checkpoint
	lease *resume.Lease
	saves []SaveRecord // successful checkpoint saves, for invariants

	// Fail, when set, is called before every operation with its name
	// ("read", "write.user", "write.entry", "keys.record", "checkpoint.save",
	// "stream.next", ...); a non-nil error aborts the operation with it.
	// Writes of one Apply call fail one at a time, so a failure can land
	// between writes of one batch.
	Fail func(op string) error
	// Clock is the server's clock, which alone decides lease expiry (as
	// MongoDB's $$NOW does); time.Now when nil. Simulations share a fake
	// one with their instances or skew it from theirs.
	Clock func() time.Time
	// DropOwnEvents, read when a stream opens, makes that stream skip
	// every event Apply emitted (the echoes of the engine's own derived
	// writes), as the most aggressive echo skipping would: a test of
	// convergence that must not depend on them.
	DropOwnEvents bool
	stats         Stats
}

func (s *Store) clock() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

// Stats counts operations, for coalescing and cost assertions.
type Stats struct {
	Reads        int // source read calls (one per method call)
	WriteCalls   int // Apply calls
	UserWrites   int // user documents changed
	EntryWrites  int // entries changed
	NoopWrites   int // writes whose value equalled the stored one
	KeyRecords   int
	Saves        int
	FencedSaves  int
	EventsServed int
	OwnDropped   int // events Apply emitted that a DropOwnEvents stream skipped
}

// New returns an empty store.
func New() *Store {
	s := &Store{
		colls: make(map[string]map[string]bson.Raw),
		order: make(map[string][]string),
		keys:  make(map[bson.ObjectID][]materialize.Pair),
	}
	for _, c := range []string{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem, materialize.CollUser} {
		s.colls[c] = make(map[string]bson.Raw)
	}
	return s
}

var (
	_ watch.Store       = (*Store)(nil)
	_ watch.Feed        = (*Store)(nil)
	_ resume.Store      = (*Store)(nil)
	_ resume.LeaseStore = (*Store)(nil)
)

// Stats returns the operation counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// ResetStats zeroes the operation counters.
func (s *Store) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = Stats{}
}

func (s *Store) fail(op string) error {
	if s.Fail != nil {
		if err := s.Fail(op); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil
}

// docKey renders an _id value as a map key (type and bytes).
func docKey(v bson.RawValue) string { return string(rune(v.Type)) + string(v.Value) }

func idOf(doc bson.Raw) (bson.RawValue, error) {
	v, err := doc.LookupErr("_id")
	if err != nil {
		return v, fmt.Errorf("document without _id")
	}
	return v, nil
}

// ---- source mutations (what Back-End does), each emitting a change event ----

// Insert adds a document and emits an insert event.
func (s *Store) Insert(coll string, doc bson.Raw) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := idOf(doc)
	if err != nil {
		return err
	}
	k := docKey(id)
	if _, ok := s.colls[coll][k]; ok {
		return fmt.Errorf("insert %s %s: duplicate key", coll, id)
	}
	s.put(coll, k, doc)
	s.emit("insert", coll, id, doc, nil)
	return nil
}

// Load adds documents without emitting events (the state before the
// stream starts, e.g. a dump).
func (s *Store) Load(coll string, docs ...bson.Raw) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, doc := range docs {
		id, err := idOf(doc)
		if err != nil {
			return fmt.Errorf("load %s: %w", coll, err)
		}
		s.put(coll, docKey(id), doc)
	}
	return nil
}

// Update stores doc (same _id) and emits an update event naming fields,
// the dotted paths the update changed, as MongoDB's updateDescription
// would.
func (s *Store) Update(coll string, doc bson.Raw, fields []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := idOf(doc)
	if err != nil {
		return err
	}
	k := docKey(id)
	if _, ok := s.colls[coll][k]; !ok {
		return fmt.Errorf("update %s %s: no such document", coll, id)
	}
	s.put(coll, k, doc)
	s.emit("update", coll, id, doc, fields)
	return nil
}

// Replace stores doc (same _id) and emits a replace event.
func (s *Store) Replace(coll string, doc bson.Raw) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := idOf(doc)
	if err != nil {
		return err
	}
	k := docKey(id)
	if _, ok := s.colls[coll][k]; !ok {
		return fmt.Errorf("replace %s %s: no such document", coll, id)
	}
	s.put(coll, k, doc)
	s.emit("replace", coll, id, doc, nil)
	return nil
}

// Delete removes the document with _id id and emits a delete event (which
// carries only the _id).
func (s *Store) Delete(coll string, id any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, data, err := bson.MarshalValue(id)
	if err != nil {
		return err
	}
	v := bson.RawValue{Type: t, Value: data}
	k := docKey(v)
	if _, ok := s.colls[coll][k]; !ok {
		return fmt.Errorf("delete %s %s: no such document", coll, v)
	}
	delete(s.colls[coll], k)
	s.order[coll] = slices.DeleteFunc(s.order[coll], func(x string) bool { return x == k })
	if coll == materialize.CollSubmission && s.subs != nil {
		s.subs.drop(k, true)
	}
	s.emit("delete", coll, v, nil, nil)
	return nil
}

// Get returns the document with _id id, or nil.
func (s *Store) Get(coll string, id any) bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, data, err := bson.MarshalValue(id)
	if err != nil {
		return nil
	}
	return s.colls[coll][docKey(bson.RawValue{Type: t, Value: data})]
}

// Docs returns every document of the four source collections.
func (s *Store) Docs() materialize.Docs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return materialize.Docs{
		Users:       s.all(materialize.CollUser),
		Problems:    s.all(materialize.CollProblem),
		Homeworks:   s.all(materialize.CollHomework),
		Submissions: s.all(materialize.CollSubmission),
	}
}

// Collection returns every document of coll in insertion order.
func (s *Store) Collection(coll string) []bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all(coll)
}

func (s *Store) all(coll string) []bson.Raw {
	out := make([]bson.Raw, 0, len(s.order[coll]))
	for _, k := range s.order[coll] {
		out = append(out, s.colls[coll][k])
	}
	return out
}

func (s *Store) put(coll, k string, doc bson.Raw) {
	s.putOwned(coll, k, slices.Clone(doc))
}

// putOwned stores doc, which the store now owns (no copy).
func (s *Store) putOwned(coll, k string, doc bson.Raw) {
	m := s.colls[coll]
	if m == nil {
		m = make(map[string]bson.Raw)
		s.colls[coll] = m
	}
	if _, ok := m[k]; !ok {
		s.order[coll] = append(s.order[coll], k)
	}
	m[k] = doc
	if coll == materialize.CollSubmission && s.subs != nil {
		s.subs.put(k, doc)
	}
}

// emit appends a change event shaped like watch.Pipeline's output: an
// insert's or replace's fullDocument reduced to user and problem, an
// update's changedFields and moved, the new values of user and problem
// when fields names them (doc is then the updated document).
func (s *Store) emit(op, coll string, id bson.RawValue, doc bson.Raw, fields []string) {
	s.emitOwn(op, coll, id, doc, fields, false)
}

func (s *Store) emitOwn(op, coll string, id bson.RawValue, doc bson.Raw, fields []string, own bool) {
	seq := len(s.oplog) + 1
	ev := bson.D{
		{Key: "_id", Value: token(seq)},
		{Key: "operationType", Value: op},
		{Key: "clusterTime", Value: clusterTime(seq)},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: coll}}},
		{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}},
	}
	if doc != nil && op != "update" {
		fd := bson.D{}
		for _, f := range []string{"user", "problem"} {
			if v, err := doc.LookupErr(f); err == nil {
				fd = append(fd, bson.E{Key: f, Value: v})
			}
		}
		ev = append(ev, bson.E{Key: "fullDocument", Value: fd})
	}
	if op == "update" {
		if fields == nil {
			fields = []string{}
		}
		uf := bson.D{}
		for _, f := range []string{"user", "problem"} {
			if !slices.Contains(fields, f) || doc == nil {
				continue
			}
			if v, err := doc.LookupErr(f); err == nil { // absent: removed ($unset)
				uf = append(uf, bson.E{Key: f, Value: v})
			}
		}
		if len(uf) > 0 {
			ev = append(ev, bson.E{Key: "moved", Value: uf})
		}
		if coll == materialize.CollSubmission || s.namesFit(coll, id, fields) {
			ev = append(ev, bson.E{Key: "changedFields", Value: fields})
		}
		if coll == materialize.CollUser || coll == materialize.CollHomework {
			if vals, ok := s.derivedValues(coll, id, fields); ok {
				ev = append(ev, bson.E{Key: "derivedValues", Value: vals})
			}
		}
	}
	raw, err := bson.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("memstore: marshal event: %v", err)) // values above always encode
	}
	s.oplog = append(s.oplog, raw)
	s.own = append(s.own, own)
}

// derivedValues is watch.Pipeline's derivedValues of an update of the
// document of coll with _id id that changed fields: [{k: path, v: its
// value now}] for each path that is a derived path (watch.DerivedPath).
// The values are read from the stored document (the update's result),
// dotted paths walking documents and, by index, arrays, as the server's
// updatedFields would show them; a field the document no longer holds
// was removed. ok is false, as the pipeline ships none, when the update
// set more than watch.MaxDerivedValues fields.
func (s *Store) derivedValues(coll string, id bson.RawValue, fields []string) (vals bson.A, ok bool) {
	vals = bson.A{}
	doc := s.colls[coll][docKey(id)]
	updated := 0
	for _, f := range fields {
		v, found := lookupPath(doc, f)
		if !found {
			continue // removed
		}
		updated++
		if watch.DerivedPath(coll, f) {
			vals = append(vals, bson.D{{Key: "k", Value: f}, {Key: "v", Value: v}})
		}
	}
	if updated > watch.MaxDerivedValues {
		return nil, false
	}
	return vals, true
}

// namesFit is watch.Pipeline's test for shipping an update's changed
// fields' names: the most they can outgrow the fields the update set
// (12 bytes less each value's size, summed) is at most
// watch.MaxNamesExcess.
func (s *Store) namesFit(coll string, id bson.RawValue, fields []string) bool {
	doc := s.colls[coll][docKey(id)]
	excess := 0
	for _, f := range fields {
		if v, found := lookupPath(doc, f); found {
			excess += 12 - len(v.Value)
		}
	}
	return excess <= watch.MaxNamesExcess
}

// lookupPath returns the value at dotted path in doc.
func lookupPath(doc bson.Raw, path string) (bson.RawValue, bool) {
	v := bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: doc}
	for _, p := range strings.Split(path, ".") {
		d, ok := v.DocumentOK()
		if !ok {
			a, isArray := v.ArrayOK()
			if !isArray {
				return bson.RawValue{}, false
			}
			d = bson.Raw(a)
		}
		next, err := d.LookupErr(p)
		if err != nil {
			return bson.RawValue{}, false
		}
		v = next
	}
	return v, true
}

// EmitRaw appends an arbitrary change event document (for bad-input
// tests); its _id is replaced by the next resume token.
func (s *Store) EmitRaw(ev bson.D) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := len(s.oplog) + 1
	out := bson.D{{Key: "_id", Value: token(seq)}}
	for _, e := range ev {
		if e.Key != "_id" {
			out = append(out, e)
		}
	}
	raw, err := bson.Marshal(out)
	if err != nil {
		panic(fmt.Sprintf("memstore: marshal event: %v", err))
	}
	s.oplog = append(s.oplog, raw)
	s.own = append(s.own, false)
}

// TruncateOplog drops every event but the latest, as when the oplog rolls
// over: resuming from an earlier token then fails with
// watch.ErrHistoryLost, while starting at the current cluster time works.
func (s *Store) TruncateOplog() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.horizon = max(len(s.oplog)-1, 0)
}

// RawEvents returns a copy of every event emitted so far, as the stream
// decodes them (the shape of watch.Pipeline's output), oldest first.
func (s *Store) RawEvents() []bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]bson.Raw, len(s.oplog))
	for i, r := range s.oplog {
		out[i] = slices.Clone(r)
	}
	return out
}

// OplogLen is the number of events emitted so far.
func (s *Store) OplogLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.oplog)
}

// Cluster times: event seq (1-based) happened at Unix second
// clusterBase + 60*seq, so cluster times look like real ones (lag metrics)
// and a start time some seconds early re-delivers at most the latest event.
const clusterBase = 1_700_000_000

func clusterTime(seq int) bson.Timestamp {
	return bson.Timestamp{T: uint32(clusterBase + 60*seq), I: 1}
}

// seqAt is the first event seq at or after cluster time t.
func seqAt(t bson.Timestamp) int {
	d := int64(t.T) - clusterBase
	if d <= 0 {
		return 1
	}
	seq := int((d + 59) / 60)
	if int64(seq)*60+clusterBase == int64(t.T) && t.I > 1 {
		seq++
	}
	return seq
}

// token encodes an oplog position as a resume token: {_data: hex(seq)}.
func token(seq int) bson.D {
	return bson.D{{Key: "_data", Value: fmt.Sprintf("%016x", seq)}}
}

func tokenSeq(t bson.Raw) (int, error) {
	s, ok := t.Lookup("_data").StringValueOK()
	if !ok {
		return 0, fmt.Errorf("memstore: resume token without _data")
	}
	n, err := strconv.ParseInt(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("memstore: bad resume token %q", s)
	}
	return int(n), nil
}

// ---- watch.Feed ----

// Open implements watch.Feed. The stream delivers events after at.Token,
// or from cluster time at.StartAt inclusive, or from now.
func (s *Store) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("stream.open"); err != nil {
		return nil, streamFault(err)
	}
	next := len(s.oplog) // index of the next event to deliver
	switch {
	case len(at.Token) > 0:
		seq, err := tokenSeq(at.Token)
		if err != nil {
			return nil, watch.WithClass(watch.ResumeImpossible, err) // InvalidResumeToken
		}
		next = seq
	case !at.StartAt.IsZero():
		next = seqAt(at.StartAt) - 1
	}
	if next < s.horizon {
		return nil, watch.WithClass(watch.HistoryLost, fmt.Errorf("resume at event %d, oplog starts at %d: %w", next, s.horizon, watch.ErrHistoryLost))
	}
	return &stream{s: s, next: next, dropOwn: s.DropOwnEvents}, nil
}

// streamFault marks an injected stream failure transient (a network
// error, a step-down) unless the injected error carries its own class.
func streamFault(err error) error {
	if watch.ClassOf(err) != watch.Unclassified {
		return err
	}
	return watch.WithClass(watch.Transient, err)
}

type stream struct {
	s       *Store
	next    int
	dropOwn bool // skip the events Apply emitted (Store.DropOwnEvents)
}

func (st *stream) Next(ctx context.Context) (watch.Event, bool, error) {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return watch.Event{}, false, err
	}
	if err := s.fail("stream.next"); err != nil {
		return watch.Event{}, false, streamFault(err)
	}
	for st.dropOwn && st.next < len(s.oplog) && s.own[st.next] {
		st.next++
		s.stats.OwnDropped++
	}
	if st.next >= len(s.oplog) {
		return watch.Event{}, false, nil
	}
	raw := s.oplog[st.next]
	st.next++
	s.stats.EventsServed++
	ev, err := watch.DecodeEvent(raw)
	if err != nil {
		return ev, true, fmt.Errorf("%w: %v", watch.ErrBadEvent, err)
	}
	return ev, true, nil
}

// Pending is the number of events the stream would deliver now, without
// waiting: what one getMore's reply would hold (the cost benchmark's model
// of replies, internal/storecost).
func (st *stream) Pending() int {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := st.next; i < len(s.oplog); i++ {
		if !(st.dropOwn && s.own[i]) {
			n++
		}
	}
	return n
}

func (st *stream) ResumeToken() bson.Raw {
	b, _ := bson.Marshal(token(st.next))
	return b
}

func (st *stream) Close(context.Context) error { return nil }
