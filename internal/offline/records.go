package offline

import (
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// record is one submission, compactly (40 bytes): what
// materialize.Submission holds, with the user as an index into the
// interned names and two flags in its top bits. Status and score are
// int32 as Back-End writes them; a submission with either outside int32
// keeps both in state.wide, indexed by status (flagWide).
type record struct {
	id        bson.ObjectID
	user      uint32 // interned user id | flagHandwritten | flagWide
	problem   int64
	timestamp int64
	status    int32
	score     int32
}

const (
	flagHandwritten = 1 << 31
	flagWide        = 1 << 30
	// maxUsers bounds the interned user ids (below the flags).
	maxUsers = 1 << 30
)

// uid is the record's interned user id.
func (r *record) uid() uint32 { return r.user &^ (flagHandwritten | flagWide) }

// wideValues are the status and score of a submission with either outside
// int32.
type wideValues struct{ status, score int64 }

// newRecord packs submission s of user id uid, adding its status and score
// to wide when they do not fit the record.
func newRecord(s *materialize.Submission, uid uint32, wide *[]wideValues) (record, error) {
	r := record{id: s.ID, user: uid, problem: s.Problem, timestamp: s.Timestamp, status: int32(s.Status), score: int32(s.Score)}
	if s.Handwritten {
		r.user |= flagHandwritten
	}
	if int64(r.status) != s.Status || int64(r.score) != s.Score {
		if len(*wide) > math.MaxInt32 {
			return r, errors.New("more than 2^31 submissions with a status or score outside int32")
		}
		r.user |= flagWide
		r.status, r.score = int32(len(*wide)), 0
		*wide = append(*wide, wideValues{s.Status, s.Score})
	}
	return r, nil
}

// submission unpacks r, a record of user name.
func (r *record) submission(name string, wide []wideValues) materialize.Submission {
	s := materialize.Submission{ID: r.id, User: name, Problem: r.problem, Handwritten: r.user&flagHandwritten != 0,
		Timestamp: r.timestamp, Status: int64(r.status), Score: int64(r.score)}
	if r.user&flagWide != 0 {
		w := wide[r.status]
		s.Status, s.Score = w.status, w.score
	}
	return s
}

// bucketUserBits sizes the buckets the records are read into: 256 users
// each, about 13k records (700 kB) for 50 submissions per user, so that
// ordering a bucket stays in the processor's caches.
const bucketUserBits = 8

// blockBits sizes the blocks of a bucket: appending never copies what was
// read (no doubling of a large slice).
const blockBits = 12

// records is an append-only sequence of records in blocks of 1<<blockBits,
// kept outside the Go heap (offHeap).
type records struct {
	blocks [][]record
	frees  []func()
	n      int
}

func (rs *records) add(r record) error {
	if rs.n>>blockBits == len(rs.blocks) {
		b, free, err := offHeap[record](1 << blockBits)
		if err != nil {
			return fmt.Errorf("submission records: %w", err)
		}
		rs.blocks = append(rs.blocks, b[:0])
		rs.frees = append(rs.frees, free)
	}
	b := &rs.blocks[len(rs.blocks)-1]
	*b = append(*b, r)
	rs.n++
	return nil
}

func (rs *records) at(i uint32) *record {
	return &rs.blocks[i>>blockBits][i&(1<<blockBits-1)]
}

// free releases every block; the records are unusable afterwards.
func (rs *records) free() {
	for _, f := range rs.frees {
		f()
	}
	rs.blocks, rs.frees, rs.n = nil, nil, 0
}

// buckets holds the records by user id: bucket i the users whose id>>bits
// is i. Reading into them directly orders the records by user range
// without a second pass over them.
type buckets struct {
	bits       uint
	b          []records
	n          int
	pmin, pmax int64 // the range of the records' problem ids
}

func (bs *buckets) add(r record) error {
	i := int(r.uid() >> bs.bits)
	for i >= len(bs.b) {
		bs.b = append(bs.b, records{})
	}
	if bs.n == 0 {
		bs.pmin, bs.pmax = r.problem, r.problem
	}
	bs.pmin, bs.pmax = min(bs.pmin, r.problem), max(bs.pmax, r.problem)
	bs.n++
	return bs.b[i].add(r)
}

// free releases every bucket.
func (bs *buckets) free() {
	for i := range bs.b {
		bs.b[i].free()
	}
}
