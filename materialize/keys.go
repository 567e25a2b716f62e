package materialize

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Op is a change event's operationType.
type Op string

// Operation types of MongoDB change events that concern the derivation.
const (
	OpInsert       Op = "insert"
	OpUpdate       Op = "update"
	OpReplace      Op = "replace"
	OpDelete       Op = "delete"
	OpDrop         Op = "drop"
	OpRename       Op = "rename"
	OpDropDatabase Op = "dropDatabase"
	OpInvalidate   Op = "invalidate"
)

// Change is what a change event says about one source document, reduced to
// what key extraction needs. Exactly one of the ID fields is meaningful,
// according to Collection.
type Change struct {
	Collection string
	Op         Op

	SubmissionID bson.ObjectID // Collection == "submission"
	HomeworkID   bson.ObjectID // Collection == "homework"
	ProblemID    int64         // Collection == "problem"
	UserID       string        // Collection == "user"

	// Pair is a submission's (user, problem) when the event carried them
	// (the projected fullDocument of an insert or replace).
	Pair    Pair
	HasPair bool

	// RenamedTo is the target collection of a rename event.
	RenamedTo string

	// Fields are the dotted paths an update changed (updatedFields keys,
	// removedFields and truncated arrays). Nil means unknown: every field
	// may have changed.
	Fields []string

	// Move is where an update of a submission that set its user and/or
	// problem moved it (the projected updatedFields), each half that
	// decodes: the zero Move when the update set neither, or only values
	// no submission decodes with. Of an insert or replace whose
	// fullDocument has one half that decodes and one that does not (no
	// Pair), it is that half: a later update setting the other half
	// enters a pair with it.
	Move Move
}

// Move is what an event tells of the halves of a submission's new pair:
// the new user, the new problem, or both. The half it does not set is the
// one the submission had before the event, which the event does not carry
// (or, if the other half became undecodable, the submission is in no
// pair: pairing the half with those known is then a harmless superset).
type Move struct {
	User       string
	Problem    int64
	HasUser    bool
	HasProblem bool
}

// Pair is the unit of studentStatus recomputation: a user and a problem.
type Pair struct {
	User    string
	Problem int64
}

// HomeworkUser names studentStatus.<User> of one homework.
type HomeworkUser struct {
	Homework bson.ObjectID
	User     string
}

// Keys is a set of dirty keys. Pairs map to the homeworks known to hold an
// entry for the pair (beyond those the problem lists), whose entries must be
// re-derived too. Submissions, Homeworks, HomeworkUsers and Problems are
// coarse keys the engine expands into users and pairs by reading the
// current source (and the submission key index).
type Keys struct {
	Users map[string]struct{}
	Pairs map[Pair]map[bson.ObjectID]struct{}
	// Submissions maps a changed submission to the pairs its change events
	// carried (inserts, replaces, updates setting both user and problem;
	// none for other updates and deletes).
	Submissions map[bson.ObjectID][]Pair
	// Moves maps a submission to the events of the batch that carried
	// only one half of its pair (Move.HasUser or Move.HasProblem): its new
	// pair is that half with the other half of a pair it had before.
	Moves map[bson.ObjectID][]Move
	// LeavesPrior marks a submission whose first event of the batch that
	// may change its pair is not its insert (a replace, a delete, an
	// update naming user or problem): the events leave the pair it had
	// before the batch, and an update setting one half enters that half
	// with the other half of it, which only the key index records (false:
	// its insert came first, so the events carry every half it had).
	LeavesPrior map[bson.ObjectID]bool
	// Unknown holds the submissions with an update whose changed fields
	// are unknown (no changedFields, so no moved either): it may have
	// moved them where neither an event nor the reads show.
	Unknown       map[bson.ObjectID]struct{}
	Homeworks     map[bson.ObjectID]struct{}
	HomeworkUsers map[HomeworkUser]struct{}
	Problems      map[int64]struct{}
	// IfSubmitted are pairs in Pairs that need recomputing only if the
	// user has a submission of the problem: without one, every entry of
	// the pair already holds the start value, whatever the change.
	IfSubmitted map[Pair]struct{}
	// Rebuild is set when a change cannot be narrowed (a watched
	// collection or the database was dropped or renamed).
	Rebuild bool
}

// NewKeys returns an empty key set.
func NewKeys() *Keys {
	return &Keys{
		Users:         make(map[string]struct{}),
		Pairs:         make(map[Pair]map[bson.ObjectID]struct{}),
		Submissions:   make(map[bson.ObjectID][]Pair),
		Moves:         make(map[bson.ObjectID][]Move),
		LeavesPrior:   make(map[bson.ObjectID]bool),
		Unknown:       make(map[bson.ObjectID]struct{}),
		Homeworks:     make(map[bson.ObjectID]struct{}),
		HomeworkUsers: make(map[HomeworkUser]struct{}),
		Problems:      make(map[int64]struct{}),
		IfSubmitted:   make(map[Pair]struct{}),
	}
}

