package memstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
)

// Clone returns a deep copy of the store's data (documents, oplog, key
// index, checkpoint, lease), without its hooks (Fail, Clock) or counters:
// the explorer recovers on a copy to check a state without changing it.
func (s *Store) Clone() *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := New()
	for coll, m := range s.colls {
		c.colls[coll] = maps.Clone(m) // documents are never modified in place
	}
	for coll, o := range s.order {
		c.order[coll] = slices.Clone(o)
	}
	c.oplog = slices.Clone(s.oplog)
	c.own = slices.Clone(s.own)
	c.horizon = s.horizon
	for id, ps := range s.keys {
		c.keys[id] = slices.Clone(ps)
	}
	if s.cp != nil {
		cp := *s.cp
		c.cp = &cp
	}
	if s.lease != nil {
		l := *s.lease
		c.lease = &l
	}
	c.DropOwnEvents = s.DropOwnEvents
	return c
}

// Fingerprint writes to w everything of the store's data that decides
// what the engine does next: the documents, the oplog from its horizon
// and which of its events are echoes (and whether streams drop those), the key index and the checkpoint's
// position and epoch (not its times nor owner, nor the lease: the caller
// renders those relative to its clock and instances).
func (s *Store) Fingerprint(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n [8]byte
	num := func(v int64) {
		binary.LittleEndian.PutUint64(n[:], uint64(v))
		_, _ = w.Write(n[:])
	}
	for _, coll := range []string{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem, materialize.CollUser} {
		num(int64(len(s.order[coll])))
		for _, k := range s.order[coll] {
			num(int64(len(s.colls[coll][k])))
			_, _ = w.Write(s.colls[coll][k])
		}
	}
	if s.DropOwnEvents {
		num(1)
	} else {
		num(0)
	}
	num(int64(s.horizon))
	num(int64(len(s.oplog)))
	for i := s.horizon; i < len(s.oplog); i++ {
		_, _ = w.Write(s.oplog[i])
		if s.own[i] {
			num(1)
		} else {
			num(0)
		}
	}
	ids := slices.SortedFunc(maps.Keys(s.keys), func(a, b bson.ObjectID) int { return slices.Compare(a[:], b[:]) })
	for _, id := range ids {
		_, _ = w.Write(id[:])
		_, _ = fmt.Fprint(w, s.keys[id])
	}
	if s.cp != nil {
		num(int64(CheckpointPosition(*s.cp)))
		num(s.cp.Epoch)
		if len(s.cp.Token) == 0 {
			num(1)
		} else {
			num(0)
		}
	}
}

// CheckpointPosition is how many oplog events cp covers: a stream opened
// at cp delivers the events after that many (-1: cp names no position).
func CheckpointPosition(cp resume.Checkpoint) int {
	if len(cp.Token) > 0 {
		seq, err := tokenSeq(cp.Token)
		if err != nil {
			return -1
		}
		return seq
	}
	if !cp.StartAt.IsZero() {
		return seqAt(cp.StartAt) - 1
	}
	return -1
}
