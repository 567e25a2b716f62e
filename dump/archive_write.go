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

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Write writes the archive to w in mongodump's format, gzip-compressed
// when the input was: the header and the collection metadata as read
// (indexes, options: unchanged), then every namespace in the order it
// first appeared, whole: one segment of its documents, then its EOF header
// carrying their CRC-64. The documents of the database's collections named
// in rewrite come from it (their namespaces' CRC is that of the new
// bytes); every other namespace's are copied byte for byte. The archive
// must have been unpacked keeping every namespace.
func (a *Archive) Write(ctx context.Context, w io.Writer, rewrite map[string]Rewrite) (err error) {
	for _, n := range a.namespaces {
		if n.file == "" {
			return fmt.Errorf("write archive: namespace %s was not kept when %s was read", n.ns, a.Name)
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	out := io.Writer(bw)
	var zw *gzip.Writer
	if a.Gzip {
		zw = gzip.NewWriter(bw)
		out = zw
	}
	put := func(b []byte) error {
		if _, err := out.Write(b); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
		return nil
	}
	term := binary.LittleEndian.AppendUint32(nil, archiveTerminator)
	if err := put(binary.LittleEndian.AppendUint32(nil, archiveMagic)); err != nil {
		return err
	}
	if err := put(a.header); err != nil {
		return err
	}
	for _, m := range a.meta {
		if err := put(m); err != nil {
			return err
		}
	}
	if err := put(term); err != nil {
		return err
	}
	for _, n := range a.namespaces {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := namespaceHeaderDoc(n.ns, false, 0)
		if err != nil {
			return err
		}
		if err := put(h); err != nil {
			return err
		}
		crc, err := a.writeDocuments(out, n, rewrite)
		if err != nil {
			return err
		}
		if err := put(term); err != nil {
			return err
		}
		if h, err = namespaceHeaderDoc(n.ns, true, crc); err != nil {
			return err
		}
		if err := put(h); err != nil {
			return err
		}
		if err := put(term); err != nil {
			return err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
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
			if _, err := out.Write(doc); err != nil {
				return fmt.Errorf("write archive: %w", err)
			}
			return nil
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
// exist. Missing parent directories are created.
func CreateArchiveFile(path string) (*ArchiveFile, error) {
	if st, err := os.Lstat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("write archive %s: is a directory (the corrected copy of an archive is an archive file)", path)
	} else if err == nil {
		return nil, fmt.Errorf("write archive %s: exists (refusing to overwrite)", path)
	} else if !errors.Is(err, os.ErrNotExist) {
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
