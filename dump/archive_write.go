package dump

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Write writes the archive to w in mongodump's format, gzip-compressed
// when a.Gzip (as read: the input's format, unless the caller changed
// it): the header and the collection metadata as read (indexes, options:
// unchanged), then every namespace in the order it first appeared, whole:
// one segment of its documents, then its EOF header carrying their CRC-64.
// The documents of the database's collections named in rewrite come from
// it (their namespaces' CRC is that of the new bytes); every other
// namespace's are copied byte for byte. written, when set, is called with
// the bytes written before compression (Size is about their total). The
// archive must have been unpacked keeping every namespace.
func (a *Archive) Write(ctx context.Context, w io.Writer, rewrite map[string]Rewrite, written func(int64)) (err error) {
	for _, n := range a.namespaces {
		if n.file == "" {
			return fmt.Errorf("write archive: namespace %s was not kept when %s was read", n.ns, a.Name)
		}
	}
	e := newArchiveEncoder(w, a.Gzip, written)
	e.ctx = ctx
	if err := e.prelude(a.header, a.meta); err != nil {
		return err
	}
	for _, n := range a.namespaces {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := e.segment(n.ns); err != nil {
			return err
		}
		crc, err := a.writeDocuments(e, n, rewrite)
		if err != nil {
			return err
		}
		if err := e.terminator(); err != nil {
			return err
		}
		if err := e.eof(n.ns, crc); err != nil {
			return err
		}
	}
	// A cancel after the last write of the last namespace is seen here.
	if err := ctx.Err(); err != nil {
		return err
	}
	return e.close()
}

// Size is the bytes of the archive's documents, uncompressed: about what
// Write writes.
func (a *Archive) Size() int64 {
	var n int64
	for _, ns := range a.namespaces {
		n += ns.bytes
	}
	return n
}

// writeDocuments writes the documents of namespace n (from rewrite, or its
// file) and returns their CRC-64.
func (a *Archive) writeDocuments(out io.Writer, n *archiveNS, rewrite map[string]Rewrite) (uint64, error) {
	var crc uint64
	if rw, ok := rewrite[n.ns.Collection]; ok && n.ns.DB == a.db && n.file == filepath.Join(a.dbDir(), n.ns.Collection+".bson") {
		err := rw(func(doc []byte) error {
			if len(doc) < 5 || int(binary.LittleEndian.Uint32(doc)) != len(doc) || doc[len(doc)-1] != 0 {
				return fmt.Errorf("write archive: namespace %s: a rewritten document's framing is broken (%d bytes)", n.ns, len(doc))
			}
			crc = crc64.Update(crc, crcTable, doc)
			_, err := out.Write(doc)
			return err
		})
		return crc, err
	}
	f, err := os.Open(n.file)
	if err != nil {
		return 0, fmt.Errorf("write archive: %w", err)
	}
	defer f.Close()
	// The file is the namespace's documents concatenated, as hashed.
	h := crc64.New(crcTable)
	if _, err := io.Copy(io.MultiWriter(out, h), f); err != nil {
		return 0, fmt.Errorf("write archive: namespace %s: %w", n.ns, err)
	}
	return h.Sum64(), nil
}

// archiveEncoder writes the parts of an archive stream, gzip-compressed
// or not; its Write counts the bytes before compression (written) and,
// once ctx (when set) ends, fails with ctx's error, so that a copy stops
// within the namespace it is writing.
type archiveEncoder struct {
	bw      *bufio.Writer
	zw      *gzip.Writer
	out     io.Writer
	written func(int64)
	ctx     context.Context
}

func newArchiveEncoder(w io.Writer, gz bool, written func(int64)) *archiveEncoder {
	e := &archiveEncoder{bw: bufio.NewWriterSize(w, 1<<20), written: written}
	e.out = e.bw
	if gz {
		e.zw = gzip.NewWriter(e.bw)
		e.out = e.zw
	}
	return e
}

// Write writes p to the stream (uncompressed), errors saying so.
func (e *archiveEncoder) Write(p []byte) (int, error) {
	if e.ctx != nil {
		if err := e.ctx.Err(); err != nil {
			return 0, err
		}
	}
	n, err := e.out.Write(p)
	if e.written != nil && n > 0 {
		e.written(int64(n))
	}
	if err != nil {
		return n, fmt.Errorf("write archive: %w", err)
	}
	return n, nil
}

