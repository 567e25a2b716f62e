package materialize

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Catalog is the configuration side of the source: every problem and
// homework, decoded. It is small next to the submissions (key sets only,
// no entry values) and is held whole by a full derivation.
type Catalog struct {
	Problems  map[int64]*Problem
	Homeworks map[bson.ObjectID]*Homework
	resolved  map[int64][]*Homework
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{
		Problems:  make(map[int64]*Problem),
		Homeworks: make(map[bson.ObjectID]*Homework),
		resolved:  make(map[int64][]*Homework),
	}
}

// AddProblem adds or replaces a problem.
func (c *Catalog) AddProblem(p Problem) {
	c.Problems[p.ID] = &p
	clear(c.resolved)
}

// AddHomework adds or replaces a homework.
func (c *Catalog) AddHomework(h Homework) {
	c.Homeworks[h.ID] = &h
	clear(c.resolved)
}

// RemoveProblem removes the problem with id, if any.
func (c *Catalog) RemoveProblem(id int64) {
	delete(c.Problems, id)
	clear(c.resolved)
}

// RemoveHomework removes the homework with id, if any.
func (c *Catalog) RemoveHomework(id bson.ObjectID) {
	delete(c.Homeworks, id)
	clear(c.resolved)
}

// Homework returns the homework with id, or nil.
func (c *Catalog) Homework(id bson.ObjectID) *Homework { return c.Homeworks[id] }

// Visited returns the homeworks a submission of problem visits (see
// ResolveHomeworks); nil when the problem does not exist.
func (c *Catalog) Visited(problem int64) []*Homework {
	if hs, ok := c.resolved[problem]; ok {
		return hs
	}
	hs := ResolveHomeworks(c.Problems[problem], c.Homework)
	c.resolved[problem] = hs
	return hs
}

// Sink receives the derived values of a full derivation. User is called
// once for every user that has submissions or was named to Finish; the
// sink decides whether a user document exists to write. Entry is called
// once for every existing studentStatus entry; from a Builder of
// NewBulkBuilder, e borrows the BulkDeriver's buffers: it is valid only
// during the call and a sink keeping it keeps e.Clone().
type Sink interface {
	User(name string, stats UserStats) error
	Entry(homework bson.ObjectID, user, problemKey string, e Entry) error
}

// problemKey is ProblemKey(problem), one string per problem for the
// Builder's life (a group would otherwise allocate one).
func (b *Builder) problemKey(problem int64) string {
	if pk, ok := b.pks[problem]; ok {
		return pk
	}
	pk := ProblemKey(problem)
	b.pks[problem] = pk
	return pk
}

// ErrUngrouped is returned by Builder.Group when a user's groups are not
// contiguous in the input.
var ErrUngrouped = errors.New("submissions not grouped by user")

// Builder is the streaming full derivation: feed it every submission
// grouped by (user, problem), all groups of a user contiguous, then call
// Finish. Memory is bounded by the catalog, the largest group and the
// number of users and pairs, not by the number of submissions.
type Builder struct {
	d    *Deriver
	cat  *Catalog
	sink Sink

	user    string
	started bool
	tally   UserTally
	done    map[string]struct{}
	// covered maps a user to the problems whose groups emitted entries
	// (sorted),
	// so Finish skips a user without any by one lookup per homework user.
	covered map[string][]int64
	pks     map[int64]string // see problemKey

	// PenaltyErrors counts failed penalty evaluations so far.
	PenaltyErrors int
}

// NewBuilder returns a Builder writing to sink.
func NewBuilder(d *Deriver, cat *Catalog, sink Sink) *Builder {
	return &Builder{d: d, cat: cat, sink: sink, done: make(map[string]struct{}), covered: make(map[string][]int64),
		pks: make(map[int64]string)}
}

// NewBulkBuilder returns a Builder deriving with d, writing to sink: the
// entries it gives sink borrow d's buffers (see Sink and BulkDeriver).
func NewBulkBuilder(d *BulkDeriver, cat *Catalog, sink Sink) *Builder {
	return NewBuilder(&d.d, cat, sink)
}

// Group derives one (user, problem) group. subs must all belong to the
// pair (others are ignored) and are sorted in place.
func (b *Builder) Group(user string, problem int64, subs []Submission) error {
	if !b.started || user != b.user {
		if err := b.flushUser(); err != nil {
			return err
		}
		if _, ok := b.done[user]; ok {
			return fmt.Errorf("user %q seen again: %w", user, ErrUngrouped)
		}
		b.user, b.started = user, true
	}
	for i := range subs {
		if subs[i].User == user && subs[i].Problem == problem {
			b.tally.Add(&subs[i])
		}
	}
	res := b.d.Pair(user, problem, subs, b.cat.Visited(problem))
	b.PenaltyErrors += res.PenaltyErrors
	if len(res.Entries) > 0 {
		// Kept sorted: appended in order when groups come sorted.
		c := b.covered[user]
		if i, found := slices.BinarySearch(c, problem); !found {
			b.covered[user] = slices.Insert(c, i, problem)
		}
	}
	if len(res.Entries) == 0 {
		return nil
	}
	pk := b.problemKey(problem)
	for _, he := range res.Entries {
		if err := b.sink.Entry(he.Homework, user, pk, he.Entry); err != nil {
			return err
		}
	}
	return nil
}

