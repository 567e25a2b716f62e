package dump

// mongodump --archive: one stream holding every collection of a dump, as
// mongo-tools' common/archive describes it:
//
//	archive   = magic header metadata* terminator (segment | eof)*
//	magic     = 0x8199e26d, little-endian
//	header    = {concurrent_collections, version, server_version, tool_version}
//	metadata  = {db, collection, metadata (the .metadata.json text), size, type}
//	segment   = {db, collection, EOF: false, CRC: 0} document* terminator
//	eof       = {db, collection, EOF: true, CRC} terminator
//	terminator = 0xffffffff
//
// Namespaces interleave (mongodump dumps several collections at once); a
// namespace's documents may span several segments, and its EOF header
// carries the CRC-64 (ECMA table, Go's hash/crc64 convention) of all of
// them, concatenated, which mongorestore checks. With --gzip the whole
// stream is gzip-compressed.
//
// An archive is unpacked once into a private temporary directory, one
// BSON file per namespace, so that the directory reader (Dir) runs on it
// unchanged; its prelude is kept in memory, byte for byte, to write the
// corrected archive back.

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"go.mongodb.org/mongo-driver/v2/bson"
)

const (
	archiveMagic      = 0x8199e26d
	archiveTerminator = 0xffffffff
	// timeseriesBuckets prefixes the namespace holding a time series
	// collection's data in archives of servers before 8.3.
	timeseriesBuckets = "system.buckets."
)

// ErrNotArchive is the error of reading something that is not a mongodump
// archive (wrapped with what it starts with).
var ErrNotArchive = errors.New("not a mongodump archive")

// crcTable is the table of the namespaces' CRC-64: mongodump hashes with
// crc64.New(crc64.MakeTable(crc64.ECMA)).
var crcTable = crc64.MakeTable(crc64.ECMA)

// Namespace names a collection of an archive.
type Namespace struct {
	DB, Collection string
}

func (n Namespace) String() string {
	if n.DB == "" {
		return n.Collection // the oplog of mongodump --oplog
	}
	return n.DB + "." + n.Collection
}

// Archive is a mongodump archive unpacked into a temporary directory.
// Close removes the directory.
type Archive struct {
	// Name is what the archive was read from, for messages.
	Name string
	// Gzip reports that the archive was gzip-compressed (mongodump
	// --archive --gzip); Write compresses the same way.
	Gzip bool

	tmp        string      // the temporary directory
	db         string      // the database Dir exposes
	header     bson.Raw    // as read
	meta       []bson.Raw  // collection metadata documents, as read
	metaNS     []Namespace // their namespaces
	namespaces []*archiveNS
	byName     map[Namespace]*archiveNS
	open       map[*archiveNS]*openFile // while unpacking
	clock      int64                    // counts writer calls, for open
}

// archiveNS is one namespace of an archive and its unpacked file.
type archiveNS struct {
	ns    Namespace
	file  string // its documents; "" when not kept
	crc   uint64
	bytes int64
	eof   bool
}

// UnpackOptions control Unpack.
type UnpackOptions struct {
	// Database is the database whose source collections (Sources) Dir
	// exposes as <collection>.bson files.
	Database string
	// Keep says which namespaces to keep (nil: all); the others are read
	// and checked, not stored. An archive Write needs all of them.
	Keep func(Namespace) bool
	// TempDir is where the temporary directory is created (empty: the
	// system's, $TMPDIR on Unix).
	TempDir string
	// Progress, when set, is called with 1 for every document read.
	Progress func(n int)
	// Prelude, when set, is called with the collections the archive's
	// prelude lists, before any document is read; its error stops Unpack
	// (returned as is).
	Prelude func(collections []Namespace) error
}