func (e *archiveEncoder) put(b []byte) error {
	_, err := e.Write(b)
	return err
}

func (e *archiveEncoder) terminator() error {
	return e.put(binary.LittleEndian.AppendUint32(nil, archiveTerminator))
}

// prelude writes the magic number, the header, the collection metadata
// and their terminator.
func (e *archiveEncoder) prelude(header bson.Raw, meta []bson.Raw) error {
	if err := e.put(binary.LittleEndian.AppendUint32(nil, archiveMagic)); err != nil {
		return err
	}
	if err := e.put(header); err != nil {
		return err
	}
	for _, m := range meta {
		if err := e.put(m); err != nil {
			return err
		}
	}
	return e.terminator()
}

// segment starts a segment of namespace ns (its documents follow, then a
// terminator).
func (e *archiveEncoder) segment(ns Namespace) error {
	h, err := namespaceHeaderDoc(ns, false, 0)
	if err != nil {
		return err
	}
	return e.put(h)
}

// eof ends namespace ns, whose documents' CRC-64 is crc.
func (e *archiveEncoder) eof(ns Namespace, crc uint64) error {
	h, err := namespaceHeaderDoc(ns, true, crc)
	if err != nil {
		return err
	}
	if err := e.put(h); err != nil {
		return err
	}
	return e.terminator()
}

