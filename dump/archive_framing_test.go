package dump_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/dump"
)

// TestArchiveRefusesDocumentWithoutNUL: a document whose length prefix
// is right but whose last byte is not the NUL every BSON document ends
// with is refused where it is read, even when the namespace's CRC-64
// covers it as is (a writer that framed it wrong hashed what it wrote).
// Accepted, it would be copied into the unpacked .bson file, to fail (or
// be misread) only when decoded.
func TestArchiveRefusesDocumentWithoutNUL(t *testing.T) {
	ta, _ := interleavedArchive(t)
	broken := false
	for i := range ta.segs {
		if s := &ta.segs[i]; !s.eof && s.ns.coll == "user" && len(s.docs) > 0 {
			d := slices.Clone(s.docs[0])
			d[len(d)-1] = 0x01
			s.docs[0] = d
			broken = true
			break
		}
	}
	if !broken {
		t.Fatal("the test archive has no user document")
	}
	b := ta.bytes(t)
	for _, zipped := range []bool{false, true} {
		in := b
		if zipped {
			in = gz(t, b)
		}
		checkRefused(t, in, "does not end with a NUL byte")
	}
}

// TestArchiveWriteRefusesBrokenFraming: Archive.Write refuses a rewritten
// document whose framing is broken (too short, a length prefix other
// than its size, no final NUL) instead of writing it into the archive,
// where its CRC-64 would cover it and mongorestore would misread the
// stream from there on.
func TestArchiveWriteRefusesBrokenFraming(t *testing.T) {
	good := doc(t, "_id", "a")
	longer := slices.Clone(good)
	longer[0]++ // the prefix claims one byte more than there is
	shorter := append(slices.Clone(good), 0)
	noNUL := slices.Clone(good)
	noNUL[len(noNUL)-1] = 1
	cases := []struct {
		name string
		doc  []byte
	}{
		{"shorter than a document", []byte{5, 0, 0}},
		{"length prefix past the end", longer},
		{"length prefix short of the end", shorter},
		{"no final NUL", noNUL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ta := &testArchive{header: doc(t, "concurrent_collections", int32(1), "version", "0.1", "server_version", "7.0.0", "tool_version", "100.9.4")}
			ta.meta = [][]byte{metaDoc(t, "normal-oj", "user", "")}
			ta.segs = []tseg{
				{ns: tns{"normal-oj", "user"}, docs: [][]byte{good}},
				{ns: tns{"normal-oj", "user"}, eof: true},
			}
			a := unpack(t, ta.bytes(t))
			var out bytes.Buffer
			err := a.Write(context.Background(), &out, map[string]dump.Rewrite{"user": func(emit func([]byte) error) error {
				return emit(c.doc)
			}}, nil)
			if err == nil || !strings.Contains(err.Error(), "framing is broken") {
				t.Errorf("Write: %v, want the broken framing refused", err)
			}
		})
	}
}