// Unpack reads a mongodump archive (gzip-compressed or not: detected by
// its first bytes) from r into a new temporary directory. Every
// namespace's CRC-64 is checked against its EOF header, and an archive
// that ends early (a namespace or a collection of the prelude without its
// EOF header, a cut document) is refused. name is what r is, for messages.
// On an error nothing is left behind.
func Unpack(ctx context.Context, r io.Reader, name string, opts UnpackOptions) (_ *Archive, err error) {
	tmp, err := os.MkdirTemp(opts.TempDir, "materializer-archive-")
	if err != nil {
		return nil, fmt.Errorf("unpack archive %s: %w", name, err)
	}
	a := &Archive{Name: name, tmp: tmp, db: opts.Database, byName: make(map[Namespace]*archiveNS)}
	defer func() {
		if err != nil {
			_ = a.Close()
		}
	}()
	for _, d := range []string{a.dbDir(), a.otherDir()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("unpack archive %s: %w", name, err)
		}
	}
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read archive %s: %w", name, err)
	}
	in := io.Reader(br)
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("read archive %s: %w", name, err)
		}
		defer zr.Close()
		a.Gzip = true
		in = bufio.NewReaderSize(zr, 1<<20)
	}
	p := &archiveParser{r: in, name: name}
	if err := a.readPrelude(p); err != nil {
		return nil, err
	}
	if opts.Prelude != nil {
		if err := opts.Prelude(slices.Clone(a.metaNS)); err != nil {
			return nil, err
		}
	}
	err = a.readNamespaces(ctx, p, opts.Keep, opts.Progress)
	if cerr := a.closeFiles(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Close removes the temporary directory.
func (a *Archive) Close() error {
	if a == nil || a.tmp == "" {
		return nil
	}
	err := os.RemoveAll(a.tmp)
	a.tmp = ""
	return err
}

// TempDir is the temporary directory the archive was unpacked into.
func (a *Archive) TempDir() string { return a.tmp }

func (a *Archive) dbDir() string    { return filepath.Join(a.tmp, "db") }
func (a *Archive) otherDir() string { return filepath.Join(a.tmp, "other") }

// Dir is the unpacked database (UnpackOptions.Database) as a dump
// directory: its source collections as <collection>.bson files.
func (a *Archive) Dir() Dir {
	return Dir{Root: a.dbDir(), Path: a.dbDir()}
}

// Namespaces returns the namespaces of the archive's data, in the order
// they first appeared.
func (a *Archive) Namespaces() []Namespace {
	out := make([]Namespace, len(a.namespaces))
	for i, n := range a.namespaces {
		out[i] = n.ns
	}
	return out
}

// archiveParser reads the documents and terminators of an archive
// stream, counting its (uncompressed) bytes for messages.
type archiveParser struct {
	r    io.Reader
	name string
	off  int64
	buf  []byte
}

// next reads a document (valid until the next call) or a terminator
// (nil, true). At the end of the stream it returns io.EOF, only there;
// a stream cut anywhere else is io.ErrUnexpectedEOF.
func (p *archiveParser) next() (bson.Raw, bool, error) {
	var l [4]byte
	n, err := io.ReadFull(p.r, l[:])
	if errors.Is(err, io.EOF) && n == 0 {
		return nil, false, io.EOF
	}
	if err != nil {
		return nil, false, p.readError(p.off+int64(n), "", err)
	}
	v := binary.LittleEndian.Uint32(l[:])
	if v == archiveTerminator {
		p.off += 4
		return nil, true, nil
	}
	if v < 5 || v > maxDocument {
		return nil, false, p.errorf("byte %d: %d is neither a BSON document's length nor a terminator", p.off, v)
	}
	size := int(v)
	if cap(p.buf) < size {
		p.buf = make([]byte, size, max(size, 64<<10))
	}
	p.buf = p.buf[:size]
	copy(p.buf, l[:])
	if m, err := io.ReadFull(p.r, p.buf[4:]); err != nil {
		return nil, false, p.readError(p.off+4+int64(m), fmt.Sprintf(", in the %d-byte document at byte %d", size, p.off), err)
	}
	if p.buf[size-1] != 0 {
		return nil, false, p.errorf("byte %d: the document does not end with a NUL byte", p.off)
	}
	p.off += int64(size)
	return bson.Raw(p.buf), false, nil
}

// readError reports a failed read at byte at: the stream cut short, or
// what the reader (the file, gzip) said.
func (p *archiveParser) readError(at int64, where string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return p.errorf("truncated at byte %d%s: %w", at, where, io.ErrUnexpectedEOF)
	}
	return p.errorf("byte %d%s: %w", at, where, err)
}

