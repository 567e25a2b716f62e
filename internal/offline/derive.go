package offline

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
)

// readSubmissions reads every submission into a compact record. The
// documents' framing and every top-level element are checked (by the
// reader and the decoder); values the derivation does not read are not
// decoded.
func (s *state) readSubmissions(ctx context.Context, d dump.Dir) (*buckets, error) {
	recs := &buckets{bits: s.opts.userBits}
	if recs.bits == 0 {
		recs.bits = bucketUserBits
	}
	var cur uint32
	intern := func(b []byte) string {
		cur = s.intern(b)
		return s.names[cur]
	}
	n := 0
	err := s.each(ctx, d, materialize.CollSubmission, func(doc bson.Raw) error {
		n++
		sub, err := materialize.DecodeSubmissionInterned(doc, intern)
		if err != nil {
			return s.malformed(d, materialize.CollSubmission, n, err)
		}
		if cur >= maxUsers {
			return fmt.Errorf("read dump %s: more than %d users", d.File(materialize.CollSubmission), maxUsers)
		}
		r, err := newRecord(&sub, cur, &s.wide)
		if err != nil {
			return fmt.Errorf("read dump %s: %w", d.File(materialize.CollSubmission), err)
		}
		return recs.add(r)
	})
	return recs, err
}

// derive orders each bucket's records by (user, problem) and derives
// each user, in id order: its groups through Deriver.PairIn and a
// UserTally (the derivation every path shares), each group's entries found
// in the user's slice of the entry index; an entry no group reaches
// compares with the start value, as Builder.Finish does.
//
// A bucket is ordered by a counting sort of its record indexes by user
// and, within a user, by problem; its memory is released once derived.
func (s *state) derive(ctx context.Context, recs *buckets) error {
	s.rep.Submissions = recs.n
	nu := len(s.names)
	ents, estart := s.entriesByUser()
	s.visited = make([][]*materialize.Homework, len(s.problemIDs))
	for i, id := range s.problemIDs {
		s.visited[i] = s.cat.Visited(id)
	}
	// Within a user, records sort by problem as packed integers
	// (problem offset, record index) when the problems span under 2^32.
	packed := recs.n > 0 && uint64(recs.pmax-recs.pmin) < 1<<32
	var keys []uint64
	p := s.opts.Progress
	p.Begin("deriving", progress.Documents, int64(recs.n))
	// compare keeps a drifted entry's Clone.
	u := userDeriver{s: s, d: materialize.NewBulkDeriver(), start: materialize.StartEntry()}
	var idx, tmp, ul, pstarts []uint32
	starts := make([]uint32, 1<<recs.bits+1)
	var none records
	for lo := 0; lo < nu; lo += 1 << recs.bits {
		hi := min(lo+1<<recs.bits, nu)
		bucket := &none
		if bk := lo >> recs.bits; bk < len(recs.b) {
			bucket = &recs.b[bk]
		}
		// Counting sort of the bucket's record indexes by user; when the
		// problems span no more values than the bucket has records, first
		// a counting sort by problem (both stable: LSD), else a sort of
		// each user's records by problem.
		span := uint64(recs.pmax - recs.pmin)
		byProblem := bucket.n > 0 && span < uint64(bucket.n)
		clear(starts)
		ul = slices.Grow(ul[:0], bucket.n)[:bucket.n]
		if byProblem {
			pstarts = slices.Grow(pstarts[:0], int(span)+2)[:span+2]
			clear(pstarts)
		}
		for bi, blk := range bucket.blocks {
			for i := range blk {
				u := blk[i].uid() - uint32(lo)
				ul[bi<<blockBits+i] = u
				starts[u+1]++
				if byProblem {
					pstarts[blk[i].problem-recs.pmin+1]++
				}
			}
		}
		for i := 1; i < len(starts); i++ {
			starts[i] += starts[i-1]
		}
		idx = slices.Grow(idx[:0], bucket.n)[:bucket.n]
		next := slices.Clone(starts[:len(starts)-1])
		if byProblem {
			for i := 1; i < len(pstarts); i++ {
				pstarts[i] += pstarts[i-1]
			}
			tmp = slices.Grow(tmp[:0], bucket.n)[:bucket.n]
			for bi, blk := range bucket.blocks {
				for i := range blk {
					p := blk[i].problem - recs.pmin
					tmp[pstarts[p]] = uint32(bi<<blockBits + i)
					pstarts[p]++
				}
			}
			for _, i := range tmp {
				idx[next[ul[i]]] = i
				next[ul[i]]++
			}
		} else {
			for i := range ul {
				idx[next[ul[i]]] = uint32(i)
				next[ul[i]]++
			}
		}
		for id := lo; id < hi; id++ {
			mine := idx[starts[id-lo]:starts[id-lo+1]]
			switch {
			case byProblem:
			case packed:
				keys = keys[:0]
				for _, i := range mine {
					keys = append(keys, uint64(bucket.at(i).problem-recs.pmin)<<32|uint64(i))
				}
				slices.Sort(keys)
				for k, key := range keys {
					mine[k] = uint32(key)
				}
			default:
				slices.SortFunc(mine, func(a, b uint32) int { return cmp.Compare(bucket.at(a).problem, bucket.at(b).problem) })
			}
			u.user(s.names[id], s.docs[id], bucket, mine, ents[estart[id]:estart[id+1]])
			p.Advance(int64(len(mine)))
		}
		bucket.free()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	s.rep.PenaltyErrors = u.penaltyErrors
	return nil
}

// entriesByUser returns the live entries ordered by user id and, within a
// user, by problem index (underived last), and where each user's start:
// user id's entries are ents[start[id]:start[id+1]]. Two stable counting
// sorts, by problem then by user, the second into the index's memory,
// which it takes over.
func (s *state) entriesByUser() (ents []entry, start []uint32) {
	byProblem := make([]uint32, len(s.problemIDs)+2)
	live := 0
	for i := range s.entries {
		if e := &s.entries[i]; e.user != deadUser {
			byProblem[e.problem+1]++
			live++
		}
	}
	for i := 1; i < len(byProblem); i++ {
		byProblem[i] += byProblem[i-1]
	}
	tmp := make([]entry, live)
	for _, e := range s.entries {
		if e.user != deadUser {
			tmp[byProblem[e.problem]] = e
			byProblem[e.problem]++
		}
	}
	start = make([]uint32, len(s.names)+1)
	for i := range tmp {
		start[tmp[i].user+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	// Into the index's own memory, free once tmp holds the live entries.
	ents, s.entries = s.entries[:live], nil
	next := slices.Clone(start[:len(start)-1])
	for _, e := range tmp {
		ents[next[e.user]] = e
		next[e.user]++
	}
	return ents, start
}

// userDeriver derives one user at a time and compares with the stored
// values.
type userDeriver struct {
	s             *state
	d             *materialize.BulkDeriver
	start         materialize.Entry // the start value, compared with entries no group reaches
	tally         materialize.UserTally
	group         []materialize.Submission
	holding       []*materialize.Homework
	at            []holdingEntry
	penaltyErrors int
}

// holdingEntry is an entry of a group's pair and its homework's position
// in the problem's visiting order.
type holdingEntry struct {
	pos int
	e   *entry
}

// user derives user name (its document doc, nil when it has none) from
// its records bucket.at(i) for i in mine, sorted by problem, and its
// entries ents, as entriesByUser orders them.
func (u *userDeriver) user(name string, doc *user, bucket *records, mine []uint32, ents []entry) {
	u.tally = materialize.UserTally{}
	k := 0 // next entry not yet compared
	for i := 0; i < len(mine); {
		problem := bucket.at(mine[i]).problem
		j := i + 1
		for j < len(mine) && bucket.at(mine[j]).problem == problem {
			j++
		}
		// Replay order, (timestamp, _id), sorted here on 4-byte indexes
		// rather than by the derivation on whole submissions (it then
		// only checks the order).
		switch g := mine[i:j]; {
		case len(g) <= 8:
			// Insertion sort: groups are a few submissions.
			for a := 1; a < len(g); a++ {
				for b := a; b > 0 && replayBefore(bucket.at(g[b]), bucket.at(g[b-1])); b-- {
					g[b], g[b-1] = g[b-1], g[b]
				}
			}
		default:
			slices.SortFunc(g, func(a, b uint32) int {
				switch ra, rb := bucket.at(a), bucket.at(b); {
				case replayBefore(ra, rb):
					return -1
				case replayBefore(rb, ra):
					return 1
				}
				return 0
			})
		}
		u.group = u.group[:0]
		for _, idx := range mine[i:j] {
			r := bucket.at(idx)
			u.group = append(u.group, r.submission(name, u.s.wide))
			u.tally.Add(&u.group[len(u.group)-1])
		}
		i = j
		ids, never := u.s.problemIDs, u.s.underived()
		for k < len(ents) && ents[k].problem != never && ids[ents[k].problem] < problem {
			u.s.compare(&ents[k], name, &u.start)
			k++
		}
		l := k
		for l < len(ents) && ents[l].problem != never && ids[ents[l].problem] == problem {
			l++
		}
		if l == k {
			continue // no entry to derive: the group only counts for the user
		}
		// The group's entries in the homeworks its submissions visit, in
		// visiting order; an entry in a homework the problem does not
		// list is never reached.
		visited := u.s.visited[ents[k].problem]
		u.at = u.at[:0]
		for m := k; m < l; m++ {
			e := &ents[m]
			pos := slices.Index(visited, u.s.hws[e.hw].h)
			if pos < 0 {
				u.s.compare(e, name, &u.start)
				continue
			}
			u.at = append(u.at, holdingEntry{pos, e})
		}
		k = l
		if len(u.at) > 1 {
			slices.SortFunc(u.at, func(a, b holdingEntry) int { return cmp.Compare(a.pos, b.pos) })
		}
		u.holding = u.holding[:0]
		for _, a := range u.at {
			u.holding = append(u.holding, visited[a.pos])
		}
		res := u.d.PairIn(name, problem, u.group, u.holding)
		u.penaltyErrors += res.PenaltyErrors
		for m := range res.Entries {
			u.s.compare(u.at[m].e, name, &res.Entries[m].Entry)
		}
	}
	for ; k < len(ents); k++ {
		u.s.compare(&ents[k], name, &u.start)
	}
	if doc == nil {
		return // no user document: never create one
	}
	var st materialize.UserStats
	if len(mine) > 0 {
		st = u.tally.Stats()
	} else {
		st = materialize.UserStats{ACProblemIDs: []int64{}}
	}
	u.s.compareUser(name, doc, st)
}

// replayBefore orders records as the derivation replays them: by
// (timestamp, _id), materialize.Submission.Before.
func replayBefore(a, b *record) bool {
	if a.timestamp != b.timestamp {
		return a.timestamp < b.timestamp
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

// compareUser compares a user's derived fields with its document's.
func (s *state) compareUser(name string, u *user, st materialize.UserStats) {
	s.rep.Users++
	if u.storedOK && u.stored.Equal(st) {
		return
	}
	s.rep.DriftedUsers++
	if len(s.rep.Diffs) < s.opts.MaxDiffs {
		s.rep.Diffs = append(s.rep.Diffs, drift.UserDiff(name, u.stored, u.storedOK, st))
	}
	u.fix = &st
}

// compare compares entry e of user name with its derived value d in place,
// and keeps a drifted value for the output.
func (s *state) compare(e *entry, name string, d *materialize.Entry) {
	s.rep.Entries++
	hw := s.hws[e.hw]
	t, key, val, _ := materialize.ElementAt(hw.raw[e.elem:]) // read when indexed
	v := bson.RawValue{Type: t, Value: val}
	if d.MatchesStored(v) {
		return
	}
	s.rep.DriftedEntries++
	pk := s.problemKey(e.problem, key)
	if len(s.rep.Diffs) < s.opts.MaxDiffs {
		s.rep.Diffs = append(s.rep.Diffs, drift.EntryDiff(hw.h.ID, name, pk, v, true, *d))
	}
	hw.drifted = true
	hw.grow += d.EncodedSize() - len(v.Value)
	switch {
	case hw.dups:
		// Kept for a verify too: the patch by key may rewrite several
		// occurrences, which checkSizes measures by patching.
		if hw.fix == nil {
			hw.fix = make(map[entryKey]materialize.Entry)
		}
		hw.fix[entryKey{name, pk}] = d.Clone() // d may be the BulkDeriver's
	case s.opts.Out == "":
	default:
		// Encoded into chunks that never grow: no copies, no garbage.
		n := d.EncodedSize()
		if len(s.arena) == 0 || cap(s.arena[len(s.arena)-1])-len(s.arena[len(s.arena)-1]) < n {
			s.arena = append(s.arena, make([]byte, 0, max(arenaChunk, n)))
		}
		c := &s.arena[len(s.arena)-1]
		off := len(*c)
		*c = d.AppendBSON(*c)
		hw.at = append(hw.at, fixAt{elem: e.elem, chunk: uint32(len(s.arena) - 1), off: uint32(off), n: uint32(n)})
	}
}
