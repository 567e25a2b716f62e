package dump_test

import (
	"slices"
	"testing"
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
