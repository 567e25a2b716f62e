// Package offline verifies and repairs a mongodump directory without a
// server, streaming the dump instead of loading it into a database
// emulation: submissions become compact records (interned user ids and only
// the fields the derivation reads), sorted on compact keys; the derivation
// is the same materialize.Builder and Deriver as the online rebuild; stored
// entries are compared in place in their bytes; each homework that drifted
// is patched once, while the output is written.
//
// Memory is the catalog (problems, homework key sets), the raw user and
// homework documents (they are rewritten), one 56-byte record per
// submission, and the drifted values.
package offline

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
	"github.com/normal-oj/noj-materializer/watch"
)

// Options control a Run.
type Options struct {
	// Out is the directory to write the corrected dump to; empty for a
	// verify or a dry run. It must have passed CheckOut.
	Out string
	// MaxDiffs is how many differences to keep in the report.
	MaxDiffs int
	// Progress counts the documents read and processed (nil: silent).
	Progress *progress.Reporter

	// bucketShift: about 1<<bucketShift records per bucket in derive (15
	// when zero; tests make buckets tiny).
	bucketShift uint
}

// TooLargeError reports homeworks whose corrected document would exceed
// MongoDB's 16 MiB limit (materialize.MaxDocumentSize): the server would
// refuse the update and mongorestore the document.
type TooLargeError struct {
	Homeworks []Oversized
}

// Oversized is one homework over the limit and its corrected size in bytes.
type Oversized struct {
	ID   bson.ObjectID
	Size int
}

func (e *TooLargeError) Error() string {
	parts := make([]string, 0, len(e.Homeworks))
	for _, h := range e.Homeworks {
		parts = append(parts, fmt.Sprintf("homework %s would be %d bytes", h.ID.Hex(), h.Size))
	}
	return fmt.Sprintf("%s: over MongoDB's %d-byte (16 MiB) document limit; the server would refuse the update and mongorestore the document",
		strings.Join(parts, ", "), materialize.MaxDocumentSize)
}

// CheckOut checks, before any work, that out can receive the corrected
// copy of dump d: it is not inside the dump (nor the dump itself), not a
// file, and empty or absent. Errors say which.
func CheckOut(d dump.Dir, out string) error {
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	for _, in := range []string{d.Root, d.Path} {
		if in == "" {
			continue
		}
		inAbs, err := filepath.Abs(in)
		if err != nil {
			return fmt.Errorf("--dump %s: %w", in, err)
		}
		if rel, err := filepath.Rel(inAbs, outAbs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("--out %s is inside the input dump %s (write the copy elsewhere)", out, in)
		}
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--out %s: %w", out, err)
	case !st.IsDir():
		return fmt.Errorf("--out %s is a file, not a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--out %s is not empty (refusing to overwrite)", out)
	}
	return nil
}

// gcPercent is the GOGC of a Run (see Run).
const gcPercent = 400

// record is one submission, compactly: what materialize.Submission holds,
// with the user as an index into the interned names (56 bytes).
type record struct {
	id          bson.ObjectID
	user        uint32
	handwritten bool
	problem     int64
	timestamp   int64
	status      int64
	score       int64
}

// blockBits sizes the blocks submissions are read into: appending never
// copies what was read (no doubling of a large slice).
const blockBits = 16

// bucketBits sizes the blocks of a bucket (see derive).
const bucketBits = 12

// records is an append-only sequence of records in blocks of 1<<bits,
// kept outside the Go heap (offHeap).
type records struct {
	bits   uint
	blocks [][]record
	frees  []func() // nil for a block taken from spare
	n      int
	// spare, when set, holds blocks of 1<<bits records already mapped
	// (and touched), taken before mapping new ones: derive moves the
	// records into buckets carved from the blocks it has moved them out
	// of, rather than faulting in as much fresh memory again.
	spare *[][]record
}

