package dump

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Output is a dump directory being written so that a failed or
// interrupted run leaves nothing a restore would take for a dump: the
// files go to a hidden partial directory on the output's own filesystem,
// moved into place by Commit.
//
//   - An absent output: the partial directory is its sibling
//     (.<name>.partial-*), renamed onto it at the end.
//   - An existing empty directory (a volume or mount point, a directory
//     prepared with its mode and owner): the partial directory is inside
//     it (.partial-*), and Commit renames its entries into it, then
//     removes it. The directory itself is never replaced, so it keeps its
//     mode, owner and mount; until Commit it holds only the hidden
//     partial directory, and a run killed during Commit's renames (a few
//     entries) leaves that directory behind, which says so.
//
// New directories are created 0777 and files 0666, less the umask, as cp
// and mongodump do.
type Output struct {
	Path  string // the directory named by the caller
	dir   string // where the files are written
	into  bool   // Path existed: Commit renames dir's entries into it
	moved bool   // Commit done
}

// PartialPrefix starts the name of the partial directory inside an
// existing output; a sibling partial directory is .<name>.partial-*.
const PartialPrefix = ".partial-"

// CheckOutput checks, before any work, that out can receive a dump: not
// a file, and an empty directory or absent. A leftover partial directory
// of a killed run (inside out, or its sibling .<name>.partial-*) is
// refused, naming it: it is never deleted here, since a run writing out
// right now has one too.
func CheckOutput(out string) error {
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return checkNoSiblingPartial(out)
	case err != nil:
		return fmt.Errorf("output %s: %w", out, err)
	case !st.IsDir():
		return fmt.Errorf("output %s is a file, not a directory", out)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), PartialPrefix) {
			return fmt.Errorf("output %s holds %s, the partial output of an interrupted run: delete it, then retry", out, e.Name())
		}
	}
	if len(entries) > 0 {
		return fmt.Errorf("output %s is not empty (refusing to overwrite)", out)
	}
	return nil
}

// CreateOutput checks out (CheckOutput) and creates its partial
// directory, so that an unwritable place fails before any work. Its
// parent directories are created when missing.
func CreateOutput(out string) (*Output, error) {
	if err := CheckOutput(out); err != nil {
		return nil, err
	}
	out = filepath.Clean(out)
	o := &Output{Path: out}
	parent, prefix := filepath.Dir(out), "."+filepath.Base(out)+".partial-"
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		o.into, parent, prefix = true, out, PartialPrefix
	} else if err := os.MkdirAll(parent, 0o777); err != nil {
		return nil, fmt.Errorf("output %s: %w", out, err)
	}
	for range 100 {
		var b [6]byte
		_, _ = rand.Read(b[:])
		dir := filepath.Join(parent, prefix+hex.EncodeToString(b[:]))
		err := os.Mkdir(dir, 0o777) // less the umask, unlike os.MkdirTemp's 0700
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", out, err)
		}
		o.dir = dir
		return o, nil
	}
	return nil, fmt.Errorf("output %s: no unused partial directory name", out)
}

// Dir is the directory to write the files into.
func (o *Output) Dir() string { return o.dir }

// Commit moves the written files into place.
func (o *Output) Commit() error {
	if !o.into {
		if err := os.Rename(o.dir, o.Path); err != nil {
			return fmt.Errorf("output %s: %w", o.Path, err)
		}
		o.moved = true
		return nil
	}
	// Written into by someone else meanwhile: refused, as at the start.
	entries, err := os.ReadDir(o.Path)
	if err != nil {
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	if len(entries) != 1 {
		return fmt.Errorf("output %s is not empty any more (refusing to overwrite)", o.Path)
	}
	files, err := os.ReadDir(o.dir)
	if err != nil {
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	for _, f := range files {
		if err := os.Rename(filepath.Join(o.dir, f.Name()), filepath.Join(o.Path, f.Name())); err != nil {
			return fmt.Errorf("output %s: %w", o.Path, err)
		}
	}
	if err := os.Remove(o.dir); err != nil {
		return fmt.Errorf("output %s: %w", o.Path, err)
	}
	o.moved = true
	return nil
}

// Remove deletes what was written, unless Commit moved it into place.
func (o *Output) Remove() error {
	if o == nil || o.moved {
		return nil
	}
	if err := os.RemoveAll(o.dir); err != nil {
		return fmt.Errorf("remove partial output %s: %w", o.dir, err)
	}
	return nil
}

// checkNoSiblingPartial refuses an absent output path beside which a
// killed run left its partial output (.<name>.partial-*, a directory or
// an archive file), naming it.
func checkNoSiblingPartial(path string) error {
	path = filepath.Clean(path)
	prefix := "." + filepath.Base(path) + ".partial-"
	entries, err := os.ReadDir(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil // created with the output
	} else if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			return fmt.Errorf("output %s: %s beside it is the partial output of a run killed outright (or one writing %s now): delete it, then retry",
				path, filepath.Join(filepath.Dir(path), e.Name()), filepath.Base(path))
		}
	}
	return nil
}

// ResolvePath returns path absolute, with the symbolic links of its longest
// existing prefix resolved (filepath.EvalSymlinks): the part that does
// not exist yet is joined as is.
func ResolvePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	var rest []string
	for p := abs; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs, nil
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
