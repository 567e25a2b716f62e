package watch

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Outcome summarises one recomputation.
type Outcome struct {
	Users, Pairs    int // keys recomputed
	Writes          Writes
	SkippedUsers    int // derived value equal to stored: not written
	SkippedEntries  int
	PenaltyErrors   int
	Malformed       []*materialize.DecodeError
	NeedRebuild     bool               // a key could not be narrowed; a full rebuild must follow
	Unresolved      int                // submissions whose (user, problem) is unknown
	InvalidatePairs []materialize.Pair // pairs whose submissions changed
	NewKeys         map[bson.ObjectID][]materialize.Pair
	Reads           int // source read calls

	resets []resetRef // entries whose key is no problem id: start value
	hwRead *hwRead    // the homeworks expandHomeworks read, for derive to reuse
}

// hwRead is one Homeworks read: the ids and users asked for, and the
// documents returned.
type hwRead struct {
	ids   map[bson.ObjectID]bool
	users map[string]bool
	docs  map[bson.ObjectID]*HomeworkDoc
}

// covers reports whether r answers a read of ids for users.
func (r *hwRead) covers(ids []bson.ObjectID, users []string) bool {
	if r == nil {
		return false
	}
	for _, id := range ids {
		if !r.ids[id] {
			return false
		}
	}
	for _, u := range users {
		if !r.users[u] {
			return false
		}
	}
	return true
}

// resetRef names an entry whose key no problem id renders to.
type resetRef struct {
	homework bson.ObjectID
	ref      EntryRef
}

// Recompute expands dirty keys against the current source, recomputes every
// dirty user and pair once, and returns the writes whose values differ from
// what is stored. It reads in bulk: one call per kind of read whatever the
// number of keys. It writes nothing; see Engine.ProcessBatch.
func Recompute(ctx context.Context, src Source, kidx KeyIndex, d *materialize.Deriver, keys *materialize.Keys) (*Outcome, error) {
	return recompute(ctx, src, kidx, d, keys, nil, nil)
}

// recompute is Recompute; the submissions in inserted were inserted by the
// batch and never moved since (insertedInBatch): their pairs are the ones
// their events carry. guess (nil: none) is the engine's record of the
// problems' homeworks lists, which every Problems read updates.
func recompute(ctx context.Context, src Source, kidx KeyIndex, d *materialize.Deriver, keys *materialize.Keys, inserted map[bson.ObjectID]bool, guess *homeworkGuess) (*Outcome, error) {
	out := &Outcome{NewKeys: make(map[bson.ObjectID][]materialize.Pair)}
	if keys.Rebuild {
		out.NeedRebuild = true
		return out, nil
	}
	if err := expandSubmissions(ctx, src, kidx, keys, inserted, out); err != nil {
		return nil, err
	}
	if err := expandHomeworks(ctx, src, keys, out); err != nil {
		return nil, err
	}
	if err := expandProblems(ctx, src, keys, guess, out); err != nil {
		return nil, err
	}
	if err := derive(ctx, src, d, keys, guess, out); err != nil {
		return nil, err
	}
	return out, nil
}

