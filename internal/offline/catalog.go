package offline

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
)

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
		h, err := materialize.BulkHomeworkDecoder{
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