func (b *Builder) flushUser() error {
	if !b.started {
		return nil
	}
	b.done[b.user] = struct{}{}
	st := b.tally.Stats()
	b.tally.reset()
	b.started = false
	return b.sink.User(b.user, st)
}

// Finish emits the last user, zero counts for every user in users that had
// no submission, and the start value for every entry no group reached.
func (b *Builder) Finish(users []string) error {
	if err := b.flushUser(); err != nil {
		return err
	}
	for _, u := range users {
		if _, ok := b.done[u]; ok {
			continue
		}
		b.done[u] = struct{}{}
		if err := b.sink.User(u, UserStats{ACProblemIDs: []int64{}}); err != nil {
			return err
		}
	}
	for _, h := range b.cat.Homeworks {
		for u, probs := range h.Students {
			covered := b.covered[u]
			for pk := range probs {
				if len(covered) > 0 && b.reached(h, covered, pk) {
					continue
				}
				if err := b.sink.Entry(h.ID, u, pk, StartEntry()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// reached reports whether a group already emitted entry (h, u, pk), given
// the problems covered of user u.
func (b *Builder) reached(h *Homework, covered []int64, pk string) bool {
	p, ok := ParseProblemKey(pk)
	if _, found := slices.BinarySearch(covered, p); !ok || !found {
		return false
	}
	return slices.Contains(b.cat.Visited(p), h)
}

// Result is a full derivation held in memory.
type Result struct {
	Users         map[string]UserStats
	Entries       map[bson.ObjectID]map[string]map[string]Entry // homework → user → problem key → entry
	PenaltyErrors int
	Malformed     []*DecodeError
}

// User implements Sink.
func (r *Result) User(name string, st UserStats) error {
	r.Users[name] = st
	return nil
}

// Entry implements Sink.
func (r *Result) Entry(h bson.ObjectID, user, pk string, e Entry) error {
	m := r.Entries[h]
	if m == nil {
		m = make(map[string]map[string]Entry)
		r.Entries[h] = m
	}
	if m[user] == nil {
		m[user] = make(map[string]Entry)
	}
	m[user][pk] = e
	return nil
}

// Docs are whole source collections as raw BSON documents.
type Docs struct {
	Users, Problems, Homeworks, Submissions []bson.Raw
}

// Derive is the reference full derivation over documents held in memory:
// it decodes everything (malformed documents are reported in
// Result.Malformed and contribute nothing), groups submissions by
// (user, problem) and runs a Builder. Users lists every user document,
// including those without submissions; users with submissions but no
// document are included too (callers write only existing documents).
func Derive(docs Docs) *Result {
	res := &Result{Users: make(map[string]UserStats), Entries: make(map[bson.ObjectID]map[string]map[string]Entry)}
	cat := NewCatalog()
	for _, raw := range docs.Problems {
		p, err := DecodeProblem(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.(*DecodeError))
			continue
		}
		cat.AddProblem(p)
	}
	for _, raw := range docs.Homeworks {
		h, err := DecodeHomework(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.(*DecodeError))
			continue
		}
		res.Malformed = append(res.Malformed, h.Skipped...)
		cat.AddHomework(h)
	}
	users := make([]string, 0, len(docs.Users))
	for _, raw := range docs.Users {
		u, err := DecodeUserID(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.(*DecodeError))
			continue
		}
		users = append(users, u)
	}
	subs := make([]Submission, 0, len(docs.Submissions))
	for _, raw := range docs.Submissions {
		s, err := DecodeSubmission(raw)
		if err != nil {
			res.Malformed = append(res.Malformed, err.(*DecodeError))
			continue
		}
		subs = append(subs, s)
	}
	SortGrouped(subs)
	b := NewBuilder(NewDeriver(), cat, res)
	ForEachGroup(subs, func(user string, problem int64, g []Submission) {
		_ = b.Group(user, problem, g) // sorted input and an in-memory sink cannot fail
	})
	_ = b.Finish(users)
	res.PenaltyErrors = b.PenaltyErrors
	return res
}

// SortGrouped sorts submissions by (user, problem, timestamp, _id), the
// order of the rebuild scan and of the index it uses.
func SortGrouped(subs []Submission) {
	slices.SortFunc(subs, func(a, b Submission) int {
		if c := cmp.Compare(a.User, b.User); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Problem, b.Problem); c != 0 {
			return c
		}
		return cmpSubmission(a, b)
	})
}

// ForEachGroup calls fn for each run of submissions sharing (user,
// problem) in subs, which must be sorted by SortGrouped.
func ForEachGroup(subs []Submission, fn func(user string, problem int64, group []Submission)) {
	for i := 0; i < len(subs); {
		j := i + 1
		for j < len(subs) && subs[j].User == subs[i].User && subs[j].Problem == subs[i].Problem {
			j++
		}
		fn(subs[i].User, subs[i].Problem, subs[i:j])
		i = j
	}
}