// Empty reports whether k names nothing.
func (k *Keys) Empty() bool {
	return !k.Rebuild && len(k.Users) == 0 && len(k.Pairs) == 0 && len(k.Submissions) == 0 &&
		len(k.Homeworks) == 0 && len(k.HomeworkUsers) == 0 && len(k.Problems) == 0
}

// AddUser marks a user's counts dirty.
func (k *Keys) AddUser(u string) { k.Users[u] = struct{}{} }

// AddPair marks a pair dirty; extra homeworks (if any) are homeworks known
// to hold an entry for the pair.
func (k *Keys) AddPair(p Pair, extra ...bson.ObjectID) {
	m := k.Pairs[p]
	if m == nil {
		m = make(map[bson.ObjectID]struct{}, len(extra))
		k.Pairs[p] = m
	}
	for _, h := range extra {
		m[h] = struct{}{}
	}
}

// Merge adds every key of o to k.
func (k *Keys) Merge(o *Keys) {
	for u := range o.Users {
		k.Users[u] = struct{}{}
	}
	for p, hs := range o.Pairs {
		k.AddPair(p)
		for h := range hs {
			k.Pairs[p][h] = struct{}{}
		}
	}
	for id, ps := range o.Submissions {
		k.Submissions[id] = appendNew(k.Submissions[id], ps...)
	}
	for id, v := range o.LeavesPrior {
		if _, ok := k.LeavesPrior[id]; !ok { // o's events are later
			k.LeavesPrior[id] = v
		}
	}
	for id := range o.Unknown {
		k.Unknown[id] = struct{}{}
	}
	for id, ms := range o.Moves {
		for _, m := range ms {
			if !slices.Contains(k.Moves[id], m) {
				k.Moves[id] = append(k.Moves[id], m)
			}
		}
	}
	for id := range o.Homeworks {
		k.Homeworks[id] = struct{}{}
	}
	for hu := range o.HomeworkUsers {
		k.HomeworkUsers[hu] = struct{}{}
	}
	for p := range o.Problems {
		k.Problems[p] = struct{}{}
	}
	for p := range o.IfSubmitted {
		k.IfSubmitted[p] = struct{}{}
	}
	k.Rebuild = k.Rebuild || o.Rebuild
}

// Source fields whose change can alter derived values. Any other field
// (lastSend, tasks, runTime, ACUser, markdown, problemIds, ...) is ignored,
// which keeps Back-End's frequent bookkeeping updates, and the
// materializer's own writes to other paths, from causing recomputation.
var (
	submissionFields = []string{"user", "problem", "languageType", "timestamp", "status", "score"}
	homeworkConfig   = []string{"duration.end", "penalty"}
	problemFields    = []string{"homeworks"}
	userFields       = []string{FieldSubmission, FieldACSubmission, FieldACProblemIDs}
)

// MovesSubmission reports whether changed path f may change which pair a
// submission belongs to: its user or problem, or a path below them.
func MovesSubmission(f string) bool {
	return f == "user" || f == "problem" || strings.HasPrefix(f, "user.") || strings.HasPrefix(f, "problem.")
}

// touches reports whether a changed path f overlaps a relevant path r:
// equal, a parent of it (duration) or a child of it (homeworks.3).
func touches(f, r string) bool {
	return f == r || strings.HasPrefix(r, f+".") || strings.HasPrefix(f, r+".")
}

func touchesAny(fields, relevant []string) bool {
	if fields == nil {
		return true
	}
	for _, f := range fields {
		for _, r := range relevant {
			if touches(f, r) {
				return true
			}
		}
	}
	return false
}