func (rs *records) add(r record) error {
	if rs.n>>rs.bits == len(rs.blocks) {
		var b []record
		var free func()
		if rs.spare != nil && len(*rs.spare) > 0 {
			sp := *rs.spare
			b, *rs.spare = sp[len(sp)-1], sp[:len(sp)-1]
		} else {
			var err error
			if b, free, err = offHeap[record](1 << rs.bits); err != nil {
				return fmt.Errorf("submission records: %w", err)
			}
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
	return &rs.blocks[i>>rs.bits][i&(1<<rs.bits-1)]
}

// freeBlock releases block i, which must not be read again.
func (rs *records) freeBlock(i int) {
	if rs.frees[i] != nil {
		rs.frees[i]()
		rs.frees[i] = nil
	} else if rs.blocks[i] != nil {
		release(rs.blocks[i]) // a spare block: its mapping is freed later
	}
	rs.blocks[i] = nil
}

// recycle hands block i, which must not be read again, to spare in
// blocks of 1<<bits records; its memory is unmapped by free.
func (rs *records) recycle(i int, bits uint, spare *[][]record) {
	b := rs.blocks[i]
	b = b[:cap(b)]
	for c := 0; c+1<<bits <= len(b); c += 1 << bits {
		*spare = append(*spare, b[c:c:c+1<<bits])
	}
	rs.blocks[i] = nil
}

// free releases every block; the records are unusable afterwards.
func (rs *records) free() {
	for i := range rs.frees {
		rs.freeBlock(i)
	}
	rs.blocks, rs.frees, rs.n = nil, nil, 0
}

// homework is a homework document and what the comparison and the patch
// need of it.
type homework struct {
	raw bson.Raw
	// students maps a user to the bytes of its studentStatus document
	// (the last document-valued one among duplicate keys, as
	// materialize.DecodeHomework reads key sets).
	students map[string][]byte
	// fix maps (user, problem key) to the derived value of a drifted
	// entry (kept only when writing an output).
	fix     map[entryKey]materialize.Entry
	drifted bool
	grow    int // size change of the corrected document, bytes
}

// entryKey names an entry of a homework.
type entryKey struct{ user, pk string }

type user struct {
	raw    bson.Raw
	stored watch.StoredUser
	fix    *materialize.UserStats
}

// slot is a document in file order and, when it was decoded and is the
// one its _id names (a later duplicate replaces an earlier one), its state.
type slot[T any] struct {
	raw bson.Raw
	of  *T
}

// state is one Run's catalog, stored values and results.
type state struct {
	opts      Options
	rep       *watch.RebuildReport
	cat       *materialize.Catalog
	homeworks map[bson.ObjectID]*homework
	hwOrder   []slot[homework] // every homework document in file order
	users     map[string]*user
	userOrder []slot[user]
	names     []string // interned user names
	ids       map[string]uint32
	keys      map[string]string // interned studentStatus keys (users, problem keys)
	lastHW    *homework
	lastID    bson.ObjectID
	// lastUser, lastDoc: the stored studentStatus document of lastUser in
	// lastHW (Finish emits a user's entries of a homework one after the
	// other).
	lastUser string
	lastDoc  []byte
}

// Run verifies dump d (Options.Out empty) or writes its corrected copy to
// Options.Out: into a temporary sibling directory first, renamed into place
// at the end, so a failed run leaves nothing that blocks a retry. The
// report counts what drifted; the error is a *TooLargeError when a
// corrected homework would exceed 16 MiB (the report is returned too), or
// a read or write error.
func Run(ctx context.Context, d dump.Dir, opts Options) (*watch.RebuildReport, error) {
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the catalog, live for the whole run, which
		// the default GOGC=100 rescans at every doubling: 400 cut the CPU
		// of a 1M-submission verify by about 10% for about 40 MB more peak
		// RSS (the records are off the heap). An explicit GOGC wins.
		defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	}
	s := &state{opts: opts, rep: &watch.RebuildReport{}, cat: materialize.NewCatalog(),
		homeworks: make(map[bson.ObjectID]*homework), users: make(map[string]*user), ids: make(map[string]uint32),
		keys: make(map[string]string)}
	var tmp string
	if opts.Out != "" {
		// Created before any work, so an unwritable place fails at once.
		parent := filepath.Dir(filepath.Clean(opts.Out))
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		var err error
		if tmp, err = os.MkdirTemp(parent, "."+filepath.Base(opts.Out)+".partial-"); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
		defer func() {
			if tmp != "" {
				_ = os.RemoveAll(tmp)
			}
		}()
	}
	if err := s.readCatalog(ctx, d); err != nil {
		return nil, err
	}
	recs, err := s.readSubmissions(ctx, d)
	defer recs.free()
	if err != nil {
		return nil, err
	}
	err = s.derive(ctx, recs)
	recs.free() // before the output is written
	if err != nil {
		return nil, err
	}
	if err := s.checkSizes(); err != nil {
		return s.rep, err
	}
	if opts.Out == "" {
		return s.rep, nil
	}
	opts.Progress.Phase("writing")
	if err := d.CopyTo(tmp, map[string]dump.Rewrite{
		materialize.CollUser:     s.writeUsers,
		materialize.CollHomework: s.writeHomeworks,
	}); err != nil {
		return s.rep, err
	}
	if err := os.Remove(opts.Out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s.rep, fmt.Errorf("--out %s: %w", opts.Out, err) // not empty any more: refused
	}
	if err := os.Rename(tmp, opts.Out); err != nil {
		return s.rep, fmt.Errorf("--out: %w", err)
	}
	tmp = ""
	return s.rep, nil
}

// malformed records a document the derivation cannot read; corrupt bytes
// (the reader checks only the framing) fail the run naming the file and
// the document's number.
func (s *state) malformed(d dump.Dir, coll string, n int, err error) error {
	var de *materialize.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	if de.Unreadable() {
		return fmt.Errorf("read dump %s: document number %d: %w", d.File(coll), n, err)
	}
	s.rep.Malformed = append(s.rep.Malformed, de)
	return nil
}

// readCatalog reads problems, homeworks and users.
func (s *state) readCatalog(ctx context.Context, d dump.Dir) error {
	p := s.opts.Progress
	// The decoders validate the whole document (Raw.Validate and a
	// check of every element), so the reader checks only the framing.
	p.Phase("problems")
	n := 0
	err := d.Each(materialize.CollProblem, false, func(doc bson.Raw) error {
		p.Add(1)
		n++
		pr, err := materialize.DecodeProblem(doc)
		if err != nil {
			return s.malformed(d, materialize.CollProblem, n, err)
		}
		s.cat.AddProblem(pr)
		return nil
	})
	if err != nil {
		return err
	}
	p.Phase("homeworks")
	n = 0
	err = d.Each(materialize.CollHomework, false, func(doc bson.Raw) error {
		p.Add(1)
		n++
		raw := bson.Raw(bytes.Clone(doc))
		students := make(map[string][]byte)
		h, err := materialize.HomeworkDecoder{Intern: s.internKey,
			User: func(user string, entries []byte) { students[user] = entries }}.Decode(raw)
		if err != nil {
			s.hwOrder = append(s.hwOrder, slot[homework]{raw: raw})
			return s.malformed(d, materialize.CollHomework, n, err)
		}
		s.rep.Malformed = append(s.rep.Malformed, h.Skipped...)
		s.cat.AddHomework(h)
		hw := &homework{raw: raw, students: students}
		s.homeworks[h.ID] = hw
		s.hwOrder = append(s.hwOrder, slot[homework]{raw: raw, of: hw})
		return nil
	})
	if err != nil {
		return err
	}
	p.Phase("users")
	if err := ctx.Err(); err != nil {
		return err
	}
	n = 0
	return d.Each(materialize.CollUser, false, func(doc bson.Raw) error {
		p.Add(1)
		n++
		raw := bson.Raw(bytes.Clone(doc))
		name, err := materialize.DecodeUserID(raw)
		if err != nil {
			s.userOrder = append(s.userOrder, slot[user]{raw: raw})
			return s.malformed(d, materialize.CollUser, n, err)
		}
		st, ok := materialize.DecodeUserStats(raw)
		// A later document with the same _id replaces an earlier one, as a
		// store keyed by _id would.
		u := &user{raw: raw, stored: watch.StoredUser{Stats: st, OK: ok}}
		s.users[name] = u
		s.userOrder = append(s.userOrder, slot[user]{raw: raw, of: u})
		return nil
	})
}

// internKey returns the one string held for a studentStatus key.
func (s *state) internKey(b []byte) string {
	if k, ok := s.keys[string(b)]; ok {
		return k
	}
	k := string(b)
	s.keys[k] = k
	return k
}

// intern returns the index of a user name, adding it the first time.
func (s *state) intern(name []byte) uint32 {
	if i, ok := s.ids[string(name)]; ok {
		return i
	}
	i := uint32(len(s.names))
	n := string(name)
	s.names = append(s.names, n)
	s.ids[n] = i
	return i
}

// readSubmissions reads every submission into a compact record. The
// documents' framing and every top-level element are checked (by the
// reader and the decoder); values the derivation does not read are not
// decoded.
func (s *state) readSubmissions(ctx context.Context, d dump.Dir) (*records, error) {
	p := s.opts.Progress
	p.Phase("submissions")
	recs := &records{bits: blockBits}
	var cur uint32
	intern := func(b []byte) string {
		cur = s.intern(b)
		return s.names[cur]
	}
	n := 0
	err := d.Each(materialize.CollSubmission, false, func(doc bson.Raw) error {
		p.Add(1)
		if n++; n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		sub, err := materialize.DecodeSubmissionInterned(doc, intern)
		if err != nil {
			return s.malformed(d, materialize.CollSubmission, n, err)
		}
		return recs.add(record{id: sub.ID, user: cur, handwritten: sub.Handwritten, problem: sub.Problem,
			timestamp: sub.Timestamp, status: sub.Status, score: sub.Score})
	})
	return recs, err
}

// derive orders the records by (user, problem), users by name as the
// online rebuild's scan does, and runs the Builder over the groups (the
// derivation sorts each group by (timestamp, _id) itself).
//
// The records are first moved, block by block (each read block freed once
// moved), into buckets of consecutive user ranks small enough to stay in
// the processor's caches; each bucket is then ordered by a counting sort of
// indexes by user and, within a user, by problem, and derived. Sorting the
// whole sequence by index instead would cost a cache miss per record.
func (s *state) derive(ctx context.Context, recs *records) error {
	s.rep.Submissions = recs.n
	order := make([]uint32, len(s.names))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(s.names[a], s.names[b]) })
	rank := make([]uint32, len(s.names))
	for r, i := range order {
		rank[i] = uint32(r)
	}
	nu := len(s.names)
	shift := s.opts.bucketShift
	if shift == 0 {
		shift = 15 // about 32k records (1.8 MB) per bucket
	}
	nb := min(max(recs.n>>shift, 1), 1024, max(nu, 1))
	bucketOf := func(r uint32) int { return int(uint64(r) * uint64(nb) / uint64(nu)) }
	buckets := make([]records, nb)
	var spare [][]record
	for i := range buckets {
		buckets[i].bits = bucketBits
		buckets[i].spare = &spare
	}
	defer func() {
		for i := range buckets {
			buckets[i].free()
		}
	}()
	pmin, pmax := int64(math.MaxInt64), int64(math.MinInt64)
	for bi, b := range recs.blocks {
		for i := range b {
			r := b[i]
			r.user = rank[r.user]
			pmin, pmax = min(pmin, r.problem), max(pmax, r.problem)
			if err := buckets[bucketOf(r.user)].add(r); err != nil {
				return err
			}
		}
		recs.recycle(bi, bucketBits, &spare)
	}
	// Within a user, records sort by problem as packed integers
	// (problem offset, record index) when the problems span under 2^32.
	packed := recs.n > 0 && uint64(pmax-pmin) < 1<<32
	var keys []uint64
	p := s.opts.Progress
	p.Phase("deriving")
	p.SetTotal(p.Done() + int64(recs.n))
	b := materialize.NewBuilder(materialize.NewDeriver(), s.cat, s)
	var group []materialize.Submission
	var idx []uint32
	starts := make([]uint32, 0, nu/nb+2)
	for bk := range buckets {
		bucket := &buckets[bk]
		lo := uint32((uint64(bk)*uint64(nu) + uint64(nb) - 1) / uint64(nb)) // first rank with bucketOf == bk
		for lo > 0 && bucketOf(lo-1) == bk {
			lo--
		}
		hi := lo
		for int(hi) < nu && bucketOf(hi) == bk {
			hi++
		}
		// Counting sort of the bucket's record indexes by user rank.
		starts = starts[:0]
		starts = append(starts, make([]uint32, int(hi-lo)+1)...)
		for _, blk := range bucket.blocks {
			for i := range blk {
				starts[blk[i].user-lo+1]++
			}
		}
		for i := 1; i < len(starts); i++ {
			starts[i] += starts[i-1]
		}
		idx = slices.Grow(idx[:0], bucket.n)[:bucket.n]
		next := slices.Clone(starts[:len(starts)-1])
		for bi, blk := range bucket.blocks {
			for i := range blk {
				u := blk[i].user - lo
				idx[next[u]] = uint32(bi<<bucketBits + i)
				next[u]++
			}
		}
		for u := lo; u < hi; u++ {
			mine := idx[starts[u-lo]:starts[u-lo+1]]
			if len(mine) == 0 {
				continue
			}
			if packed {
				keys = keys[:0]
				for _, i := range mine {
					keys = append(keys, uint64(bucket.at(i).problem-pmin)<<32|uint64(i))
				}
				slices.Sort(keys)
				for k, key := range keys {
					mine[k] = uint32(key)
				}
			} else {
				slices.SortFunc(mine, func(a, b uint32) int { return cmp.Compare(bucket.at(a).problem, bucket.at(b).problem) })
			}
			name := s.names[order[u]]
			for i := 0; i < len(mine); {
				problem := bucket.at(mine[i]).problem
				group = group[:0]
				j := i + 1
				for j < len(mine) && bucket.at(mine[j]).problem == problem {
					j++
				}
				// Replay order, (timestamp, _id), sorted here on 4-byte
				// indexes rather than by the derivation on whole
				// submissions (it then only checks the order).
				if j-i > 1 {
					slices.SortFunc(mine[i:j], func(a, b uint32) int {
						ra, rb := bucket.at(a), bucket.at(b)
						if c := cmp.Compare(ra.timestamp, rb.timestamp); c != 0 {
							return c
						}
						return bytes.Compare(ra.id[:], rb.id[:])
					})
				}
				for k := i; k < j; k++ {
					r := bucket.at(mine[k])
					group = append(group, materialize.Submission{ID: r.id, User: name, Problem: r.problem, Handwritten: r.handwritten,
						Timestamp: r.timestamp, Status: r.status, Score: r.score})
				}
				if err := b.Group(name, problem, group); err != nil {
					return err
				}
				p.Add(j - i)
				i = j
			}
		}
		bucket.free()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(s.users))
	for u := range s.users {
		names = append(names, u)
	}
	if err := b.Finish(names); err != nil {
		return err
	}
	s.rep.PenaltyErrors = b.PenaltyErrors
	return nil
}

