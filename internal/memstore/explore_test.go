package memstore

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// fingerprintCovers names every field of Store and of resume.Checkpoint
// and, for each, either the mutation in TestFingerprint that shows
// Fingerprint covers it, or why Fingerprint leaves it out (the explorer
// prunes states whose fingerprints are equal: a field left out must not
// decide what the engine does next). A field added to either struct
// fails TestFingerprintCoversEveryField until it is named here.
var fingerprintCovers = map[string]string{
	"Store.colls":         "covered: a document",
	"Store.order":         "covered: a document's insertion order",
	"Store.oplog":         "covered: an oplog event",
	"Store.own":           "covered: an echo mark",
	"Store.horizon":       "covered: the history horizon",
	"Store.keys":          "covered: the key index",
	"Store.cp":            "covered: see Checkpoint.*",
	"Store.DropOwnEvents": "covered: streams drop echoes",
	"Store.lease":         "left out: the explorer renders the lease relative to its clock and processes (exploreWorld.stateKey)",
	"Store.mu":            "left out: a lock, no data",
	"Store.subs":          "left out: an index derived from colls, rebuilt on demand",
	"Store.saves":         "left out: the history of saves, read only by tests' invariants",
	"Store.Fail":          "left out: a hook of the caller, not data",
	"Store.Clock":         "left out: a hook of the caller, not data",
	"Store.stats":         "left out: counters, read only by tests",

	"Checkpoint.Token":   "covered: the checkpoint's position",
	"Checkpoint.StartAt": "covered: a start time instead of a token",
	"Checkpoint.Epoch":   "covered: the checkpoint's epoch",
	"Checkpoint.ClusterTime": "left out: written by each save and read by no decision of the engine " +
		"(the lag metric only)",
	"Checkpoint.RebuiltAt":  "left out: a time for operators (status), read by no decision",
	"Checkpoint.CaughtUpAt": "left out: a time for operators (status), read by no decision",
	"Checkpoint.SavedAt":    "left out: a time for operators; the engine's spacing of saves is its own lastSave",
	"Checkpoint.Owner":      "left out: names the process for operators; fencing is by Epoch",
}

func TestFingerprintCoversEveryField(t *testing.T) {
	mtest.FieldsNamed(t, fingerprintCovers, map[string]reflect.Type{"Store.": reflect.TypeFor[Store](), "Checkpoint.": reflect.TypeFor[resume.Checkpoint]()})
}

// fingerprintBase returns a store with every field Fingerprint covers
// set: documents, oplog events with and without echo marks, a key, a
// checkpoint.
func fingerprintBase(t *testing.T) *Store {
	t.Helper()
	s := New()
	s.Clock = func() time.Time { return time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) }
	ctx := context.Background()
	id := oid(1)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	raw := func(d bson.D) bson.Raw {
		b, err := bson.Marshal(d)
		must(err)
		return b
	}
	must(s.Load(materialize.CollUser, raw(bson.D{{Key: "_id", Value: "u1"}, {Key: "submission", Value: int32(0)}})))
	must(s.Insert(materialize.CollSubmission, raw(bson.D{{Key: "_id", Value: id}, {Key: "user", Value: "u1"}, {Key: "problem", Value: int32(1)}})))
	if _, err := s.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "u1", Stats: materialize.UserStats{Submission: 1}}}}); err != nil {
		t.Fatal(err)
	}
	must(s.Insert(materialize.CollSubmission, raw(bson.D{{Key: "_id", Value: oid(2)}, {Key: "user", Value: "u1"}})))
	must(s.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{id: {{User: "u1", Problem: 1}}}))
	if _, ok, err := s.Acquire(ctx, "a", time.Hour); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	b, err := bson.Marshal(token(1))
	must(err)
	must(s.SaveCheckpoint(ctx, resume.Checkpoint{Token: b, Epoch: 1, Owner: "a", SavedAt: time.Unix(5, 0)}))
	if len(s.own) < 2 || !slices.Contains(s.own, true) || !slices.Contains(s.own, false) {
		t.Fatalf("the base store needs echo and source events, own = %v", s.own)
	}
	return s
}

// oid returns a fixed ObjectID (NewObjectID's differ at every call).
func oid(n byte) bson.ObjectID { return bson.ObjectID{11: n} }

// field returns the value of s's field f, exported or not.
func field(s *Store, f reflect.StructField) any {
	v := reflect.ValueOf(s).Elem().FieldByIndex(f.Index)
	return reflect.NewAt(f.Type, unsafe.Pointer(v.UnsafeAddr())).Elem().Interface()
}

func fingerprint(s *Store) []byte {
	var b bytes.Buffer
	s.Fingerprint(&b)
	return b.Bytes()
}

