// Package offline verifies and repairs a mongodump directory without a
// server, streaming the dump instead of loading it into a database
// emulation.
//
//   - Homeworks are kept as read, and every studentStatus entry is indexed
//     in 16 bytes (its user, problem and the offset of its element), no
//     per-user key sets: the stored value is compared in place in the
//     homework's bytes.
//   - Submissions become 40-byte records (interned user id and only the
//     fields the derivation reads), read straight into buckets of 256
//     users kept outside the Go heap, and ordered per bucket by counting
//     sorts.
//   - Each user is derived once, with the same derivation as every other
//     path: materialize.Deriver.PairIn for each (user, problem) group and
//     materialize.UserTally; entries no group reaches compare with the
//     start value, as materialize.Builder.Finish does.
//   - A drifted entry's value is encoded once into an arena, and each
//     homework that drifted is patched once, by offset, while the output
//     is written (by key when the homework names an entry twice, as the
//     online rebuild does).
//
// Memory is the homework documents, 16 bytes per entry, 40 per submission
// and the encoded drifted values (the user documents too with an output).
package offline

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
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
	// Write, when set, writes the corrected copy instead of a directory
	// at Out (Out then only says that there is an output): it is called
	// once, after the derivation, with the rewrites of the collections
	// that change, as Dir.CopyTo takes them (an archive's writer).
	Write func(ctx context.Context, rewrite map[string]dump.Rewrite) error

	// userBits: 1<<userBits users per bucket of records (bucketUserBits
	// when zero; tests make buckets tiny).
	userBits uint
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

// PathError is a problem with a path a run was given: the output the
// corrected copy goes to (Options.Out, CheckOut's out) or, when Input,
// the dump it reads. Err names the path; a command words it with the
// option that gave the path.
type PathError struct {
	Input bool // the dump read, not the output
	Err   error
}

