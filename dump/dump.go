// Package dump reads and writes mongodump directories (one BSON file per
// collection, optionally gzipped, beside a .metadata.json) so the
// materializer can verify and repair a backup with no server at hand.
package dump

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Sources are the collections the derivation reads and writes.
var Sources = []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission}

// Dir is a mongodump database directory: DIR/<db>/ as mongodump --out DIR
// writes it, or a directory holding the .bson files itself.
type Dir struct {
	Root string // the directory the caller named (mongodump's --out)
	Path string // the directory holding <collection>.bson[.gz]: Root or Root/<db>
}

// Resolve finds the database directory under path: path/<db> when it
// exists, else path itself when it holds a submission, homework, problem
// or user BSON file (an empty db: path itself). Errors name what was
// looked for: a *NotFoundError when neither is there, a *LayoutError when
// both are, a *ConflictError when a collection is there both plain and
// gzipped.
func Resolve(path, db string) (Dir, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Dir{}, fmt.Errorf("dump directory: %w", err)
	}
	if !st.IsDir() {
		return Dir{}, fmt.Errorf("dump directory %s: not a directory", path)
	}
	d := Dir{Root: path, Path: path}
	if sub := filepath.Join(path, db); db != "" && isDir(sub) {
		if loose := sourceFiles(path); len(loose) > 0 {
			return Dir{}, &LayoutError{Path: path, Sub: sub, Loose: loose}
		}
		d.Path = sub
	} else if !holdsSources(path) {
		return Dir{}, &NotFoundError{Path: path, Database: db, Others: databasesIn(path)}
	}
	for _, c := range Sources {
		p := filepath.Join(d.Path, c+".bson")
		if exists(p) && exists(p+".gz") {
			return Dir{}, &ConflictError{Plain: p, Gzip: p + ".gz"}
		}
	}
	return d, nil
}

// NotFoundError says a dump directory holds neither the database's
// directory nor collection files; Others are its subdirectories that hold
// collection files (dumps of databases with other names).
type NotFoundError struct {
	Path, Database string
	Others         []string
}

func (e *NotFoundError) Error() string {
	msg := fmt.Sprintf("dump directory %s: neither %s/ nor any of %s.bson found", e.Path, e.Database, strings.Join(Sources, ".bson, "))
	if len(e.Others) > 0 {
		msg += fmt.Sprintf("; it holds the database directories %s/", strings.Join(e.Others, "/, "))
	}
	return msg
}

// ConflictError says a collection is in a dump both as X.bson and
// X.bson.gz (a mongodump --gzip run into a directory a plain dump filled):
// which one is current cannot be told, and reading one would write it to
// both outputs.
type ConflictError struct{ Plain, Gzip string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("dump holds both %s and %s: which is current cannot be told; remove the stale one", e.Plain, e.Gzip)
}

// LayoutError says a dump directory holds both the database's directory
// and loose collection files: which of the two is the dump cannot be told.
type LayoutError struct {
	Path, Sub string
	Loose     []string // the loose collection files, by name
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("dump directory %s holds both the database directory %s and the loose collection files %s: which is the dump cannot be told; move one away, or give %s itself",
		e.Path, e.Sub, strings.Join(e.Loose, ", "), e.Sub)
}

