package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/explain"
	"github.com/normal-oj/noj-materializer/progress"
)

// isArchive reports whether --dump names a mongodump archive rather than
// a dump directory: "-" (standard input) or anything not a directory (a
// file, a pipe, /dev/stdin).
func isArchive(path string) bool {
	if path == "-" {
		return true
	}
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// isDirectory reports whether path is a directory.
func isDirectory(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// archiveName reports whether out is named like an archive file (.archive,
// .gz), which the corrected copy of a directory dump cannot be.
func archiveName(out string) bool {
	return strings.HasSuffix(out, ".archive") || strings.HasSuffix(out, ".gz")
}

// archiveSource is an archive unpacked for an offline command, and, for a
// rebuild with an output, the archive file being written.
type archiveSource struct {
	a   *dump.Archive
	out *dump.ArchiveFile
}

// close removes the temporary directory and any partial output.
func (s *archiveSource) close() {
	if s.out != nil {
		s.out.Abort()
	}
	_ = s.a.Close()
}

// write writes the corrected archive to the output file and moves it into
// place (offline.Options.Write), reporting its progress in bytes before
// compression.
func (s *archiveSource) write(ctx context.Context, rewrite map[string]dump.Rewrite, prog *progress.Reporter) error {
	prog.Begin("writing the archive", progress.Bytes, s.a.Size())
	if err := s.a.Write(ctx, s.out, rewrite, func(n int64) { prog.Advance(n) }); err != nil {
		return err
	}
	return s.out.Commit()
}

// outGzip reports whether the corrected archive out is written
// gzip-compressed: as its name says (.gz: gzip, .archive: not, so that
// the mongorestore command the name suggests reads it), else as the input
// was (inGzip).
func outGzip(out string, inGzip bool) bool {
	switch {
	case strings.HasSuffix(out, ".gz"):
		return true
	case strings.HasSuffix(out, ".archive"):
		return false
	}
	return inGzip
}

func compression(gz bool) string {
	if gz {
		return "gzip-compressed"
	}
	return "uncompressed"
}

// fileSize is the size of r when it is a regular file, else 0 (unknown).
func fileSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// openArchive reads the archive path names (standard input for "-") into
// a temporary directory (under $TMPDIR), keeping every namespace when
// out, a corrected archive to write, is given, else only the four source
// collections of database. out is created first, so that an existing or
// unwritable output fails before the archive is read. Its usage errors
// are configErrors.
func openArchive(ctx context.Context, env *environment, path, database, out string, quiet bool, what string) (*archiveSource, error) {
	if out == "-" {
		return nil, &configError{"--out -: writing the corrected archive to standard output is not supported; give a file"}
	}
	var in io.Reader
	name := path
	if path == "-" {
		in, name = env.stdin, "(standard input)"
		if in == nil {
			in = os.Stdin
		}
		if isTerminal(in) {
			return nil, &configError{"--dump -: standard input is a terminal, not an archive; redirect or pipe one into it (--dump - < backup.archive.gz), or give the archive file"}
		}
	}
	// Unpack would fail on a missing $TMPDIR naming only the path it
	// tried.
	if tmp := os.TempDir(); !isDirectory(tmp) {
		which := "TMPDIR=" + tmp
		if os.Getenv("TMPDIR") == "" {
			which = "TMPDIR is unset and " + tmp
		}
		return nil, &configError{fmt.Sprintf("the archive is unpacked under $TMPDIR, and %s is not a directory; set TMPDIR to an existing directory with room for the uncompressed dump", which)}
	}
	s := &archiveSource{}
	if out != "" {
		var err error
		if s.out, err = dump.CreateArchiveFile(out); err != nil {
			return nil, &configError{fmt.Sprintf("--out: %v", err)}
		}
	}
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			s.close()
			return nil, &configError{fmt.Sprintf("--dump: %v", err)}
		}
		defer f.Close()
		in = f
	}
	keep := func(ns dump.Namespace) bool { return ns.DB == database && slices.Contains(dump.Sources, ns.Collection) }
	if out != "" {
		keep = nil // all: the corrected archive holds every namespace
	}
	if !quiet {
		fmt.Fprintf(env.stderr, "reading archive %s (unpacked into a temporary directory under %s)\n", name, os.TempDir())
	}
	// Progress in bytes of the input (compressed or not) as read, of the
	// file's size when it is one (a file, standard input redirected from
	// one), so that the time left is known.
	prog := progress.New(textProgress(env, what, quiet), nil, env.every(), 0)
	prog.Begin("unpacking the archive", progress.Bytes, fileSize(in))
	cr := &countingReader{r: in}
	var advanced int64
	a, err := dump.Unpack(ctx, cr, name, dump.UnpackOptions{Database: database, Keep: keep,
		Progress: func(n int) {
			prog.Add(n)
			prog.Advance(cr.n - advanced)
			advanced = cr.n
		},
		Prelude: func(colls []dump.Namespace) error { return archiveComplete(name, colls, database) }})
	if err != nil {
		if s.out != nil {
			s.out.Abort()
		}
		if errors.Is(err, dump.ErrNotArchive) {
			return nil, &configError{fmt.Sprintf("%v (--dump takes a dump directory or an archive)", err)}
		}
		return nil, err
	}
	s.a = a
	if out != "" {
		if gz := outGzip(out, a.Gzip); gz != a.Gzip {
			fmt.Fprintf(env.stderr, "writing %s %s, as its name says (the input is %s)\n", out, compression(gz), compression(a.Gzip))
			a.Gzip = gz
		}
	}
	// The prelude listed them all; a data namespace missing would not
	// have ended (Unpack refuses that), but check what was read.
	if err := archiveComplete(name, a.Namespaces(), database); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// archiveComplete refuses, as a usage error, an archive whose namespaces
// colls miss one of the four source collections of database
// (dump.CheckComplete).
func archiveComplete(name string, colls []dump.Namespace, database string) error {
	if err := dump.CheckComplete(name, colls, database); err != nil {
		return dumpError(err, database)
	}
	return nil
}

// readOfflineInput reads what explaining (user, problem) reads from the
// dump --dump names (a directory or an archive), streaming it, and says
// what it read.
func readOfflineInput(ctx context.Context, env *environment, path, database, user string, problem int64) (*explain.Input, string, error) {
	if !isArchive(path) {
		d, err := openDump(path, database)
		if err != nil {
			return nil, "", err
		}
		p, err := explain.ReadDump(ctx, d, user, problem)
		return p, "dump " + d.Path, err
	}
	s, err := openArchive(ctx, env, path, database, "", true, "explain")
	if err != nil {
		return nil, "", err
	}
	defer s.close()
	d, err := openDump(s.a.Dir().Path, database)
	if err != nil {
		return nil, "", err
	}
	p, err := explain.ReadDump(ctx, d, user, problem)
	return p, "archive " + s.a.Name, err
}