func (e *PathError) Error() string { return e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

// outputError marks err as a problem with the output.
func outputError(err error) error { return &PathError{Err: err} }

// CheckOut checks, before any work, that out can receive the corrected
// copy of dump d: it is not inside the dump (nor the dump itself), even
// through a symbolic link of either path, not a file, and empty or
// absent (dump.CheckOutput). Errors are *PathErrors saying which.
func CheckOut(d dump.Dir, out string) error {
	outAbs, err := dump.ResolvePath(out)
	if err != nil {
		return outputError(fmt.Errorf("output %s: %w", out, err))
	}
	for _, in := range []string{d.Root, d.Path} {
		if in == "" {
			continue
		}
		inAbs, err := dump.ResolvePath(in)
		if err != nil {
			return &PathError{Input: true, Err: fmt.Errorf("dump %s: %w", in, err)}
		}
		if rel, err := filepath.Rel(inAbs, outAbs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return outputError(fmt.Errorf("output %s is inside the input dump %s (write the copy elsewhere)", out, in))
		}
	}
	if err := dump.CheckOutput(out); err != nil {
		return outputError(err)
	}
	return nil
}

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

// homework is a homework document and what the comparison and the patch
// need of it.
type homework struct {
	raw bson.Raw
	h   *materialize.Homework // the catalog's (what Catalog.Visited returns)
	// entries are its studentStatus entries: entries[first:end] of the
	// state (dead once a later document with its _id replaces it).
	first, end uint32
	// The derived values of drifted entries: by offset, encoded in the
	// state's arena (kept only when writing an output), patched with
	// materialize.PatchAt; or, in a homework whose entries are not each
	// named once (dups), by (user, problem key), patched with
	// materialize.PatchEntries, which replaces every occurrence of a key
	// as the online rebuild does (kept for a verify too: checkSizes).
	at      []fixAt
	fix     map[entryKey]materialize.Entry
	dups    bool
	drifted bool
	skipped []*materialize.DecodeError // its Skipped, reported unless replaced
	grow    int                        // size change of the corrected document, bytes
}

// fixAt is the offset of a drifted entry's element in its homework and
// where its derived value is encoded: arena[chunk][off:off+n].
type fixAt struct{ elem, chunk, off, n uint32 }

// arenaChunk is the size of the chunks of the state's arena (bytes).
const arenaChunk = 1 << 20

// entryKey names an entry of a homework.
type entryKey struct{ user, pk string }

// entry is one studentStatus entry of a homework document, compactly (16
// bytes, no pointers: the heap holds a million of them unscanned): whose
// it is and where its element lies in the homework's bytes. The stored
// value is the last element of the user's document with the key
// (materialize.LastValue), from the user's last document-valued
// studentStatus.<user> (the key sets' rule).
type entry struct {
	elem    uint32 // offset of the element (its type byte) in the homework's bytes
	hw      uint32 // index into state.hws
	user    uint32 // interned user id; deadUser once replaced
	problem uint32 // index into state.problemIDs; underived when no group can reach it
}

// deadUser marks an entry replaced by a later duplicate (a user key of its
// homework, or the homework's _id).
const deadUser = math.MaxUint32

type user struct {
	stored   materialize.UserStats
	storedOK bool // stored was read (false: missing or unreadable)
	fix      *materialize.UserStats
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
	rep       *drift.Report
	cat       *materialize.Catalog
	hws       []*homework              // decoded homeworks in file order
	homeworks map[bson.ObjectID]uint32 // _id → index in hws of the last one
	hwOrder   []slot[homework]         // every homework document in file order
	entries   []entry                  // every studentStatus entry, homework by homework
	userOrder []slot[user]
	names     []string // interned user names, by id
	ids       map[string]uint32
	docs      []*user // by user id: the user document (nil: none)
	// inDoc[id]: the number in the file (from 1) of the homework whose
	// studentStatus last held user id as a document, whose entries are
	// entries[docFirst[id]:docEnd[id]] (a later document-valued duplicate
	// key replaces them).
	inDoc, docFirst, docEnd []uint32
	dupKeys                 map[string]uint32 // scratch: keys of a large user document
	// bad: by collection, the malformed catalog documents by _id (type
	// and bytes), reported until a later document replaces one.
	bad map[string]map[string]*materialize.DecodeError
	// problemIDs are the catalog's problem ids, sorted; an entry names one
	// by index, or underived() when its key is not str(id) of a problem
	// (only such keys can be derived: any other entry keeps the start
	// value).
	problemIDs []int64
	problemIdx map[int64]uint32
	hwKeys     []hwKey                   // the problem keys met in the homework being read
	dups       bool                      // the homework being read names an entry twice
	badIndex   bool                      // an entry's key did not lie in its homework's bytes (see addEntries)
	pks        []string                  // by problem index: its key, once a drifted entry needed it
	wide       []wideValues              // see record
	visited    [][]*materialize.Homework // by problem index: Catalog.Visited
	arena      [][]byte                  // encoded derived values of drifted entries (see fixAt)
	inputSize  int64                     // bytes of the four collection files (the reading phase's total)
}

// hwKey is a problem key of a homework and its problem index: the users
// of a homework share their keys, parsed once.
type hwKey struct {
	key     string
	problem uint32
}

// underived is the problem index of an entry no group reaches.
func (s *state) underived() uint32 { return uint32(len(s.problemIDs)) }

// Run verifies dump d (Options.Out empty) or writes its corrected copy to
// Options.Out through a dump.Output (a partial directory on the output's
// filesystem, moved into place at the end), or through Options.Write, so a
// failed or interrupted run leaves nothing that blocks a retry. The report
// counts what drifted; the error is a *TooLargeError when a corrected
// homework would exceed 16 MiB (the report is returned too), ctx.Err()
// when ctx was done (checked between documents in every phase), a
// *PathError when the output cannot be created or moved into place, or a
// read or write error.
func Run(ctx context.Context, d dump.Dir, opts Options) (*drift.Report, error) {
	s := &state{opts: opts, rep: &drift.Report{}, cat: materialize.NewCatalog(),
		homeworks: make(map[bson.ObjectID]uint32), ids: make(map[string]uint32), dupKeys: make(map[string]uint32),
		bad: make(map[string]map[string]*materialize.DecodeError)}
	var out *dump.Output
	if opts.Out != "" && opts.Write == nil {
		// Created before any work, so an unwritable place fails at once.
		var err error
		if out, err = dump.CreateOutput(opts.Out); err != nil {
			return nil, outputError(err)
		}
		defer out.Remove() // nothing once committed
	}
	s.inputSize = 0
	for _, c := range dump.Sources {
		s.inputSize += d.FileSize(c)
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
	if opts.Out != "" && opts.Write != nil {
		opts.Progress.Begin("writing", progress.Bytes, 0)
		return s.rep, opts.Write(ctx, s.rewrites())
	}
	if out == nil {
		return s.rep, nil
	}
	if err := s.write(ctx, d, out); err != nil {
		return s.rep, err
	}
	return s.rep, nil
}

// write writes the corrected copy of d into out and moves it into place.
func (s *state) write(ctx context.Context, d dump.Dir, out *dump.Output) error {
	// The total: the files copied as they are, and the documents of the
	// rewritten ones (counted before compression).
	total, err := d.TreeSize()
	if err != nil {
		return err
	}
	total -= d.FileSize(materialize.CollUser) + d.FileSize(materialize.CollHomework)
	for _, sl := range s.userOrder {
		total += int64(len(sl.raw))
	}
	for _, sl := range s.hwOrder {
		total += int64(len(sl.raw))
	}
	p := s.opts.Progress
	p.Begin("writing", progress.Bytes, total)
	if err := d.CopyTo(ctx, out.Dir(), s.rewrites(), p.Advance); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := out.Commit(); err != nil {
		return outputError(err)
	}
	return nil
}

// each reads coll's documents as the phase "reading <coll>" of the
// progress (in bytes of the input files, whose sizes are known before
// reading), checking ctx every few thousand documents.
func (s *state) each(ctx context.Context, d dump.Dir, coll string, fn func(doc bson.Raw) error) error {
	p := s.opts.Progress
	p.Phase("reading " + coll)
	n := 0
	return d.EachRead(coll, false, p.Advance, func(doc bson.Raw) error {
		p.Add(1)
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return fn(doc)
	})
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

// malformedDoc is malformed for catalog document doc, which stays
// reported until a later document with its _id replaces it (supersede).
func (s *state) malformedDoc(d dump.Dir, coll string, n int, doc bson.Raw, err error) error {
	before := len(s.rep.Malformed)
	if err := s.malformed(d, coll, n, err); err != nil || len(s.rep.Malformed) == before {
		return err
	}
	if v, lerr := doc.LookupErr("_id"); lerr == nil {
		if s.bad[coll] == nil {
			s.bad[coll] = make(map[string]*materialize.DecodeError)
		}
		s.bad[coll][string(rune(v.Type))+string(v.Value)] = s.rep.Malformed[len(s.rep.Malformed)-1]
	}
	return nil
}

// supersede drops from the report the malformed document of coll with
// doc's _id (type and bytes) read before doc, which replaces it in a store
// keyed by _id.
func (s *state) supersede(coll string, doc bson.Raw) {
	if len(s.bad[coll]) == 0 {
		return
	}
	v, err := doc.LookupErr("_id")
	if err != nil {
		return
	}
	k := string(rune(v.Type)) + string(v.Value)
	if de, ok := s.bad[coll][k]; ok {
		s.rep.Malformed = slices.DeleteFunc(s.rep.Malformed, func(e *materialize.DecodeError) bool { return e == de })
		delete(s.bad[coll], k)
	}
}

// readCatalog reads problems, homeworks and users.
func (s *state) readCatalog(ctx context.Context, d dump.Dir) error {
	// The decoders validate the whole document (Raw.Validate and a
	// check of every element), so the reader checks only the framing.
	s.opts.Progress.Begin("reading", progress.Bytes, s.inputSize)
	n := 0
	err := s.each(ctx, d, materialize.CollProblem, func(doc bson.Raw) error {
		n++
		s.supersede(materialize.CollProblem, doc)
		pr, err := materialize.DecodeProblem(doc)
		if err != nil {
			// A malformed document replaces an earlier one with its _id
			// too (a store keyed by _id then holds no decodable problem).
			if v, lerr := doc.LookupErr("_id"); lerr == nil {
				if id, ok := materialize.IntValue(v); ok {
					s.cat.RemoveProblem(id)
				}
			}
			return s.malformedDoc(d, materialize.CollProblem, n, doc, err)
		}
		s.cat.AddProblem(pr)
		return nil
	})
	if err != nil {
		return err
	}
	s.problemIDs = make([]int64, 0, len(s.cat.Problems))
	for id := range s.cat.Problems {
		s.problemIDs = append(s.problemIDs, id)
	}
	slices.Sort(s.problemIDs)
	s.problemIdx = make(map[int64]uint32, len(s.problemIDs))
	for i, id := range s.problemIDs {
		s.problemIdx[id] = uint32(i)
	}
	n = 0
	err = s.each(ctx, d, materialize.CollHomework, func(doc bson.Raw) error {
		n++
		s.supersede(materialize.CollHomework, doc)
		raw := bson.Raw(bytes.Clone(doc))
		hi := uint32(len(s.hws))
		first := len(s.entries)
		s.hwKeys, s.dups = s.hwKeys[:0], false
		var uid uint32
		h, err := materialize.HomeworkDecoder{NoKeySets: true,
			Intern: func(b []byte) string { uid = s.intern(b); return s.names[uid] },
			User:   func(_ string, doc []byte) { s.addEntries(raw, uint32(n), hi, uid, doc) }}.Decode(raw)
		if s.badIndex {
			return fmt.Errorf("read dump %s: document number %d: an entry's key does not lie in the document's bytes (internal error)", d.File(materialize.CollHomework), n)
		}
		if err != nil {
			s.entries = s.entries[:first]
			s.hwOrder = append(s.hwOrder, slot[homework]{raw: raw})
			// A malformed document replaces an earlier one with its _id
			// too (a store keyed by _id then holds no decodable homework).
			if v, lerr := raw.LookupErr("_id"); lerr == nil {
				if id, ok := v.ObjectIDOK(); ok {
					if prev, ok := s.homeworks[id]; ok {
						s.replaced(prev)
						delete(s.homeworks, id)
						s.cat.RemoveHomework(id)
					}
				}
			}
			return s.malformedDoc(d, materialize.CollHomework, n, doc, err)
		}
		s.rep.Malformed = append(s.rep.Malformed, h.Skipped...)
		if prev, ok := s.homeworks[h.ID]; ok {
			// A later document with the same _id replaces an earlier one,
			// as a store keyed by _id would.
			s.replaced(prev)
		}
		s.cat.AddHomework(h)
		hw := &homework{raw: raw, h: s.cat.Homework(h.ID), first: uint32(first), end: uint32(len(s.entries)),
			dups: s.dups || studentStatusSections(raw) > 1, skipped: h.Skipped}
		s.homeworks[h.ID] = hi
		s.hws = append(s.hws, hw)
		s.hwOrder = append(s.hwOrder, slot[homework]{raw: raw, of: hw})
		return nil
	})
	if err != nil {
		return err
	}
	if len(s.entries) > math.MaxUint32 || len(s.hws) > math.MaxUint32 {
		return fmt.Errorf("read dump %s: more than 2^32 studentStatus entries", d.File(materialize.CollHomework))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n = 0
	return s.each(ctx, d, materialize.CollUser, func(doc bson.Raw) error {
		n++
		s.supersede(materialize.CollUser, doc)
		// Only an output needs the documents themselves.
		raw := bson.Raw(doc)
		if s.opts.Out != "" {
			raw = bytes.Clone(raw)
		}
		name, st, ok, err := materialize.DecodeUser(raw)
		if err != nil {
			if s.opts.Out != "" {
				s.userOrder = append(s.userOrder, slot[user]{raw: raw})
			}
			return s.malformedDoc(d, materialize.CollUser, n, doc, err)
		}
		// A later document with the same _id replaces an earlier one, as a
		// store keyed by _id would.
		u := &user{stored: st, storedOK: ok}
		s.docs[s.intern([]byte(name))] = u
		if s.opts.Out != "" {
			s.userOrder = append(s.userOrder, slot[user]{raw: raw, of: u})
		}
		return nil
	})
}

// replaced forgets homework hws[prev], replaced by a later document with
// its _id: its entries are no one's, and its skipped studentStatus values
// are not reported (a store keyed by _id never holds it).
func (s *state) replaced(prev uint32) {
	hw := s.hws[prev]
	for i := hw.first; i < hw.end; i++ {
		s.entries[i].user = deadUser
	}
	if len(hw.skipped) > 0 {
		s.rep.Malformed = slices.DeleteFunc(s.rep.Malformed, func(e *materialize.DecodeError) bool {
			return slices.Contains(hw.skipped, e)
		})
		hw.skipped = nil
	}
}

// addEntries indexes the entries of studentStatus.<user> of homework hi
// (raw, document number n of the file), the user's document doc (a slice
// of raw); a document-valued duplicate of the key earlier in the homework
// loses its entries, and of duplicate problem keys in doc the last value
// is the stored one.
func (s *state) addEntries(raw bson.Raw, n, hi, uid uint32, doc []byte) {
	if s.inDoc[uid] == n {
		s.dups = true
		for i := s.docFirst[uid]; i < s.docEnd[uid]; i++ {
			s.entries[i].user = deadUser
		}
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
	first := len(s.entries)
	materialize.EachElement(doc, func(_ bson.Type, key, _ []byte) {
		// The element starts at its type byte, just before the key (an
		// empty key's slice still points into doc).
		off := uintptr(unsafe.Pointer(unsafe.SliceData(key))) - base - 1
		if off >= uintptr(len(raw)) || off > math.MaxUint32 || !bytes.HasPrefix(raw[off+1:], key) {
			// The decoder's slices alias raw (bson.Raw lookups never
			// copy); should that ever change, fail rather than index the
			// wrong bytes.
			s.badIndex = true
			return
		}
		e := entry{elem: uint32(off), hw: hi, user: uid, problem: s.problemOf(key)}
		// A key seen before in this document: the later value is the
		// stored one (LastValue). Documents hold a few keys; a long one
		// is checked through a map.
		if mine := s.entries[first:]; len(mine) <= 32 {
			for i := range mine {
				if bytes.Equal(entryKeyBytes(raw, mine[i].elem), key) {
					mine[i].elem, s.dups = e.elem, true
					return
				}
			}
			if len(mine) == 32 {
				clear(s.dupKeys)
				for i := range mine {
					s.dupKeys[string(entryKeyBytes(raw, mine[i].elem))] = uint32(first + i)
				}
			}
		} else if i, ok := s.dupKeys[unsafeString(key)]; ok {
			s.entries[i].elem, s.dups = e.elem, true
			return
		}
		if len(s.entries)-first >= 32 {
			s.dupKeys[string(key)] = uint32(len(s.entries))
		}
		if len(s.entries) == cap(s.entries) {
			// Doubling: append's growth of a large slice (1.25x) would
			// leave four times the index in garbage.
			s.entries = slices.Grow(s.entries, max(len(s.entries), 1024))
		}
		s.entries = append(s.entries, e)
	})
	s.inDoc[uid], s.docFirst[uid], s.docEnd[uid] = n, uint32(first), uint32(len(s.entries))
}

// problemOf returns the problem index of a studentStatus key of the
// homework being read (underived when it names no problem of the
// catalog in canonical form).
func (s *state) problemOf(key []byte) uint32 {
	for _, k := range s.hwKeys {
		if k.key == string(key) {
			return k.problem
		}
	}
	pi := s.underived()
	if p, ok := materialize.ParseProblemKey(unsafeString(key)); ok {
		if i, ok := s.problemIdx[p]; ok {
			pi = i
		}
	}
	if len(s.hwKeys) < 64 {
		s.hwKeys = append(s.hwKeys, hwKey{string(key), pi})
	}
	return pi
}

// studentStatusSections counts the top-level studentStatus documents of a
// homework: the key sets read the first, a patch by key rewrites all.
func studentStatusSections(raw bson.Raw) int {
	n := 0
	materialize.EachElement(raw, func(t bson.Type, key, _ []byte) {
		if t == bson.TypeEmbeddedDocument && string(key) == materialize.FieldStudentStatus {
			n++
		}
	})
	return n
}

// entryKeyBytes returns the key of the element at elem of a homework's
// bytes raw.
func entryKeyBytes(raw []byte, elem uint32) []byte {
	k := raw[elem+1:]
	return k[:bytes.IndexByte(k, 0)]
}

// intern returns the id of a user name, adding it the first time.
func (s *state) intern(name []byte) uint32 {
	if i, ok := s.ids[string(name)]; ok {
		return i
	}
	i := uint32(len(s.names))
	n := string(name)
	s.names = append(s.names, n)
	s.ids[n] = i
	s.docs = append(s.docs, nil)
	s.inDoc = append(s.inDoc, 0)
	s.docFirst = append(s.docFirst, 0)
	s.docEnd = append(s.docEnd, 0)
	return i
}

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
	u := userDeriver{s: s, d: materialize.NewDeriver(), start: materialize.StartEntry()}
	u.d.Reuse = true // compare keeps a drifted entry's Clone
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
	d             *materialize.Deriver
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
		hw.fix[entryKey{name, pk}] = d.Clone() // d may be the Deriver's (Reuse)
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

// patchByKey appends homework hw patched by key (materialize.PatchEntries)
// with its drifted values to dst.
func (s *state) patchByKey(dst []byte, hw *homework) ([]byte, error) {
	return materialize.PatchEntries(dst, hw.raw, func(user, pk []byte) (materialize.Entry, bool) {
		e, ok := hw.fix[entryKey{unsafeString(user), unsafeString(pk)}]
		return e, ok
	})
}

// problemKey returns key, the problem key of an entry of problem index
// pi, as a string: one per problem for a derivable entry.
func (s *state) problemKey(pi uint32, key []byte) string {
	if pi == s.underived() {
		return string(key)
	}
	if s.pks == nil {
		s.pks = make([]string, len(s.problemIDs))
	}
	if s.pks[pi] == "" {
		s.pks[pi] = string(key)
	}
	return s.pks[pi]
}

// checkSizes fails when a corrected homework would exceed 16 MiB, naming
// every such homework and its size.
func (s *state) checkSizes() error {
	var over []Oversized
	for _, hw := range s.hws {
		if !hw.drifted {
			continue
		}
		size := len(hw.raw) + hw.grow
		if hw.dups {
			// grow counts each drifted entry once; the patch by key
			// rewrites every occurrence of its key.
			patched, err := s.patchByKey(nil, hw)
			if err != nil {
				return err
			}
			size = len(patched)
		}
		if size > materialize.MaxDocumentSize {
			over = append(over, Oversized{ID: hw.h.ID, Size: size})
		}
	}
	if len(over) == 0 {
		return nil
	}
	slices.SortFunc(over, func(a, b Oversized) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return &TooLargeError{Homeworks: over}
}

// rewrites are the collections a corrected copy changes, and how.
func (s *state) rewrites() map[string]dump.Rewrite {
	return map[string]dump.Rewrite{
		materialize.CollUser:     s.writeUsers,
		materialize.CollHomework: s.writeHomeworks,
	}
}

func (s *state) writeUsers(emit func([]byte) error) error {
	var buf []byte
	for _, sl := range s.userOrder {
		raw, u := sl.raw, sl.of
		if u == nil || u.fix == nil {
			if err := emit(raw); err != nil {
				return err
			}
			continue
		}
		var err error
		if buf, err = materialize.AppendPatchedUser(buf[:0], raw, *u.fix); err != nil {
			return err
		}
		if err := emit(buf); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) writeHomeworks(emit func([]byte) error) error {
	var buf []byte
	var at []materialize.ValueAt
	for _, sl := range s.hwOrder {
		raw, hw := sl.raw, sl.of
		if hw == nil || (hw.fix == nil && hw.at == nil) {
			if err := emit(raw); err != nil {
				return err
			}
			continue
		}
		var err error
		if hw.dups {
			buf, err = s.patchByKey(buf[:0], hw)
		} else {
			at = at[:0]
			for _, f := range hw.at {
				at = append(at, materialize.ValueAt{Elem: int(f.elem), Value: s.arena[f.chunk][f.off : f.off+f.n]})
			}
			slices.SortFunc(at, func(a, b materialize.ValueAt) int { return cmp.Compare(a.Elem, b.Elem) })
			buf, err = materialize.PatchAt(buf[:0], raw, at)
		}
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
