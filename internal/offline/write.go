package offline

import (
	"bytes"
	"cmp"
	"context"
	"slices"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/progress"
)

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