// User implements materialize.Sink: compare with the stored fields.
func (s *state) User(name string, st materialize.UserStats) error {
	u, ok := s.users[name]
	if !ok {
		return nil // no user document: never create one
	}
	s.rep.Users++
	if u.stored.OK && u.stored.Stats.Equal(st) {
		return nil
	}
	s.rep.DriftedUsers++
	if len(s.rep.Diffs) < s.opts.MaxDiffs {
		s.rep.Diffs = append(s.rep.Diffs, watch.UserDiff(name, u.stored, st))
	}
	u.fix = &st
	return nil
}

// Entry implements materialize.Sink: compare with the stored value in
// place, and keep a drifted value for the output.
func (s *state) Entry(h bson.ObjectID, userName, pk string, e materialize.Entry) error {
	s.rep.Entries++
	// Entries come homework by homework (Finish) or a few homeworks per
	// group: remember the last homework.
	hw := s.lastHW
	if hw == nil || s.lastID != h {
		hw = s.homeworks[h]
		s.lastHW, s.lastID = hw, h
		s.lastUser, s.lastDoc = userName, hw.students[userName]
	} else if userName != s.lastUser {
		s.lastUser, s.lastDoc = userName, hw.students[userName]
	}
	v, ok := materialize.LastValue(s.lastDoc, pk)
	if ok && e.MatchesStored(v) {
		return nil
	}
	s.rep.DriftedEntries++
	if len(s.rep.Diffs) < s.opts.MaxDiffs {
		s.rep.Diffs = append(s.rep.Diffs, watch.EntryDiff(h, userName, pk, v, ok, e))
	}
	if !ok {
		return nil // no stored entry to replace: never add one
	}
	hw.drifted = true
	hw.grow += e.EncodedSize() - len(v.Value)
	if s.opts.Out != "" {
		if hw.fix == nil {
			hw.fix = make(map[entryKey]materialize.Entry)
		}
		hw.fix[entryKey{userName, pk}] = e
	}
	return nil
}

