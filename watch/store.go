package watch

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// The interfaces below are what the engine needs from a database. The
// mongodb package implements them on a MongoDB replica set, memstore in
// memory (tests and simulation); internal/storetest checks both against
// one suite. Every method takes sets of keys so that one batch costs one
// round trip per kind of read.

// readAfterKey is the context key of WithReadAfter.
type readAfterKey struct{}

// WithReadAfter returns ctx carrying t, the cluster time of the last
// change event of the batch whose recomputation reads under it: a store's
// reads must reflect at least every write up to t (MongoDB: a causally
// consistent session whose operationTime is t, i.e. readConcern
// afterClusterTime t). A zero t leaves ctx unchanged.
func WithReadAfter(ctx context.Context, t bson.Timestamp) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, readAfterKey{}, t)
}

// ReadAfter returns the cluster time WithReadAfter put in ctx; ok is false
// when there is none.
func ReadAfter(ctx context.Context) (t bson.Timestamp, ok bool) {
	t, ok = ctx.Value(readAfterKey{}).(bson.Timestamp)
	return t, ok
}

// Source reads the source documents recomputation needs. Reads decide
// writes, so implementations read majority-committed data (a value read
// from a write later rolled back would never be corrected: the rollback
// emits no change event), and no older than ReadAfter(ctx) when set.
type Source interface {
	// Submissions returns every submission of the named users and of the
	// named pairs (the union; order unspecified). Documents that cannot be
	// decoded are returned in bad and otherwise ignored.
	Submissions(ctx context.Context, users []string, pairs []materialize.Pair) (subs []materialize.Submission, bad []*materialize.DecodeError, err error)
	// UserStats returns the derived user fields of each named user
	// (materialize.DeriveUser over every submission of the user, zero
	// values for a user without one), counted where the submissions are
	// so that a landing does not read a user's whole history. Submissions
	// of a named user that cannot be decoded are returned in bad.
	UserStats(ctx context.Context, users []string) (stats map[string]materialize.UserStats, bad []*materialize.DecodeError, err error)
	// SubmissionsByID returns the named submissions that still exist.
	SubmissionsByID(ctx context.Context, ids []bson.ObjectID) (subs []materialize.Submission, bad []*materialize.DecodeError, err error)
	// Problems returns the named problems that exist.
	Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error)
	// ProblemsListing returns, for each named homework, the problems whose
	// homeworks list contains it.
	ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error)
	// Homeworks returns the named homeworks that exist. Students and
	// Stored are restricted to the named users (every user when users is
	// nil), so a large homework is never read whole for one student.
	Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*HomeworkDoc, []*materialize.DecodeError, error)
	// EntryKeys returns the (user, problem key) of every entry of each
	// named homework: key names only, never entry values. A studentStatus,
	// or a user's part of it, that is not a document is reported in bad.
	EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (keys map[bson.ObjectID][]EntryRef, bad []*materialize.DecodeError, err error)
	// EntriesForProblems returns, for each named problem, every
	// (homework, user) holding an entry with key str(problem), in any
	// homework whether or not the problem lists it.
	EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error)
	// Users returns the stored derived fields of the named users that have
	// a document; OK is false where those fields are missing or unreadable.
	Users(ctx context.Context, names []string) (map[string]StoredUser, error)
	// Read returns every part r names, each exactly as the method its
	// field names would (ReadSeparately is that definition), in one round
	// trip where it can: a landing's derivation needs all of them at once,
	// and at low landing rates round trips, not bytes, are its cost.
	Read(ctx context.Context, r *Reads) (*ReadResult, error)
}

// Reads names what one derivation reads. An empty part is not read.
type Reads struct {
	Pairs     []materialize.Pair // Submissions(nil, Pairs)
	Users     []string           // UserStats(Users) and Users(Users)
	Problems  []int64            // Problems(Problems)
	Homeworks []bson.ObjectID    // Homeworks(Homeworks, HomeworkUsers)
	// HomeworkUsers restricts the homeworks' entries as Homeworks' users
	// does (nil: every user).
	HomeworkUsers []string
}

// ReadResult holds each part of a Read as the method its Reads field
// names returns it; a part not asked for is nil.
type ReadResult struct {
	Submissions    []materialize.Submission
	SubmissionsBad []*materialize.DecodeError
	Stats          map[string]materialize.UserStats
	StatsBad       []*materialize.DecodeError
	Users          map[string]StoredUser
	Problems       map[int64]*materialize.Problem
	ProblemsBad    []*materialize.DecodeError
	Homeworks      map[bson.ObjectID]*HomeworkDoc
	HomeworksBad   []*materialize.DecodeError
}

// PartReader is the part of Source that ReadSeparately composes.
type PartReader interface {
	Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error)
	UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error)
	Users(ctx context.Context, names []string) (map[string]StoredUser, error)
	Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error)
	Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*HomeworkDoc, []*materialize.DecodeError, error)
}