// expandSubmissions resolves submission keys to users and pairs through the
// current documents, the pairs change events carried, the key index (the
// only record of a deleted submission's pair) and, for updates that set
// one half of a pair, that half with every other half known (movedPairs).
// Every pair found is recorded, so a later event of the submission finds
// it whatever the submission did since.
//
// A submission inserted by the batch and never moved since (inserted,
// see insertedInBatch) is neither looked up nor read: the pair its insert
// carried is the only one it was ever in up to the batch's last event (it
// did not exist before the insert), so no other derived value holds it;
// a later move or delete is a later event, resolved when it is processed.
// Its pair is recorded in the key index unconditionally (RecordKeys adds
// to a set: recording again is a no-op), and its document is still read
// with its pair's submissions, which also reports it if malformed.
func expandSubmissions(ctx context.Context, src Source, kidx KeyIndex, keys *materialize.Keys, inserted map[bson.ObjectID]bool, out *Outcome) error {
	if len(keys.Submissions) == 0 {
		return nil
	}
	var ids []bson.ObjectID
	for _, id := range sortedIDs(keys.Submissions) {
		if !inserted[id] || len(keys.Submissions[id]) == 0 {
			ids = append(ids, id)
			continue
		}
		for _, p := range keys.Submissions[id] {
			out.NewKeys[id] = appendPair(out.NewKeys[id], p)
			keys.AddUser(p.User)
			keys.AddPair(p)
			if !slices.Contains(out.InvalidatePairs, p) {
				out.InvalidatePairs = append(out.InvalidatePairs, p)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	known, err := kidx.LookupKeys(ctx, ids)
	if err != nil {
		return fmt.Errorf("look up submission keys: %w", err)
	}
	cur, bad, err := src.SubmissionsByID(ctx, ids)
	out.Reads += 2
	if err != nil {
		return fmt.Errorf("read submissions by id: %w", err)
	}
	out.Malformed = append(out.Malformed, bad...)
	pairs := make(map[bson.ObjectID][]materialize.Pair, len(ids))
	for id, ps := range known {
		pairs[id] = ps
	}
	for _, id := range ids {
		for _, p := range keys.Submissions[id] {
			if !slices.Contains(known[id], p) && !slices.Contains(out.NewKeys[id], p) {
				out.NewKeys[id] = append(out.NewKeys[id], p)
			}
			if !slices.Contains(pairs[id], p) {
				pairs[id] = append(pairs[id], p)
			}
		}
	}
	for _, s := range cur {
		p := materialize.Pair{User: s.User, Problem: s.Problem}
		if !slices.Contains(known[s.ID], p) && !slices.Contains(out.NewKeys[s.ID], p) {
			out.NewKeys[s.ID] = append(out.NewKeys[s.ID], p)
		}
		if !slices.Contains(pairs[s.ID], p) {
			pairs[s.ID] = append(pairs[s.ID], p)
		}
	}
	for _, id := range ids {
		for _, p := range movedPairs(keys.Moves[id], pairs[id]) {
			if !slices.Contains(known[id], p) && !slices.Contains(out.NewKeys[id], p) {
				out.NewKeys[id] = append(out.NewKeys[id], p)
			}
			pairs[id] = append(pairs[id], p)
		}
	}
	for _, id := range ids {
		ps := pairs[id]
		_, unknown := keys.Unknown[id]
		if len(ps) == 0 || unknown || (keys.LeavesPrior[id] && len(known[id]) == 0) {
			// Deleted (or unreadable) before its pair was ever recorded:
			// only a rebuild can tell what it contributed. Or moved, or
			// replaced or deleted, while no record names the pair it
			// had before the batch (in no pair when the rebuild scanned,
			// or a record refused): the reads, maybe of a later state,
			// need not show the pair it left, nor the other half of the
			// one an update setting one half put it in. Or updated in
			// fields unknown: moved maybe, nobody knows where.
			out.Unresolved++
			out.NeedRebuild = true
			continue
		}
		for _, p := range ps {
			keys.AddUser(p.User)
			keys.AddPair(p)
			if !slices.Contains(out.InvalidatePairs, p) {
				// The Back-End's high score is computed from the pair's
				// submissions: its cache goes stale when they change.
				out.InvalidatePairs = append(out.InvalidatePairs, p)
			}
		}
	}
	return nil
}

// movedPairs returns the pairs, beyond had, that updates setting one half
// of a submission's pair (moves) may have put it in: each move's half with
// every other half of a pair it had, until no move adds one.
//
// The events of a change resolve to every pair the change affects only
// if each event names the pair the submission left and the one it
// entered, whatever the reads see (they are causally after the batch, so
// they may show the submission already elsewhere, or gone): the pair left
// is in had (the key index records every pair an earlier event resolved
// to; the batch's events and the current document add theirs), and the
// pair entered is the move's half with the other half of the pair left,
// so among the pairs returned. Recomputing and recording a pair the
// submission was never in is harmless (records only ever add pairs to
// recompute); missing one would leave a derived value counting a
// submission that has moved on, which nothing but the echo of that
// value's own write would correct.
func movedPairs(moves []materialize.Move, had []materialize.Pair) []materialize.Pair {
	if len(moves) == 0 {
		return nil
	}
	all := slices.Clone(had)
	var out []materialize.Pair
	for grown := true; grown; {
		grown = false
		var users []string
		var problems []int64
		for _, p := range all {
			if !slices.Contains(users, p.User) {
				users = append(users, p.User)
			}
			if !slices.Contains(problems, p.Problem) {
				problems = append(problems, p.Problem)
			}
		}
		add := func(p materialize.Pair) {
			if !slices.Contains(all, p) {
				all = append(all, p)
				out = append(out, p)
				grown = true
			}
		}
		for _, m := range moves {
			switch {
			case m.HasUser && m.HasProblem:
				add(materialize.Pair{User: m.User, Problem: m.Problem})
			case m.HasUser:
				for _, p := range problems {
					add(materialize.Pair{User: m.User, Problem: p})
				}
			case m.HasProblem:
				for _, u := range users {
					add(materialize.Pair{User: u, Problem: m.Problem})
				}
			}
		}
	}
	return out
}

// expandHomeworks turns whole-homework keys into the pairs with an entry in
// the homework, plus (through the problems listing it) every pair whose
// derivation visits it; and studentStatus.<user> keys into that user's
// pairs in the homework and in the problems listing it.
func expandHomeworks(ctx context.Context, src Source, keys *materialize.Keys, out *Outcome) error {
	if len(keys.Homeworks) == 0 && len(keys.HomeworkUsers) == 0 {
		return nil
	}
	hws := sortedIDs(keys.Homeworks)
	var listed []bson.ObjectID
	listed = append(listed, hws...)
	for hu := range keys.HomeworkUsers {
		listed = append(listed, hu.Homework)
	}
	listing, err := src.ProblemsListing(ctx, uniqueIDs(listed))
	out.Reads++
	if err != nil {
		return fmt.Errorf("read problems listing homeworks: %w", err)
	}
	if len(hws) > 0 {
		refs, bad, err := src.EntryKeys(ctx, hws)
		out.Reads++
		if err != nil {
			return fmt.Errorf("read homework entry keys: %w", err)
		}
		out.Malformed = append(out.Malformed, bad...)
		for h, rs := range refs {
			for _, r := range rs {
				p, ok := materialize.ParseProblemKey(r.ProblemKey)
				if !ok {
					// A key no problem id renders to (str(int) never gives
					// "0323"): no submission reaches it, so it holds the
					// start value, as a rebuild writes it.
					out.resets = append(out.resets, resetRef{h, r})
					continue
				}
				keys.AddPair(materialize.Pair{User: r.User, Problem: p}, h)
			}
		}
		for _, h := range hws {
			for _, p := range listing[h] {
				keys.Problems[p] = struct{}{}
			}
		}
	}
	if len(keys.HomeworkUsers) > 0 {
		var ids []bson.ObjectID
		var users []string
		for hu := range keys.HomeworkUsers {
			ids = append(ids, hu.Homework)
			users = append(users, hu.User)
		}
		// The same homeworks are read for the users of the pairs known so
		// far too: derive reuses this read when it needs no other
		// homework and no other user (a batch of echoes: the entry path
		// studentStatus.<u>.<p> is also read as user "<u>.<p>"), one
		// read instead of two, both at the batch's causal point.
		hwIDs, hwUsers := uniqueIDs(ids), uniqueStrings(users)
		named := make(map[string]bool, len(hwUsers))
		for _, u := range hwUsers {
			named[u] = true
		}
		all := append([]string(nil), hwUsers...)
		for p := range keys.Pairs {
			all = append(all, p.User)
		}
		all = uniqueStrings(all)
		docs, bad, err := src.Homeworks(ctx, hwIDs, all)
		out.Reads++
		if err != nil {
			return fmt.Errorf("read homeworks: %w", err)
		}
		out.Malformed = append(out.Malformed, bad...)
		for _, d := range docs {
			for _, sk := range d.Skipped {
				// A named user's value is not a document (the pairs'
				// users are reported as before: not here).
				if u, ok := strings.CutPrefix(sk.Field, materialize.FieldStudentStatus+"."); ok && named[u] {
					out.Malformed = append(out.Malformed, sk)
				}
			}
		}
		out.hwRead = &hwRead{ids: make(map[bson.ObjectID]bool, len(hwIDs)), users: make(map[string]bool, len(all)), docs: docs}
		for _, id := range hwIDs {
			out.hwRead.ids[id] = true
		}
		for _, u := range all {
			out.hwRead.users[u] = true
		}
		for hu := range keys.HomeworkUsers {
			if d, ok := docs[hu.Homework]; ok {
				for pk := range d.Students[hu.User] {
					if p, ok := materialize.ParseProblemKey(pk); ok {
						keys.AddPair(materialize.Pair{User: hu.User, Problem: p}, hu.Homework)
					} else {
						out.resets = append(out.resets, resetRef{hu.Homework, EntryRef{User: hu.User, ProblemKey: pk}})
					}
				}
			}
			for _, p := range listing[hu.Homework] {
				// The user's entries for p elsewhere change only if
				// submissions of p reach them.
				pair := materialize.Pair{User: hu.User, Problem: p}
				if _, ok := keys.Pairs[pair]; !ok {
					keys.IfSubmitted[pair] = struct{}{}
				}
				keys.AddPair(pair)
			}
		}
	}
	return nil
}

// expandProblems turns problem keys into every pair holding an entry for
// the problem in any homework, listed by the problem or not (so entries of
// a homework the problem no longer lists are reset too).
func expandProblems(ctx context.Context, src Source, keys *materialize.Keys, guess *homeworkGuess, out *Outcome) error {
	if len(keys.Problems) == 0 {
		return nil
	}
	ps := make([]int64, 0, len(keys.Problems))
	for p := range keys.Problems {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	entries, err := src.EntriesForProblems(ctx, ps)
	out.Reads++
	if err != nil {
		return fmt.Errorf("read entries of problems: %w", err)
	}
	// Read the problems too, so one that cannot be decoded is reported
	// even when no entry names it (derive reads them again for pairs).
	if probs, bad, err := src.Problems(ctx, ps); err != nil {
		return fmt.Errorf("read problems: %w", err)
	} else {
		out.Malformed = append(out.Malformed, bad...)
		guess.learn(ps, probs)
	}
	out.Reads++
	for p, hus := range entries {
		for _, hu := range hus {
			keys.AddPair(materialize.Pair{User: hu.User, Problem: p}, hu.Homework)
		}
	}
	return nil
}

// derive recomputes the dirty users and pairs and collects the writes.
//
// It reads in one Source.Read what it needs: the pairs' submissions, the
// users' counts and stored fields, the pairs' problems, and the homeworks
// the pairs may write. Which homeworks those are depends on the problems'
// homeworks lists, so the Read asks for the homeworks guess (what the
// engine last read of those problems) names; the homeworks actually used
// are computed from the problems just read, as if read after them, those
// the guess missed are read in a second call, and those it named in
// excess are dropped unused (homeworksFor). The guess decides only what is
// fetched, never what is derived.
func derive(ctx context.Context, src Source, d *materialize.Deriver, keys *materialize.Keys, guess *homeworkGuess, out *Outcome) error {
	if len(keys.Users) == 0 && len(keys.Pairs) == 0 && len(out.resets) == 0 {
		return nil
	}
	users := sortedStrings(keys.Users)
	allPairs := make([]materialize.Pair, 0, len(keys.Pairs))
	pairUsers := make(map[string]struct{})
	problemSet := make(map[int64]struct{})
	for p := range keys.Pairs {
		allPairs = append(allPairs, p)
		pairUsers[p.User] = struct{}{}
		problemSet[p.Problem] = struct{}{}
	}
	slices.SortFunc(allPairs, cmpPair)
	for _, r := range out.resets {
		pairUsers[r.ref.User] = struct{}{}
	}
	pids := make([]int64, 0, len(problemSet))
	for p := range problemSet {
		pids = append(pids, p)
	}
	slices.Sort(pids)
	hwUsers := sortedStrings(pairUsers)
	// Homeworks needed whatever the problems list: those known to hold an
	// entry of a pair, and those of the entries to reset.
	known := make(map[bson.ObjectID]struct{})
	for _, extra := range keys.Pairs {
		for h := range extra {
			known[h] = struct{}{}
		}
	}
	for _, r := range out.resets {
		known[r.homework] = struct{}{}
	}

	// Only the dirty pairs' submissions are read; a user's counts are
	// computed where the submissions are (Source.UserStats), so a landing
	// never reads everything its user ever submitted.
	r := &Reads{Pairs: allPairs, Users: users}
	if len(keys.Pairs) > 0 || len(out.resets) > 0 {
		// Read even if every pair turns out to matter only with a
		// submission it has not (IfSubmitted): then the problems and
		// homeworks read are dropped unused and unreported, as when they
		// were read only after the submissions.
		r.Problems = pids
		guessed := maps.Clone(known)
		guess.homeworks(pids, guessed)
		if ids := sortedIDs(guessed); len(ids) > 0 && !out.hwRead.covers(ids, hwUsers) {
			r.Homeworks, r.HomeworkUsers = ids, hwUsers
		}
	}
	res := &ReadResult{}
	if len(r.Pairs) > 0 || len(r.Users) > 0 || len(r.Problems) > 0 || len(r.Homeworks) > 0 {
		var err error
		res, err = src.Read(ctx, r)
		out.Reads++
		if err != nil {
			return fmt.Errorf("read derivation sources: %w", err)
		}
		if len(r.Problems) > 0 {
			guess.learn(r.Problems, res.Problems)
		}
	}

	reported := make(map[string]bool)
	malformed := func(bad []*materialize.DecodeError) {
		for _, b := range bad {
			// One document may be reported by both reads.
			if k := b.Collection + "\x00" + b.ID + "\x00" + b.Field + "\x00" + b.Reason; !reported[k] {
				reported[k] = true
				out.Malformed = append(out.Malformed, b)
			}
		}
	}
	byPair := make(map[materialize.Pair][]materialize.Submission)
	if len(allPairs) > 0 {
		malformed(res.SubmissionsBad)
		for _, s := range res.Submissions {
			p := materialize.Pair{User: s.User, Problem: s.Problem}
			if _, ok := keys.Pairs[p]; ok {
				byPair[p] = append(byPair[p], s)
			}
		}
	}
	derived := res.Stats
	if len(users) > 0 {
		malformed(res.StatsBad)
	}

	// Pairs that matter only with a submission (see Keys.IfSubmitted).
	for p := range keys.IfSubmitted {
		if len(byPair[p]) == 0 && len(keys.Pairs[p]) == 0 {
			delete(keys.Pairs, p)
		}
	}

	// Users.
	if len(users) > 0 {
		stored := res.Users
		for _, u := range users {
			out.Users++
			su, ok := stored[u]
			if !ok {
				continue // no user document: never create one
			}
			st, ok := derived[u]
			if !ok {
				st = materialize.DeriveUser(nil)
			}
			if su.OK && st.Equal(su.Stats) {
				out.SkippedUsers++
				continue
			}
			out.Writes.Users = append(out.Writes.Users, UserWrite{User: u, Stats: st})
		}
	}
	if len(keys.Pairs) == 0 && len(out.resets) == 0 {
		return nil
	}

	// Pairs: the problems, then every homework any pair may write.
	problems := res.Problems
	out.Malformed = append(out.Malformed, res.ProblemsBad...)
	hwSet := maps.Clone(known)
	for _, p := range problems {
		for _, h := range p.Homeworks {
			hwSet[h] = struct{}{}
		}
	}
	hws, err := homeworksFor(ctx, src, sortedIDs(hwSet), hwUsers, r.Homeworks, res, out)
	if err != nil {
		return err
	}
	get := func(id bson.ObjectID) *materialize.Homework {
		if h, ok := hws[id]; ok {
			return &h.Homework
		}
		return nil
	}

	pairs := make([]materialize.Pair, 0, len(keys.Pairs))
	for p := range keys.Pairs {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, cmpPair)
	for _, pair := range pairs {
		out.Pairs++
		visited := materialize.ResolveHomeworks(problems[pair.Problem], get)
		res := d.Pair(pair.User, pair.Problem, byPair[pair], visited)
		out.PenaltyErrors += res.PenaltyErrors
		pk := materialize.ProblemKey(pair.Problem)
		written := make(map[bson.ObjectID]bool, len(res.Entries))
		for _, he := range res.Entries {
			written[he.Homework] = true
			out.entry(hws[he.Homework], pair.User, pk, he.Entry)
		}
		// Homeworks known to hold an entry for the pair that the problem
		// does not (or no longer) list: no submission reaches them.
		for h := range keys.Pairs[pair] {
			if written[h] {
				continue
			}
			if doc, ok := hws[h]; ok && doc.HasEntry(pair.User, pair.Problem) && !slices.ContainsFunc(visited, func(x *materialize.Homework) bool { return x.ID == h }) {
				out.entry(doc, pair.User, pk, materialize.StartEntry())
			}
		}
	}
	for _, r := range out.resets {
		if doc, ok := hws[r.homework]; ok {
			if _, exists := doc.Stored[r.ref.User][r.ref.ProblemKey]; exists {
				out.entry(doc, r.ref.User, r.ref.ProblemKey, materialize.StartEntry())
			}
		}
	}
	return nil
}

// homeworksFor returns the homeworks ids (sorted) for users, and reports
// what of them cannot be decoded, exactly as one Homeworks(ids, users)
// call would, given res, the answer to a Read whose Homeworks part was
// asked (sorted; nil: not read). expandHomeworks' read serves them when it
// covers them (and reported already). Otherwise the homeworks read are
// used when asked is ids; when it is not, those of ids it holds are used
// and the rest read in a second call, unless the read reported a homework
// it could not decode: a DecodeError need not name which homework it is
// about (an unreadable document's _id is "?"), so ids are then read again,
// whole, and only their errors reported. Homeworks read but not in ids
// are dropped.
func homeworksFor(ctx context.Context, src Source, ids []bson.ObjectID, users []string, asked []bson.ObjectID, res *ReadResult, out *Outcome) (map[bson.ObjectID]*HomeworkDoc, error) {
	if out.hwRead.covers(ids, users) {
		// expandHomeworks read these homeworks for these users (and
		// reported what could not be decoded); extra users' entries in
		// them are never looked at (every use is per pair).
		hws := make(map[bson.ObjectID]*HomeworkDoc, len(ids))
		for _, id := range ids {
			if d, ok := out.hwRead.docs[id]; ok {
				hws[id] = d
			}
		}
		return hws, nil
	}
	if slices.Equal(asked, ids) {
		out.Malformed = append(out.Malformed, res.HomeworksBad...)
		return res.Homeworks, nil
	}
	hws := make(map[bson.ObjectID]*HomeworkDoc, len(ids))
	missing := ids
	if len(res.HomeworksBad) == 0 {
		missing = nil
		for _, id := range ids {
			if _, ok := slices.BinarySearchFunc(asked, id, cmpID); !ok {
				missing = append(missing, id)
			} else if d, ok := res.Homeworks[id]; ok {
				hws[id] = d
			}
		}
	}
	if len(missing) == 0 {
		return hws, nil
	}
	more, bad, err := src.Homeworks(ctx, missing, users)
	out.Reads++
	if err != nil {
		return nil, fmt.Errorf("read homeworks: %w", err)
	}
	out.Malformed = append(out.Malformed, bad...)
	maps.Copy(hws, more)
	return hws, nil
}

// homeworkGuess is what the engine last read of each problem's homeworks
// list, for derive to read the homeworks with the problems in one Read
// instead of after them. A guess only decides what is fetched (see
// derive), so a stale one costs a round trip, never a wrong value. It
// holds at most maxGuessProblems problems (one is forgotten to make room
// for another) and lists of at most maxGuessHomeworks homeworks. A nil
// *homeworkGuess guesses nothing and learns nothing. Safe for concurrent
// use.
type homeworkGuess struct {
	mu        sync.Mutex
	byProblem map[int64][]bson.ObjectID
}

const (
	maxGuessProblems  = 1 << 14
	maxGuessHomeworks = 64
)

// homeworkGuess returns the engine's guess, made on first use.
func (e *Engine) homeworkGuess() *homeworkGuess {
	if e.hwGuess == nil {
		e.hwGuess = &homeworkGuess{}
	}
	return e.hwGuess
}

// homeworks adds to into the homeworks last read for problems.
func (g *homeworkGuess) homeworks(problems []int64, into map[bson.ObjectID]struct{}) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range problems {
		for _, h := range g.byProblem[p] {
			into[h] = struct{}{}
		}
	}
}

// learn records got, a Problems read of ids: a problem absent from it
// (deleted, or undecodable) lists no homework a derivation reads.
func (g *homeworkGuess) learn(ids []int64, got map[int64]*materialize.Problem) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byProblem == nil {
		g.byProblem = make(map[int64][]bson.ObjectID)
	}
	for _, id := range ids {
		p, ok := got[id]
		if !ok || len(p.Homeworks) > maxGuessHomeworks {
			delete(g.byProblem, id)
			continue
		}
		if _, ok := g.byProblem[id]; !ok && len(g.byProblem) >= maxGuessProblems {
			for k := range g.byProblem {
				delete(g.byProblem, k)
				break
			}
		}
		g.byProblem[id] = slices.Clone(p.Homeworks)
	}
}

// entry records the write of e unless the stored value already equals it.
func (out *Outcome) entry(doc *HomeworkDoc, user, pk string, e materialize.Entry) {
	if doc == nil {
		return
	}
	if v, ok := doc.Stored[user][pk]; ok && e.MatchesStored(v) {
		out.SkippedEntries++
		return
	}
	out.Writes.Entries = append(out.Writes.Entries, EntryWrite{Homework: doc.ID, User: user, ProblemKey: pk, Entry: e})
}

func appendPair(s []materialize.Pair, p materialize.Pair) []materialize.Pair {
	if slices.Contains(s, p) {
		return s
	}
	return append(s, p)
}

func cmpPair(a, b materialize.Pair) int {
	if a.User != b.User {
		if a.User < b.User {
			return -1
		}
		return 1
	}
	switch {
	case a.Problem < b.Problem:
		return -1
	case a.Problem > b.Problem:
		return 1
	}
	return 0
}

func sortedIDs[V any](m map[bson.ObjectID]V) []bson.ObjectID {
	out := make([]bson.ObjectID, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.SortFunc(out, cmpID)
	return out
}

func cmpID(a, b bson.ObjectID) int { return bytes.Compare(a[:], b[:]) }

func uniqueIDs(ids []bson.ObjectID) []bson.ObjectID {
	m := make(map[bson.ObjectID]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	return sortedIDs(m)
}

func sortedStrings[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func uniqueStrings(ss []string) []string {
	m := make(map[string]struct{}, len(ss))
	for _, s := range ss {
		m[s] = struct{}{}
	}
	return sortedStrings(m)
}