// sourceFiles names the source collections' files directly in dir.
func sourceFiles(dir string) []string {
	var out []string
	for _, c := range Sources {
		if p, _, ok := find(dir, c); ok {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func holdsSources(dir string) bool {
	for _, c := range Sources {
		if _, _, ok := find(dir, c); ok {
			return true
		}
	}
	return false
}

// databasesIn lists the subdirectories of dir holding collection files.
func databasesIn(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.IsDir() && holdsSources(filepath.Join(dir, e.Name())) {
			out = append(out, e.Name())
		}
	}
	return out
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// find returns the file of a collection and whether it is gzipped.
func find(dir, coll string) (string, bool, bool) {
	p := filepath.Join(dir, coll+".bson")
	if _, err := os.Stat(p); err == nil {
		return p, false, true
	}
	if _, err := os.Stat(p + ".gz"); err == nil {
		return p + ".gz", true, true
	}
	return "", false, false
}

// Read returns every document of coll in file order; a missing collection
// file is an empty collection. A truncated or corrupt file is an error
// naming the file and the document's offset.
func (d Dir) Read(coll string) ([]bson.Raw, error) {
	p, gz, ok := find(d.Path, coll)
	if !ok {
		return nil, nil
	}
	f, err := openRegular(p)
	if err != nil {
		return nil, fmt.Errorf("read dump: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 64<<10)
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("read dump %s: %w", p, err)
		}
		defer zr.Close()
		r = zr
	}
	var out []bson.Raw
	var off int64
	for {
		doc, err := bson.ReadDocument(r)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read dump %s: document at byte %d: %w", p, off, err)
		}
		if err := doc.Validate(); err != nil {
			return nil, fmt.Errorf("read dump %s: document at byte %d: %w", p, off, err)
		}
		off += int64(len(doc))
		out = append(out, doc)
	}
}

// writeBSON writes docs to a new collection file at path (gzip-compressed
// when gz).
func writeBSON(path string, gz bool, docs []bson.Raw) error {
	return writeBSONFunc(context.Background(), path, gz, nil, func(emit func(doc []byte) error) error {
		for _, doc := range docs {
			if err := emit(doc); err != nil {
				return err
			}
		}
		return nil
	})
}

// copyFile copies src to the new file dst, calling written with the
// bytes copied; it stops when ctx is done. It copies in large steps of
// io.CopyN, which on Linux the kernel does (copy_file_range through
// os.File.ReadFrom, which takes the io.LimitedReader): no pass of the
// bytes through the process.
func copyFile(ctx context.Context, src, dst string, written func(int64)) error {
	in, err := openRegular(src)
	if err != nil {
		return fmt.Errorf("copy dump file: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("copy dump file: %w", err)
	}
	for {
		if err := ctx.Err(); err != nil {
			out.Close()
			return err
		}
		n, err := io.CopyN(out, in, 16<<20)
		if written != nil && n > 0 {
			written(n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			out.Close()
			return fmt.Errorf("copy dump file %s: %w", src, err)
		}
	}
	return out.Close()
}

// Write creates a dump directory holding the given collections as plain
// .bson files with minimal .metadata.json files (for tests and the demo
// generator). dir must not exist or be empty.
func Write(dir string, docs map[string][]bson.Raw) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("write dump: %w", err)
	} else if len(entries) > 0 {
		return fmt.Errorf("write dump: %s is not empty (refusing to overwrite)", dir)
	}
	for coll, ds := range docs {
		if err := writeBSON(filepath.Join(dir, coll+".bson"), false, ds); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, coll+".metadata.json"), []byte(metadataJSON(coll)), 0o644); err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
	}
	return nil
}

// File returns the path of coll's file (.bson or .bson.gz), or "" when the
// dump has none.
func (d Dir) File(coll string) string {
	p, _, _ := find(d.Path, coll)
	return p
}

// Missing returns the source collections (Sources) that have no file in
// the dump: a dump without one of them cannot be checked, since an absent
// file would read as an empty collection and verify as clean.
func (d Dir) Missing() []string {
	var out []string
	for _, c := range Sources {
		if _, _, ok := find(d.Path, c); !ok {
			out = append(out, c)
		}
	}
	return out
}

// maxDocument bounds a document's declared length while reading (twice
// MongoDB's 16 MiB limit, as mongodump files never hold more): a corrupt
// length is reported instead of allocated.
const maxDocument = 32 << 20

// Each calls fn with every document of coll in file order, without
// holding the collection in memory: doc points into a read buffer and is
// valid only during the call (a caller keeping it must copy it). Every
// document's framing is checked (its length within the file, its
// terminator); with deep, the whole document is validated too, as
// bson.Raw.Validate does. A caller passing deep=false must check the
// elements it reads itself (materialize.DecodeSubmission checks every
// top-level element). A truncated or corrupt file is an error naming the
// file and the document's offset. A missing collection file calls fn for
// nothing.
func (d Dir) Each(coll string, deep bool, fn func(doc bson.Raw) error) error {
	return d.EachRead(coll, deep, nil, fn)
}

