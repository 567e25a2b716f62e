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
//
// Run and its state are here; records.go holds the submission records and
// their off-heap buckets (arena_*.go), catalog.go the reading of problems,
// homeworks and users and the entry index, derive.go the derivation and
// the comparison, write.go the corrected copy.
package offline

import (
	"context"
	"errors"
	"fmt"
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
	// that change, as Dir.CopyTo takes them (an archive's writer). It
	// reports its own progress (Progress.Begin), knowing its total.
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

// unsafeString views b as a string for a map lookup (the key is not kept).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