// ReadSeparately answers r with one call per part: the definition of
// Source.Read, and its implementation where a store has no cheaper one
// (or a part too large for one round trip).
func ReadSeparately(ctx context.Context, src PartReader, r *Reads) (*ReadResult, error) {
	out := &ReadResult{}
	var err error
	if len(r.Pairs) > 0 {
		if out.Submissions, out.SubmissionsBad, err = src.Submissions(ctx, nil, r.Pairs); err != nil {
			return nil, fmt.Errorf("read submissions: %w", err)
		}
	}
	if len(r.Users) > 0 {
		if out.Stats, out.StatsBad, err = src.UserStats(ctx, r.Users); err != nil {
			return nil, fmt.Errorf("read user stats: %w", err)
		}
		if out.Users, err = src.Users(ctx, r.Users); err != nil {
			return nil, fmt.Errorf("read users: %w", err)
		}
	}
	if len(r.Problems) > 0 {
		if out.Problems, out.ProblemsBad, err = src.Problems(ctx, r.Problems); err != nil {
			return nil, fmt.Errorf("read problems: %w", err)
		}
	}
	if len(r.Homeworks) > 0 {
		if out.Homeworks, out.HomeworksBad, err = src.Homeworks(ctx, r.Homeworks, r.HomeworkUsers); err != nil {
			return nil, fmt.Errorf("read homeworks: %w", err)
		}
	}
	return out, nil
}

// HomeworkDoc is a homework's configuration and the stored values of the
// entries that were asked for (user → problem key → value).
type HomeworkDoc struct {
	materialize.Homework
	Stored map[string]map[string]bson.RawValue
}

// EntryRef names one studentStatus entry of a homework.
type EntryRef struct {
	User       string
	ProblemKey string
}

// StoredUser is a user document's stored derived fields.
type StoredUser struct {
	Stats materialize.UserStats
	OK    bool
}

// Writer applies derived values. Implementations write only the derived
// fields, only to documents that exist and entries that exist (the
// existence is part of the update's filter), never upsert, and apply all of
// one call in as few round trips as they can (bulk writes).
type Writer interface {
	// Apply writes w. at is the write's operationTime when it is known
	// (zero otherwise): every write of w is at or before it in the
	// oplog, and every read of the store after Apply returns is causally
	// after it (the echo rule, see echoes, depends on both).
	Apply(ctx context.Context, w *Writes) (at bson.Timestamp, err error)
}

// Writes is one batch of derived values that differ from what is stored.
type Writes struct {
	Users   []UserWrite
	Entries []EntryWrite
}

// UserWrite sets a user's derived fields.
type UserWrite struct {
	User  string
	Stats materialize.UserStats
}

// EntryWrite replaces studentStatus.<User>.<ProblemKey> of Homework.
type EntryWrite struct {
	Homework   bson.ObjectID
	User       string
	ProblemKey string
	Entry      materialize.Entry
}

// Len is the number of documents' fields the batch writes.
func (w *Writes) Len() int { return len(w.Users) + len(w.Entries) }

// KeyIndex is the materializer's own record of each submission's
// (user, problem): a delete event carries only _id, and MongoDB before 6.0
// has no pre-images, so the pair is looked up here. Records only grow (a
// submission moved to another pair keeps both), so replaying a batch after a
// crash still finds every pair it touched.
type KeyIndex interface {
	LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error)
	RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error
}

// Scanner reads whole collections for a rebuild.
type Scanner interface {
	// ScanSubmissions calls fn for every submission in (user, problem,
	// timestamp, _id) order, and bad for each that cannot be decoded.
	ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error
	// AllProblems and AllHomeworks return every document (homeworks with
	// every entry's stored value); AllUsers every user's stored fields.
	AllProblems(ctx context.Context) ([]*materialize.Problem, []*materialize.DecodeError, error)
	AllHomeworks(ctx context.Context) ([]*HomeworkDoc, []*materialize.DecodeError, error)
	AllUsers(ctx context.Context) (map[string]StoredUser, []*materialize.DecodeError, error)
	// ClusterTime returns the current cluster time, read before a scan so
	// that a stream started there misses nothing that happened during it:
	// every write at or before it must be visible to the scan's reads
	// (MongoDB: the majority commit point, since the reads are majority).
	ClusterTime(ctx context.Context) (bson.Timestamp, error)
}

// RebuildStore is what Rebuild needs: the scans, the writes and the key
// index, no Source reads.
type RebuildStore interface {
	Scanner
	Writer
	KeyIndex
}

// Store is everything the engine needs from one database: Recompute
// reads a Source and a KeyIndex, Rebuild a RebuildStore.
type Store interface {
	Source
	Writer
	KeyIndex
	Scanner
}