// EachRead is Each, calling read (when not nil) with the number of bytes
// of the file consumed: each document's size after its call to fn for a
// plain file, the compressed bytes as they are read for a .gz file. In
// all they are the file's size (FileSize).
func (d Dir) EachRead(coll string, deep bool, read func(n int64), fn func(doc bson.Raw) error) error {
	p, gz, ok := find(d.Path, coll)
	if !ok {
		return nil
	}
	f, err := openRegular(p)
	if err != nil {
		return fmt.Errorf("read dump: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	perDoc := read // a plain file: counted a document at a time
	if gz {
		// A gzipped file: counted as its compressed bytes are read.
		var cr io.Reader = f
		if read != nil {
			cr, perDoc = countingReader{f, read}, nil
		}
		zr, err := gzip.NewReader(bufio.NewReaderSize(cr, 256<<10))
		if err != nil {
			return fmt.Errorf("read dump %s: %w", p, err)
		}
		defer zr.Close()
		r = zr
	}
	// Documents are sliced out of large reads, not copied one by one. A
	// plain file smaller than the read size gets a buffer of its own size:
	// a small dump read many times (explain --dump, the tests) would
	// otherwise allocate and clear 4 MiB per file per read.
	size := 4 << 20
	if !gz {
		if fi, err := f.Stat(); err == nil && fi.Size() < int64(size) {
			size = max(int(fi.Size()), 4)
		}
	}
	buf := make([]byte, size)
	var start, end int
	eof := false
	// fill reads until buf[start:end] holds n bytes or the file ends.
	fill := func(n int) error {
		if start+n > len(buf) {
			if n > len(buf) {
				nb := make([]byte, n)
				end = copy(nb, buf[start:end])
				buf = nb
			} else {
				end = copy(buf, buf[start:end])
			}
			start = 0
		}
		for end-start < n && !eof {
			m, err := r.Read(buf[end:])
			end += m
			if errors.Is(err, io.EOF) {
				eof = true
			} else if err != nil {
				return err
			}
		}
		return nil
	}
	var off int64
	for {
		if err := fill(4); err != nil {
			return fmt.Errorf("read dump %s: document at byte %d: %w", p, off, err)
		}
		if end == start {
			return nil
		}
		if end-start < 4 {
			return fmt.Errorf("read dump %s: document at byte %d: truncated length: %w", p, off, io.ErrUnexpectedEOF)
		}
		b := buf[start:]
		size := int(int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24))
		if size < 5 || size > maxDocument {
			return fmt.Errorf("read dump %s: document at byte %d: invalid length %d", p, off, size)
		}
		if err := fill(size); err != nil {
			return fmt.Errorf("read dump %s: document at byte %d: %w", p, off, err)
		}
		if end-start < size {
			return fmt.Errorf("read dump %s: document at byte %d: truncated document: %w", p, off, io.ErrUnexpectedEOF)
		}
		doc := bson.Raw(buf[start : start+size])
		if doc[size-1] != 0 {
			return fmt.Errorf("read dump %s: document at byte %d: document does not end with a NUL byte", p, off)
		}
		if deep {
			if err := doc.Validate(); err != nil {
				return fmt.Errorf("read dump %s: document at byte %d: %w", p, off, err)
			}
		}
		if err := fn(doc); err != nil {
			return err
		}
		if perDoc != nil {
			perDoc(int64(size))
		}
		start += size
		off += int64(size)
	}
}

// Rewrite produces the documents of a rewritten collection file: it calls
// emit once per document, in order.
type Rewrite func(emit func(doc []byte) error) error

// CopyTo writes a corrected copy of the dump into the existing empty
// directory out, in the same layout: every file under d.Root (other
// databases, metadata, oplog.bson) is copied byte for byte, except the
// BSON files of the collections in rewrite in the database directory,
// whose documents come from rewrite (in the same compression). written,
// when not nil, is called with the bytes copied and the bytes of the
// documents rewritten (before compression), as they are written. It stops
// when ctx is done, returning ctx.Err(). Callers write into an Output, so
// that a failure leaves no partial output.
func (d Dir) CopyTo(ctx context.Context, out string, rewrite map[string]Rewrite, written func(n int64)) error {
	root, dbPath, err := d.walkRoot()
	if err != nil {
		return fmt.Errorf("read dump: %w", err)
	}
	outAbs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if abs, _ := filepath.Abs(path); abs == outAbs {
			return fs.SkipDir
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(out, rel)
		if e.IsDir() {
			if rel == "." {
				return nil
			}
			if err := os.MkdirAll(dst, 0o777); err != nil {
				return fmt.Errorf("write dump: %w", err)
			}
			return nil
		}
		name := e.Name()
		if filepath.Dir(path) == dbPath {
			coll := strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".bson")
			rw, ok := rewrite[coll]
			if ok && (strings.HasSuffix(name, ".bson") || strings.HasSuffix(name, ".bson.gz")) {
				return writeBSONFunc(ctx, dst, strings.HasSuffix(name, ".gz"), written, rw)
			}
		}
		return copyFile(ctx, path, dst, written)
	})
}