func (p *archiveParser) errorf(format string, args ...any) error {
	return fmt.Errorf("read archive %s: "+format, append([]any{p.name}, args...)...)
}

// readPrelude reads the magic number, the header and the collection
// metadata up to their terminator.
func (a *Archive) readPrelude(p *archiveParser) error {
	var m [4]byte
	n, err := io.ReadFull(p.r, m[:])
	if n == 0 && errors.Is(err, io.EOF) {
		return p.errorf("empty, %w", ErrNotArchive)
	}
	if n == 0 && err != nil {
		return p.readError(0, "", err) // a gzip stream cut short, a read error
	}
	if err != nil {
		return p.errorf("%w (%d bytes)", ErrNotArchive, n)
	}
	if binary.LittleEndian.Uint32(m[:]) != archiveMagic {
		hint := ""
		if l := binary.LittleEndian.Uint32(m[:]); l >= 5 && l <= maxDocument {
			hint = " (it looks like a collection's .bson file; a directory dump is read from its directory)"
		}
		return p.errorf("%w: it starts with %s, not the archive magic number 6de29981%s", ErrNotArchive, hex.EncodeToString(m[:]), hint)
	}
	p.off = 4
	doc, term, err := p.next()
	if err != nil {
		return noEOFAt(p, err)
	}
	if term {
		return p.errorf("byte 4: a terminator where the archive header belongs")
	}
	if err := doc.Validate(); err != nil {
		return p.errorf("the archive header: %w", err)
	}
	a.header = slices.Clone(doc)
	for {
		at := p.off
		doc, term, err := p.next()
		if err != nil {
			return noEOFAt(p, err)
		}
		if term {
			return nil
		}
		ns, err := parseMetadata(doc)
		if err != nil {
			return p.errorf("the collection metadata at byte %d: %w", at, err)
		}
		a.meta = append(a.meta, slices.Clone(doc))
		a.metaNS = append(a.metaNS, ns)
	}
}

// noEOFAt turns the end of the stream inside a block into a truncation.
func noEOFAt(p *archiveParser, err error) error {
	if errors.Is(err, io.EOF) {
		return p.errorf("truncated at byte %d: %w", p.off, io.ErrUnexpectedEOF)
	}
	return err
}

// parseMetadata reads the namespace of a collection metadata document.
func parseMetadata(doc bson.Raw) (Namespace, error) {
	if err := doc.Validate(); err != nil {
		return Namespace{}, err
	}
	var ns Namespace
	var meta string // the collection's .metadata.json text
	elems, _ := doc.Elements()
	for _, e := range elems {
		var ok bool
		switch e.Key() {
		case "db":
			ns.DB, ok = e.Value().StringValueOK()
		case "collection":
			ns.Collection, ok = e.Value().StringValueOK()
		case "metadata":
			meta, ok = e.Value().StringValueOK()
		case "type":
			_, ok = e.Value().StringValueOK()
		case "size":
			t := e.Value().Type
			ok = t == bson.TypeInt32 || t == bson.TypeInt64
		default:
			ok = true // unknown fields are mongorestore's business
		}
		if !ok {
			return ns, fmt.Errorf("field %q is a BSON %s", e.Key(), e.Value().Type)
		}
	}
	if ns.Collection == "" {
		return ns, errors.New("no collection name")
	}
	if err := checkMetadata([]byte(meta)); err != nil {
		return ns, fmt.Errorf("%s: %w (mongorestore would fail on it)", ns, err)
	}
	return ns, nil
}