// checkSizes fails when a corrected homework would exceed 16 MiB, naming
// every such homework and its size.
func (s *state) checkSizes() error {
	var over []Oversized
	for id, hw := range s.homeworks {
		if size := len(hw.raw) + hw.grow; hw.drifted && size > materialize.MaxDocumentSize {
			over = append(over, Oversized{ID: id, Size: size})
		}
	}
	if len(over) == 0 {
		return nil
	}
	slices.SortFunc(over, func(a, b Oversized) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return &TooLargeError{Homeworks: over}
}

func (s *state) writeUsers(emit func([]byte) error) error {
	for _, sl := range s.userOrder {
		raw, u := sl.raw, sl.of
		if u == nil || u.fix == nil {
			if err := emit(raw); err != nil {
				return err
			}
			continue
		}
		patched, err := materialize.PatchUser(raw, *u.fix)
		if err != nil {
			return err
		}
		if err := emit(patched); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) writeHomeworks(emit func([]byte) error) error {
	var buf []byte
	for _, sl := range s.hwOrder {
		raw, hw := sl.raw, sl.of
		if hw == nil || hw.fix == nil {
			if err := emit(raw); err != nil {
				return err
			}
			continue
		}
		var err error
		buf, err = materialize.PatchEntries(buf[:0], raw, func(user, pk []byte) (materialize.Entry, bool) {
			e, ok := hw.fix[entryKey{unsafeString(user), unsafeString(pk)}]
			return e, ok
		})
		if err != nil {
			return err
		}
		if len(buf) > materialize.MaxDocumentSize {
			id, _ := raw.Lookup("_id").ObjectIDOK()
			return &TooLargeError{Homeworks: []Oversized{{ID: id, Size: len(buf)}}}
		}
		if err := emit(buf); err != nil {
			return err
		}
	}
	return nil
}

// unsafeString views b as a string for a map lookup (the key is not kept).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