// close ends the gzip stream, if any, and flushes.
func (e *archiveEncoder) close() error {
	if e.zw != nil {
		if err := e.zw.Close(); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
	}
	if err := e.bw.Flush(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// ArchiveWriter writes a new archive of collections of one database, as
// mongodump --archive does, their documents coming in any order (Add):
// the prelude lists every collection with the metadata of a dump
// directory's .metadata.json (the _id index), each run of documents of
// one collection is a segment, and Close ends every namespace with its
// EOF header and CRC-64. The header declares as many concurrent
// collections as there are (mongorestore restores at least that many at
// once, so that namespaces left open together never wait on each other).
type ArchiveWriter struct {
	e      *archiveEncoder
	db     string
	colls  []string
	crc    map[string]uint64
	opened map[string]bool
	cur    string // the collection whose segment is open ("": none)
}

// NewArchiveWriter writes the prelude of an archive of database db's
// collections colls to w, gzip-compressed when gz. written, when set, is
// called with the bytes written before compression.
func NewArchiveWriter(w io.Writer, gz bool, db string, colls []string, written func(int64)) (*ArchiveWriter, error) {
	aw := &ArchiveWriter{e: newArchiveEncoder(w, gz, written), db: db, colls: slices.Clone(colls),
		crc: make(map[string]uint64, len(colls)), opened: make(map[string]bool, len(colls))}
	header, err := bson.Marshal(bson.D{{Key: "concurrent_collections", Value: int32(max(len(colls), 1))},
		{Key: "version", Value: "0.1"}, {Key: "server_version", Value: ""}, {Key: "tool_version", Value: ""}})
	if err != nil {
		return nil, fmt.Errorf("write archive: header: %w", err)
	}
	meta := make([]bson.Raw, 0, len(colls))
	for _, c := range colls {
		m, err := bson.Marshal(bson.D{{Key: "db", Value: db}, {Key: "collection", Value: c},
			{Key: "metadata", Value: metadataJSON(c)}, {Key: "size", Value: int32(0)}, {Key: "type", Value: "collection"}})
		if err != nil {
			return nil, fmt.Errorf("write archive: metadata of %s: %w", c, err)
		}
		meta = append(meta, m)
	}
	if err := aw.e.prelude(header, meta); err != nil {
		return nil, err
	}
	return aw, nil
}

// Add writes doc, a document of collection coll (one of those the
// archive was created with).
func (aw *ArchiveWriter) Add(coll string, doc bson.Raw) error {
	if coll != aw.cur {
		if !slices.Contains(aw.colls, coll) {
			return fmt.Errorf("write archive: unexpected collection %q", coll)
		}
		if err := aw.endSegment(); err != nil {
			return err
		}
		if err := aw.e.segment(Namespace{aw.db, coll}); err != nil {
			return err
		}
		aw.cur, aw.opened[coll] = coll, true
	}
	aw.crc[coll] = crc64.Update(aw.crc[coll], crcTable, doc)
	return aw.e.put(doc)
}

func (aw *ArchiveWriter) endSegment() error {
	if aw.cur == "" {
		return nil
	}
	aw.cur = ""
	return aw.e.terminator()
}

// Close ends every namespace (an empty collection as mongodump writes
// one: an empty segment, then its EOF) and flushes the stream; it does
// not close the underlying writer.
func (aw *ArchiveWriter) Close() error {
	if err := aw.endSegment(); err != nil {
		return err
	}
	for _, c := range aw.colls {
		ns := Namespace{aw.db, c}
		if !aw.opened[c] {
			if err := aw.e.segment(ns); err != nil {
				return err
			}
			if err := aw.e.terminator(); err != nil {
				return err
			}
		}
		if err := aw.e.eof(ns, aw.crc[c]); err != nil {
			return err
		}
	}
	return aw.e.close()
}

// namespaceHeaderDoc encodes {db, collection, EOF, CRC} in mongodump's
// field order, the CRC's 64 bits as a BSON int64.
func namespaceHeaderDoc(ns Namespace, eof bool, crc uint64) (bson.Raw, error) {
	b, err := bson.Marshal(bson.D{{Key: "db", Value: ns.DB}, {Key: "collection", Value: ns.Collection},
		{Key: "EOF", Value: eof}, {Key: "CRC", Value: int64(crc)}})
	if err != nil {
		return nil, fmt.Errorf("write archive: namespace header of %s: %w", ns, err)
	}
	return b, nil
}

// ArchiveFile is an archive being written to a file: into a hidden
// partial file beside it, created at once (an unwritable place fails
// before any work), which Commit moves into place, so that a failure
// leaves no output. Abort removes it.
type ArchiveFile struct {
	path, tmp string
	f         *os.File
}

// CreateArchiveFile starts writing an archive to path, which must not
// exist, nor the partial file of a killed run beside it. Missing parent
// directories are created.
func CreateArchiveFile(path string) (*ArchiveFile, error) {
	if strings.HasSuffix(path, string(filepath.Separator)) {
		return nil, fmt.Errorf("write archive %s: names a directory (an archive is a file)", path)
	}
	if st, err := os.Lstat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("write archive %s: is a directory (an archive is written to a file)", path)
	} else if err == nil {
		return nil, fmt.Errorf("write archive %s: exists (refusing to overwrite)", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("write archive: %w", err)
	}
	if err := checkNoSiblingPartial(path); err != nil {
		return nil, fmt.Errorf("write archive: %w", err)
	}
	dir := filepath.Dir(filepath.Clean(path))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("write archive: %w", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".partial-"+hex.EncodeToString(rnd[:]))
	// 0666 less the umask, as mongodump's os.Create.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, fmt.Errorf("write archive: %w", err)
	}
	return &ArchiveFile{path: path, tmp: tmp, f: f}, nil
}

// Write writes to the partial file.
func (af *ArchiveFile) Write(p []byte) (int, error) { return af.f.Write(p) }

// Commit flushes the partial file to stable storage and moves it to its
// path, which must still not exist.
func (af *ArchiveFile) Commit() error {
	if af.f == nil {
		return errors.New("write archive: already committed or aborted")
	}
	if err := af.f.Sync(); err != nil {
		return fmt.Errorf("write archive %s: %w", af.path, err)
	}
	err := af.f.Close()
	af.f = nil
	if err != nil {
		return fmt.Errorf("write archive %s: %w", af.path, err)
	}
	// A hard link never replaces an existing file; where the file system
	// has none, a rename after a last check.
	if err := os.Link(af.tmp, af.path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("write archive %s: created meanwhile by someone else (refusing to overwrite)", af.path)
		}
		if _, serr := os.Lstat(af.path); !errors.Is(serr, os.ErrNotExist) {
			return fmt.Errorf("write archive %s: %w", af.path, err)
		}
		if err := os.Rename(af.tmp, af.path); err != nil {
			return fmt.Errorf("write archive %s: %w", af.path, err)
		}
	} else {
		_ = os.Remove(af.tmp)
	}
	af.tmp = ""
	if d, err := os.Open(filepath.Dir(af.path)); err == nil {
		_ = d.Sync() // the new name on stable storage too
		d.Close()
	}
	return nil
}

// Abort removes the partial file (after Commit: nothing).
func (af *ArchiveFile) Abort() {
	if af.f != nil {
		af.f.Close()
		af.f = nil
	}
	if af.tmp != "" {
		_ = os.Remove(af.tmp)
		af.tmp = ""
	}
}