// namespaceHeader is a segment's header or a namespace's EOF header.
type namespaceHeader struct {
	ns  Namespace
	eof bool
	crc uint64
}

// parseNamespaceHeader reads {db, collection, EOF, CRC}; like mongorestore
// it refuses other fields and other types.
func parseNamespaceHeader(doc bson.Raw) (namespaceHeader, error) {
	var h namespaceHeader
	if err := doc.Validate(); err != nil {
		return h, err
	}
	elems, _ := doc.Elements()
	for _, e := range elems {
		v := e.Value()
		var ok bool
		switch e.Key() {
		case "db":
			h.ns.DB, ok = v.StringValueOK()
		case "collection":
			h.ns.Collection, ok = v.StringValueOK()
		case "EOF":
			h.eof, ok = v.BooleanOK()
		case "CRC":
			var c int64
			c, ok = v.Int64OK()
			h.crc = uint64(c)
		default:
			return h, fmt.Errorf("unknown field %q", e.Key())
		}
		if !ok {
			return h, fmt.Errorf("field %q is a BSON %s", e.Key(), v.Type)
		}
	}
	if h.ns.Collection == "" {
		return h, errors.New("no collection name")
	}
	return h, nil
}

// readNamespaces demultiplexes the segments after the prelude into one
// file per namespace, checking each namespace's CRC-64 at its EOF header,
// then that every namespace (and every collection of the prelude) ended.
func (a *Archive) readNamespaces(ctx context.Context, p *archiveParser, keep func(Namespace) bool, progress func(int)) error {
	if progress == nil {
		progress = func(int) {}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		at := p.off
		doc, term, err := p.next()
		if errors.Is(err, io.EOF) {
			return a.checkEnded(p)
		}
		if err != nil {
			return err
		}
		if term {
			return p.errorf("byte %d: a terminator where a namespace header belongs", at)
		}
		h, err := parseNamespaceHeader(doc)
		if err != nil {
			return p.errorf("the namespace header at byte %d: %w", at, err)
		}
		n := a.byName[h.ns]
		if n == nil {
			n = &archiveNS{ns: h.ns}
			if keep == nil || keep(h.ns) {
				if n.file, err = a.createFile(h.ns, len(a.namespaces)); err != nil {
					return a.writeError(err)
				}
			}
			a.byName[h.ns] = n
			a.namespaces = append(a.namespaces, n)
		}
		if n.eof {
			return p.errorf("byte %d: namespace %s continues after its EOF header", at, h.ns)
		}
		if h.eof {
			if n.crc != h.crc {
				return p.errorf("namespace %s: the CRC-64 of its %d bytes of documents is %d, its EOF header at byte %d says %d (the archive is corrupt)",
					h.ns, n.bytes, int64(n.crc), at, int64(h.crc))
			}
			n.eof = true
			if err := a.closeFile(n); err != nil {
				return err
			}
			doc, term, err := p.next()
			if err != nil {
				return noEOFAt(p, err)
			}
			if !term {
				return p.errorf("byte %d: a document after the EOF header of %s (%d bytes)", p.off-int64(len(doc)), h.ns, len(doc))
			}
			continue
		}
		if err := a.readSegment(ctx, p, n, progress); err != nil {
			return err
		}
	}
}

// readSegment appends the documents of one segment to n's file.
func (a *Archive) readSegment(ctx context.Context, p *archiveParser, n *archiveNS, progress func(int)) error {
	w := io.Writer(io.Discard)
	if n.file != "" {
		var err error
		if w, err = a.writer(n); err != nil {
			return err
		}
	}
	for i := 0; ; i++ {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		doc, term, err := p.next()
		if err != nil {
			return noEOFAt(p, err)
		}
		if term {
			return nil
		}
		n.crc = crc64.Update(n.crc, crcTable, doc)
		n.bytes += int64(len(doc))
		if _, err := w.Write(doc); err != nil {
			return a.writeError(err)
		}
		progress(1)
	}
}