// Extract returns the keys a change makes dirty, following the spec's
// "Keys" table: a submission change dirties its user and pair (resolved
// through the key index when the event does not carry them, so deletes
// work without pre-images); a homework change dirties the pairs with an
// entry in it, narrowed to studentStatus.<user>[.<problem>] when only
// those paths changed; a problem change dirties the pairs with an entry for
// it anywhere; a user insert, replace or write to its derived fields
// dirties its counts. Updates that touch no
// field the derivation reads give no keys.
func Extract(c Change) *Keys {
	k := NewKeys()
	switch c.Op {
	case OpDrop, OpRename:
		// Only a source collection matters (not the materializer's own, nor
		// Back-End's others); a rename into one counts too.
		k.Rebuild = sourceCollection(c.Collection) || sourceCollection(c.RenamedTo)
		return k
	case OpDropDatabase, OpInvalidate:
		k.Rebuild = true
		return k
	}
	switch c.Collection {
	case CollSubmission:
		if c.Op == OpUpdate && !touchesAny(c.Fields, submissionFields) {
			return k
		}
		if _, ok := k.Submissions[c.SubmissionID]; !ok {
			k.Submissions[c.SubmissionID] = nil // known id, pair to be resolved
		}
		if c.HasPair {
			k.Submissions[c.SubmissionID] = appendNew(k.Submissions[c.SubmissionID], c.Pair)
			k.AddUser(c.Pair.User)
			k.AddPair(c.Pair)
		}
		switch {
		case c.Op == OpInsert:
			k.LeavesPrior[c.SubmissionID] = false
		case c.Op == OpReplace || c.Op == OpDelete:
			k.LeavesPrior[c.SubmissionID] = true
		case c.Fields == nil:
			k.Unknown[c.SubmissionID] = struct{}{}
			k.LeavesPrior[c.SubmissionID] = true
		case c.Move != (Move{}) || slices.ContainsFunc(c.Fields, MovesSubmission):
			k.LeavesPrior[c.SubmissionID] = true
		}
		switch m := c.Move; {
		case m.HasUser && m.HasProblem && c.Op == OpUpdate:
			// Both halves set: the new pair, as an insert carries it.
			p := Pair{User: m.User, Problem: m.Problem}
			k.Submissions[c.SubmissionID] = appendNew(k.Submissions[c.SubmissionID], p)
			k.AddUser(p.User)
			k.AddPair(p)
		case m.HasUser || m.HasProblem:
			k.Moves[c.SubmissionID] = append(k.Moves[c.SubmissionID], m)
		}
	case CollHomework:
		if c.Op != OpUpdate || c.Fields == nil {
			k.Homeworks[c.HomeworkID] = struct{}{}
			return k
		}
		for _, f := range c.Fields {
			extractHomeworkField(k, c.HomeworkID, f)
		}
	case CollProblem:
		if c.Op == OpUpdate && !touchesAny(c.Fields, problemFields) {
			return k
		}
		k.Problems[c.ProblemID] = struct{}{}
	case CollUser:
		// An insert or replace, or any write to the derived fields by
		// someone else (Back-End code not yet switched over, a deposed
		// instance, an operator), is recomputed and so corrected. The
		// materializer's own writes come back here too and find the stored
		// value equal, so they converge.
		if c.Op == OpInsert || c.Op == OpReplace || (c.Op == OpUpdate && touchesAny(c.Fields, userFields)) {
			k.AddUser(c.UserID)
		}
	}
	return k
}

// extractHomeworkField adds the keys for one changed path of a homework.
// A path below studentStatus is ambiguous when usernames contain dots
// ("studentStatus.a.b.7" is user "a.b", problem "7", or user "a",
// problem "b"...), so every reading is added; recomputing a pair that does
// not exist is harmless.
func extractHomeworkField(k *Keys, h bson.ObjectID, f string) {
	if touchesAny([]string{f}, homeworkConfig) || f == FieldStudentStatus {
		k.Homeworks[h] = struct{}{}
		return
	}
	rest, ok := strings.CutPrefix(f, FieldStudentStatus+".")
	if !ok {
		return
	}
	parts := strings.Split(rest, ".")
	for i := 1; i <= len(parts); i++ {
		user := strings.Join(parts[:i], ".")
		if i == len(parts) {
			k.HomeworkUsers[HomeworkUser{h, user}] = struct{}{}
			break
		}
		if p, ok := ParseProblemKey(parts[i]); ok {
			k.AddPair(Pair{user, p}, h)
			if i+1 < len(parts) && entryFields[parts[i+1]] {
				break // the rest is a path inside the entry (…7.score)
			}
		} else {
			// studentStatus.<user>.<key no problem id renders to>: such
			// an entry is reset through the user's keys in the homework.
			k.HomeworkUsers[HomeworkUser{h, user}] = struct{}{}
		}
	}
}

// entryFields are the keys of a studentStatus entry; a changed path
// reaching one of them lies inside an entry.
var entryFields = map[string]bool{"score": true, "problemStatus": true, "submissionIds": true, "rawScore": true}

func sourceCollection(c string) bool {
	switch c {
	case CollSubmission, CollHomework, CollProblem, CollUser:
		return true
	}
	return false
}

// appendNew appends the pairs of ps not already in s.
func appendNew(s []Pair, ps ...Pair) []Pair {
	for _, p := range ps {
		if !slices.Contains(s, p) {
			s = append(s, p)
		}
	}
	return s
}