// walkRoot returns the dump's root and database directory with their
// symbolic links resolved: filepath.WalkDir does not follow a link it is
// given as its root, and an operator may well name a dump through one.
func (d Dir) walkRoot() (root, dbPath string, err error) {
	root = d.Root
	if root == "" {
		root = d.Path
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return "", "", err
	}
	if dbPath, err = filepath.EvalSymlinks(d.Path); err != nil {
		return "", "", err
	}
	return root, dbPath, nil
}

// TreeSize is the size in bytes of every file under the dump's root (what
// CopyTo reads).
func (d Dir) TreeSize() (int64, error) {
	root, _, err := d.walkRoot()
	if err != nil {
		return 0, fmt.Errorf("read dump: %w", err)
	}
	var n int64
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				return fmt.Errorf("read dump: %w", err)
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// FileSize is the size in bytes of coll's file (compressed, for a .gz),
// 0 when the dump has none.
func (d Dir) FileSize(coll string) int64 {
	p, _, ok := find(d.Path, coll)
	if !ok {
		return 0
	}
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

func writeBSONFunc(ctx context.Context, path string, gz bool, written func(int64), rw Rewrite) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write dump %s: %w", path, cerr)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = bw
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(bw)
		w = zw
	}
	n := 0
	if err := rw(func(doc []byte) error {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if _, err := w.Write(doc); err != nil {
			return fmt.Errorf("write dump %s: %w", path, err)
		}
		if written != nil {
			written(int64(len(doc)))
		}
		return nil
	}); err != nil {
		return err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("write dump %s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write dump %s: %w", path, err)
	}
	return nil
}

// WriteStream creates a dump directory holding the collections colls as
// plain .bson files with minimal .metadata.json files, their documents
// coming from gen (any order across collections; a document of another
// collection is an error), without holding them in memory. dir must not
// exist or be empty.
func WriteStream(dir string, colls []string, gen func(emit func(coll string, doc bson.Raw) error) error) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write dump: %w", err)
	}
	if entries, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("write dump: %w", err)
	} else if len(entries) > 0 {
		return fmt.Errorf("write dump: %s is not empty (refusing to overwrite)", dir)
	}
	type file struct {
		f *os.File
		w *bufio.Writer
	}
	files := make(map[string]*file, len(colls))
	defer func() {
		for _, f := range files {
			if ferr := f.w.Flush(); err == nil && ferr != nil {
				err = fmt.Errorf("write dump: %w", ferr)
			}
			if cerr := f.f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("write dump: %w", cerr)
			}
		}
	}()
	for _, coll := range colls {
		f, err := os.Create(filepath.Join(dir, coll+".bson"))
		if err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
		files[coll] = &file{f: f, w: bufio.NewWriterSize(f, 1<<20)}
		if err := os.WriteFile(filepath.Join(dir, coll+".metadata.json"), []byte(metadataJSON(coll)), 0o644); err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
	}
	return gen(func(coll string, doc bson.Raw) error {
		f, ok := files[coll]
		if !ok {
			return fmt.Errorf("write dump: unexpected collection %q", coll)
		}
		if _, err := f.w.Write(doc); err != nil {
			return fmt.Errorf("write dump %s: %w", coll, err)
		}
		return nil
	})
}

// metadataJSON is the .metadata.json of a collection this package
// creates: its _id index, no options.
func metadataJSON(coll string) string {
	return fmt.Sprintf(`{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"}],"uuid":"","collectionName":%q,"type":"collection"}`, coll)
}

// countingReader calls read with the bytes each Read returns.
type countingReader struct {
	r    io.Reader
	read func(int64)
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.read(int64(n))
	}
	return n, err
}
