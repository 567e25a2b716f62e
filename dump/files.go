package dump

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// openRegular opens path for reading, refusing anything but a regular
// file (symbolic links followed): a named pipe would block the open, or
// the read, past any cancellation, and a device or socket is no dump
// file. The open does not block (O_NONBLOCK, which a regular file's
// reads ignore), so the check comes before any wait.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, st.Mode())
	}
	return f, nil
}

// notRegular is the error for a dump file that is not a regular file.
func notRegular(path string, m fs.FileMode) error {
	what := "not a regular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO), not a regular file"
	case m&fs.ModeSocket != 0:
		what = "a socket, not a regular file"
	case m&fs.ModeDevice != 0:
		what = "a device, not a regular file"
	case m.IsDir():
		what = "a directory, not a regular file"
	}
	return fmt.Errorf("%s is %s: a dump holds only regular files", path, what)
}

// CheckFiles checks, before anything is read, every file under the
// dump's root: each is a regular file (symbolic links followed; a named
// pipe would hang a read), and each collection's metadata
// (X.metadata.json, or .json.gz) reads as mongorestore reads it
// (checkMetadata), so that a dump that would not restore is not called
// clean nor copied into a corrected copy.
func (d Dir) CheckFiles() error {
	root, _, err := d.walkRoot()
	if err != nil {
		return fmt.Errorf("read dump: %w", err)
	}
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		if e.IsDir() {
			return nil
		}
		st, err := os.Stat(path) // a symbolic link: what it names
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("dump file %w", notRegular(path, st.Mode()))
		}
		name := e.Name()
		if !strings.HasSuffix(name, ".metadata.json") && !strings.HasSuffix(name, ".metadata.json.gz") {
			return nil
		}
		text, err := readMetadataFile(path)
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		if err := checkMetadata(text); err != nil {
			return fmt.Errorf("dump metadata %s: %w (mongorestore would fail on it; restore it from the original dump, or delete it to restore without indexes and options)", path, err)
		}
		return nil
	})
}

// maxMetadata bounds a metadata file read whole (mongodump's hold a
// collection's options and index specifications: kilobytes).
const maxMetadata = 16 << 20

// readMetadataFile reads a .metadata.json file, gunzipping a .gz one.
func readMetadataFile(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	b, err := io.ReadAll(io.LimitReader(r, maxMetadata+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxMetadata {
		return nil, fmt.Errorf("%s: over %d bytes, not a collection's metadata", path, maxMetadata)
	}
	return b, nil
}

// metadata is a collection's metadata as mongodump writes it (the
// .metadata.json file, an archive prelude's metadata string) and
// mongorestore reads it: canonical Extended JSON of an object.
type metadata struct {
	Options        bson.Raw        `bson:"options"`
	Indexes        []metadataIndex `bson:"indexes"`
	UUID           string          `bson:"uuid"`
	CollectionName string          `bson:"collectionName"`
	Type           string          `bson:"type"`
}

// metadataIndex is one index specification: mongorestore recreates it
// from its key and name.
type metadataIndex struct {
	Key  bson.Raw `bson:"key"`
	Name string   `bson:"name"`
}

// checkMetadata refuses a collection's metadata text mongorestore could
// not use: not an Extended JSON object, a field of the wrong type, an
// index without a key or a name. Empty text is no metadata (mongorestore
// skips it).
func checkMetadata(text []byte) error {
	if len(text) == 0 {
		return nil
	}
	if !json.Valid(text) {
		return errors.New("not valid JSON (cut short, or overwritten?)")
	}
	var m metadata
	if err := bson.UnmarshalExtJSON(text, false, &m); err != nil {
		return fmt.Errorf("not the Extended JSON of a collection's metadata: %w", err)
	}
	for i, ix := range m.Indexes {
		if len(ix.Key) <= 5 { // absent, or {}
			return fmt.Errorf("index %d has no key", i)
		}
		if ix.Name == "" {
			return fmt.Errorf("index %d has no name", i)
		}
	}
	return nil
}