// maxOpen bounds the namespace files kept open while unpacking: a
// parallel dump interleaves a few namespaces (mongodump's
// --numParallelCollections, 4 by default), in segments that may be short.
const maxOpen = 16

// openFile is the open file of a namespace being unpacked.
type openFile struct {
	f    *os.File
	w    *bufio.Writer
	used int64 // when it was last written to, for closing the oldest
}

// writer returns the (buffered) file of namespace n, opening it, and
// closing the least recently used one beyond maxOpen.
func (a *Archive) writer(n *archiveNS) (*bufio.Writer, error) {
	a.clock++
	if of := a.open[n]; of != nil {
		of.used = a.clock
		return of.w, nil
	}
	if len(a.open) >= maxOpen {
		var oldest *archiveNS
		for m, of := range a.open {
			if oldest == nil || of.used < a.open[oldest].used {
				oldest = m
			}
		}
		if err := a.closeFile(oldest); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(n.file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, a.writeError(err)
	}
	if a.open == nil {
		a.open = make(map[*archiveNS]*openFile)
	}
	of := &openFile{f: f, w: bufio.NewWriterSize(f, 256<<10), used: a.clock}
	a.open[n] = of
	return of.w, nil
}

// closeFile flushes and closes n's file if it is open.
func (a *Archive) closeFile(n *archiveNS) error {
	of := a.open[n]
	if of == nil {
		return nil
	}
	delete(a.open, n)
	err := of.w.Flush()
	if cerr := of.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return a.writeError(err)
	}
	return nil
}

// closeFiles flushes and closes every open file.
func (a *Archive) closeFiles() error {
	var err error
	for n := range a.open {
		if cerr := a.closeFile(n); err == nil {
			err = cerr
		}
	}
	return err
}

// writeError wraps a failure to write the temporary directory, saying
// where it is when the disk is full.
func (a *Archive) writeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("unpack archive %s into %s: %w (the uncompressed dump must fit in the temporary directory)", a.Name, filepath.Dir(a.tmp), err)
	}
	return fmt.Errorf("unpack archive %s: %w", a.Name, err)
}

// createFile creates the empty file of namespace ns, the i-th: the
// database's source collections as <collection>.bson (what Dir reads),
// any other namespace by its number, so that no collection name (a "/", a
// "User" beside "user" on a case-insensitive file system) can be taken for
// another file.
func (a *Archive) createFile(ns Namespace, i int) (string, error) {
	if ns.DB == a.db && slices.Contains(Sources, ns.Collection) {
		p := filepath.Join(a.dbDir(), ns.Collection+".bson")
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return p, f.Close()
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	p := filepath.Join(a.otherDir(), strconv.Itoa(i)+".bson")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	return p, f.Close()
}

// checkEnded refuses an archive some namespace of which, or some
// collection of its prelude, has no EOF header: mongorestore would fail
// on it, and its documents may be cut short.
func (a *Archive) checkEnded(p *archiveParser) error {
	var open []string
	for _, n := range a.namespaces {
		if !n.eof {
			open = append(open, n.ns.String())
		}
	}
	if len(open) > 0 {
		return p.errorf("truncated at byte %d: no EOF header for %s (the archive was cut short)", p.off, strings.Join(open, ", "))
	}
	for _, ns := range a.metaNS {
		if a.ended(ns) {
			continue
		}
		return p.errorf("truncated at byte %d: the prelude lists %s but its documents never ended (no EOF header)", p.off, ns)
	}
	return nil
}

// ended reports whether the data of the prelude's collection ns ended: its
// own namespace's, or (a time series collection of a server before 8.3)
// its buckets'.
func (a *Archive) ended(ns Namespace) bool {
	if n := a.byName[ns]; n != nil && n.eof {
		return true
	}
	n := a.byName[Namespace{ns.DB, timeseriesBuckets + ns.Collection}]
	return n != nil && n.eof
}