// TestFingerprint: each change to data that decides what the engine does
// next changes the fingerprint; a change to what fingerprintCovers leaves
// out does not.
func TestFingerprint(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, s *Store)
		differ bool
	}{
		{"a document", func(t *testing.T, s *Store) {
			doc, _ := bson.Marshal(bson.D{{Key: "_id", Value: "u1"}, {Key: "submission", Value: int32(7)}})
			if err := s.Update(materialize.CollUser, doc, []string{"submission"}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a document's insertion order", func(t *testing.T, s *Store) {
			o := s.order[materialize.CollSubmission]
			o[0], o[1] = o[1], o[0]
		}, true},
		{"an oplog event", func(t *testing.T, s *Store) { s.oplog[0] = s.oplog[1] }, true},
		{"an echo mark", func(t *testing.T, s *Store) { s.own[0] = !s.own[0] }, true},
		{"the history horizon", func(t *testing.T, s *Store) { s.horizon = 1 }, true},
		{"streams drop echoes", func(t *testing.T, s *Store) { s.DropOwnEvents = true }, true},
		{"the key index", func(t *testing.T, s *Store) {
			for id := range s.keys {
				s.keys[id] = []materialize.Pair{{User: "u2", Problem: 1}}
			}
		}, true},
		{"the checkpoint's position", func(t *testing.T, s *Store) {
			b, _ := bson.Marshal(token(2))
			s.cp.Token = b
		}, true},
		{"the checkpoint's epoch", func(t *testing.T, s *Store) { s.cp.Epoch++ }, true},
		{"a start time instead of a token", func(t *testing.T, s *Store) {
			s.cp.Token, s.cp.StartAt = nil, bson.Timestamp{T: 2}
		}, true},
		{"no checkpoint", func(t *testing.T, s *Store) { s.cp = nil }, true},
		{"the checkpoint's times and owner", func(t *testing.T, s *Store) {
			s.cp.SavedAt, s.cp.RebuiltAt, s.cp.CaughtUpAt, s.cp.Owner = time.Unix(9, 0), time.Unix(9, 0), time.Unix(9, 0), "b"
			s.cp.ClusterTime = bson.Timestamp{T: 9}
		}, false},
		{"the lease", func(t *testing.T, s *Store) { s.lease.Expires = s.lease.Expires.Add(time.Hour) }, false},
		{"the counters", func(t *testing.T, s *Store) { s.stats.Saves += 3 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fingerprintBase(t)
			before := fingerprint(s)
			if again := fingerprint(fingerprintBase(t)); !bytes.Equal(before, again) {
				t.Fatal("two equal stores have different fingerprints")
			}
			tt.change(t, s)
			if got := !bytes.Equal(before, fingerprint(s)); got != tt.differ {
				t.Errorf("after changing %s, the fingerprint changed: %v, want %v", tt.name, got, tt.differ)
			}
		})
	}
}

// TestClone: a clone holds every field Fingerprint covers, equal to the
// original's, and shares nothing the clone's own writes could change.
func TestClone(t *testing.T) {
	s := fingerprintBase(t)
	before := fingerprint(s)
	c := s.Clone()
	for f := range reflect.TypeFor[Store]().Fields() {
		if r := fingerprintCovers["Store."+f.Name]; len(r) < 8 || r[:8] != "covered:" {
			continue
		}
		if a, b := field(s, f), field(c, f); !reflect.DeepEqual(a, b) {
			t.Errorf("the clone's %s differs from the original's", f.Name)
		}
	}
	if !reflect.DeepEqual(s.lease, c.lease) {
		t.Errorf("the clone's lease %+v differs from the original's %+v", c.lease, s.lease)
	}
	if !bytes.Equal(before, fingerprint(c)) {
		t.Fatal("the clone's fingerprint differs from the original's")
	}
	// The clone's writes leave the original alone.
	ctx := context.Background()
	if _, err := c.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "u1", Stats: materialize.UserStats{Submission: 5}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{oid(3): {{User: "u1", Problem: 2}}}); err != nil {
		t.Fatal(err)
	}
	for id := range c.keys {
		c.keys[id] = append(c.keys[id], materialize.Pair{User: "u9", Problem: 9})
	}
	c.own[0] = !c.own[0]
	c.cp.Epoch = 9
	c.lease.Epoch = 9
	c.TruncateOplog()
	if !bytes.Equal(before, fingerprint(s)) {
		t.Error("writes to the clone changed the original's fingerprint")
	}
	if s.lease.Epoch != 1 {
		t.Errorf("writes to the clone changed the original's lease: epoch %d", s.lease.Epoch)
	}
}
