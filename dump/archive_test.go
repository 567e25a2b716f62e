package dump_test

// mongodump archives: the production reader and writer are cross-checked
// against a second, minimal writer and reader written here from the
// format's description (mongo-tools' common/archive/spec.md), with a
// bitwise CRC-64, and against archives written by a real mongodump.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/bsontest"
)

// ---- an independent minimal archive writer and reader ----

// crc64ECMA is CRC-64 with the ECMA-182 polynomial, reflected, initial
// value and final XOR all ones (what Go's hash/crc64 computes with its
// ECMA table), bit by bit.
func crc64ECMA(crc uint64, p []byte) uint64 {
	const poly = 0xC96C5795D7870F42 // 0x42F0E1EBA9EA3693 reflected
	crc = ^crc
	for _, b := range p {
		crc ^= uint64(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ poly
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestCRC64ECMACheckValue(t *testing.T) {
	// The published check value of CRC-64/XZ (CRC-64/GO-ECMA).
	if got := crc64ECMA(0, []byte("123456789")); got != 0x995dc9bbdf1939fa {
		t.Fatalf("crc64ECMA(123456789) = %#x", got)
	}
}

type tns struct{ db, coll string }

func (n tns) String() string { return n.db + "." + n.coll }

// testArchive is an archive's content as the test writes and reads it.
type testArchive struct {
	header []byte
	meta   [][]byte
	// segments in stream order: a namespace's documents, or its EOF
	// (eof true, with the CRC to write unless crc is set).
	segs []tseg
}

type tseg struct {
	ns   tns
	docs [][]byte
	eof  bool
	crc  *uint64 // nil: the right one
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// bytes writes the archive as the spec lays it out.
func (a *testArchive) bytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	b.Write(le32(0x8199e26d))
	b.Write(a.header)
	for _, m := range a.meta {
		b.Write(m)
	}
	b.Write(le32(0xffffffff))
	crcs := map[tns]uint64{}
	for _, s := range a.segs {
		if s.eof {
			crc := crcs[s.ns]
			if s.crc != nil {
				crc = *s.crc
			}
			b.Write(bsontest.Marshal(t, bson.D{{Key: "db", Value: s.ns.db}, {Key: "collection", Value: s.ns.coll}, {Key: "EOF", Value: true}, {Key: "CRC", Value: int64(crc)}}))
			b.Write(le32(0xffffffff))
			continue
		}
		b.Write(bsontest.Marshal(t, bson.D{{Key: "db", Value: s.ns.db}, {Key: "collection", Value: s.ns.coll}, {Key: "EOF", Value: false}, {Key: "CRC", Value: int64(0)}}))
		for _, d := range s.docs {
			b.Write(d)
			crcs[s.ns] = crc64ECMA(crcs[s.ns], d)
		}
		b.Write(le32(0xffffffff))
	}
	return b.Bytes()
}

// readTestArchive parses an archive (gunzipping it when it starts with the
// gzip magic), checking each namespace's CRC at its EOF and that every
// namespace ended. It returns the header, the metadata documents and each
// namespace's documents concatenated, with the namespaces' order.
type parsedArchive struct {
	gzip   bool
	header []byte
	meta   [][]byte
	data   map[tns][]byte
	order  []tns
}

func readTestArchive(t testing.TB, b []byte) parsedArchive {
	t.Helper()
	var p parsedArchive
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
		p.gzip = true
	}
	if binary.LittleEndian.Uint32(b) != 0x8199e26d {
		t.Fatalf("no magic number: % x", b[:4])
	}
	b = b[4:]
	// next returns the next document, or nil at a terminator.
	next := func() []byte {
		t.Helper()
		if len(b) < 4 {
			t.Fatalf("cut short: %d bytes left", len(b))
		}
		n := binary.LittleEndian.Uint32(b)
		if n == 0xffffffff {
			b = b[4:]
			return nil
		}
		if int(n) > len(b) || n < 5 || b[n-1] != 0 {
			t.Fatalf("bad document length %d (%d bytes left)", n, len(b))
		}
		d := b[:n]
		b = b[n:]
		return d
	}
	if p.header = next(); p.header == nil {
		t.Fatal("no header")
	}
	for d := next(); d != nil; d = next() {
		p.meta = append(p.meta, d)
	}
	p.data = map[tns][]byte{}
	ended := map[tns]bool{}
	for len(b) > 0 {
		h := next()
		if h == nil {
			t.Fatal("terminator instead of a namespace header")
		}
		var nh struct {
			DB         string `bson:"db"`
			Collection string `bson:"collection"`
			EOF        bool   `bson:"EOF"`
			CRC        int64  `bson:"CRC"`
		}
		if err := bson.Unmarshal(h, &nh); err != nil {
			t.Fatal(err)
		}
		ns := tns{nh.DB, nh.Collection}
		if _, ok := p.data[ns]; !ok {
			p.order = append(p.order, ns)
			p.data[ns] = []byte{}
		}
		if ended[ns] {
			t.Fatalf("%s continues after its EOF", ns)
		}
		if nh.EOF {
			if got := crc64ECMA(0, p.data[ns]); got != uint64(nh.CRC) {
				t.Fatalf("%s: CRC %#x, EOF header says %#x", ns, got, uint64(nh.CRC))
			}
			ended[ns] = true
			if next() != nil {
				t.Fatalf("%s: a document after the EOF header", ns)
			}
			continue
		}
		for d := next(); d != nil; d = next() {
			p.data[ns] = append(p.data[ns], d...)
		}
	}
	for _, ns := range p.order {
		if !ended[ns] {
			t.Fatalf("%s has no EOF", ns)
		}
	}
	return p
}

// ---- fixtures ----

func doc(t testing.TB, kv ...any) []byte {
	t.Helper()
	var d bson.D
	for i := 0; i < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return bsontest.Marshal(t, d)
}

func metaDoc(t testing.TB, db, coll, typ string) []byte {
	return doc(t, "db", db, "collection", coll,
		"metadata", fmt.Sprintf(`{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},{"v":{"$numberInt":"2"},"key":{"user":{"$numberInt":"1"}},"name":"user_1"}],"uuid":"0123456789abcdef0123456789abcdef","collectionName":%q,"type":"collection"}`, coll),
		"size", int32(0), "type", typ)
}

// interleavedArchive is a parallel dump's archive: four collections of
// normal-oj and one of another database, segments interleaved, an empty
// collection written as mongodump writes it (an empty segment, then the
// EOF), one with no segment at all, and the oplog (database "").
func interleavedArchive(t testing.TB) (*testArchive, map[tns][][]byte) {
	const db = "normal-oj"
	docs := map[tns][][]byte{}
	for i := range 7 {
		docs[tns{db, "submission"}] = append(docs[tns{db, "submission"}], doc(t, "_id", bson.ObjectID{byte(i)}, "user", "alice", "problem", int32(1), "status", int32(0)))
		docs[tns{db, "user"}] = append(docs[tns{db, "user"}], doc(t, "_id", fmt.Sprintf("u%d", i), "submission", int32(i)))
		docs[tns{"other", "things"}] = append(docs[tns{"other", "things"}], doc(t, "_id", int64(i), "x", strings.Repeat("y", i*50)))
	}
	docs[tns{db, "problem"}] = [][]byte{doc(t, "_id", int32(1), "homeworks", bson.A{})}
	docs[tns{db, "homework"}] = [][]byte{doc(t, "_id", bson.ObjectID{9}, "studentStatus", bson.D{})}
	docs[tns{"", "oplog"}] = [][]byte{doc(t, "ts", bson.Timestamp{T: 1, I: 1}, "op", "n")}
	a := &testArchive{header: doc(t, "concurrent_collections", int32(4), "version", "0.1", "server_version", "7.0.14", "tool_version", "100.10.0")}
	for _, ns := range []tns{{db, "submission"}, {db, "user"}, {db, "problem"}, {db, "homework"}, {db, "course"}, {db, "announcement"}, {"other", "things"}} {
		a.meta = append(a.meta, metaDoc(t, ns.db, ns.coll, ""))
	}
	a.meta = append(a.meta, doc(t, "db", "", "collection", "oplog", "metadata", "", "size", int32(0)))
	sub, usr, oth := docs[tns{db, "submission"}], docs[tns{db, "user"}], docs[tns{"other", "things"}]
	a.segs = []tseg{
		{ns: tns{db, "submission"}, docs: sub[:2]},
		{ns: tns{db, "user"}, docs: usr[:3]},
		{ns: tns{"other", "things"}, docs: oth[:1]},
		{ns: tns{db, "submission"}, docs: sub[2:5]},
		{ns: tns{db, "course"}},                  // an empty collection, as mongodump writes one
		{ns: tns{db, "course"}, eof: true},       // ...
		{ns: tns{db, "announcement"}, eof: true}, // an empty one with no segment
		{ns: tns{db, "user"}, docs: usr[3:]},
		{ns: tns{db, "problem"}, docs: docs[tns{db, "problem"}]},
		{ns: tns{"other", "things"}, docs: oth[1:]},
		{ns: tns{db, "user"}, eof: true},
		{ns: tns{db, "submission"}, docs: sub[5:]},
		{ns: tns{db, "homework"}, docs: docs[tns{db, "homework"}]},
		{ns: tns{db, "problem"}, eof: true},
		{ns: tns{"other", "things"}, eof: true},
		{ns: tns{db, "submission"}, eof: true},
		{ns: tns{db, "homework"}, eof: true},
		{ns: tns{"", "oplog"}, docs: docs[tns{"", "oplog"}]},
		{ns: tns{"", "oplog"}, eof: true},
	}
	docs[tns{db, "course"}] = nil
	docs[tns{db, "announcement"}] = nil
	return a, docs
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func unpack(t testing.TB, b []byte) *dump.Archive {
	t.Helper()
	a, err := dump.Unpack(context.Background(), bytes.NewReader(b), "test.archive", dump.UnpackOptions{Database: "normal-oj", TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func concat(docs [][]byte) []byte { return bytes.Join(docs, nil) }

// ---- tests ----

// TestArchiveRoundTrip: an archive written from the spec unpacks into the
// database's collections (read by Dir), and Write gives it back: the same
// header and metadata byte for byte, every namespace's documents byte for
// byte with a right CRC, gzip-compressed exactly when the input was; the
// collections given a rewrite carry its documents.
func TestArchiveRoundTrip(t *testing.T) {
	for _, zipped := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", zipped), func(t *testing.T) {
			ta, docs := interleavedArchive(t)
			in := ta.bytes(t)
			if zipped {
				in = gz(t, in)
			}
			a := unpack(t, in)
			if a.Gzip != zipped {
				t.Fatalf("Gzip = %v", a.Gzip)
			}
			d := a.Dir()
			for _, c := range []string{"submission", "user", "problem", "homework", "course", "announcement"} {
				got, err := d.Read(c)
				if err != nil {
					t.Fatal(err)
				}
				var gotB [][]byte
				for _, g := range got {
					gotB = append(gotB, g)
				}
				if !bytes.Equal(concat(gotB), concat(docs[tns{"normal-oj", c}])) {
					t.Errorf("%s: read %d documents, want %d", c, len(got), len(docs[tns{"normal-oj", c}]))
				}
				if slices.Contains(dump.Sources, c) && d.File(c) == "" {
					t.Errorf("%s: no file", c)
				}
			}
			if m := d.Missing(); len(m) > 0 {
				t.Errorf("Missing() = %v", m)
			}

			newUser := [][]byte{doc(t, "_id", "u0", "submission", int32(42)), doc(t, "_id", "u1", "submission", int32(43))}
			var out bytes.Buffer
			err := a.Write(context.Background(), &out, map[string]dump.Rewrite{
				"user": func(emit func([]byte) error) error {
					for _, u := range newUser {
						if err := emit(u); err != nil {
							return err
						}
					}
					return nil
				},
				"things": func(func([]byte) error) error {
					return errors.New("a rewrite of another database's collection must not be used")
				},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p := readTestArchive(t, out.Bytes())
			if p.gzip != zipped {
				t.Errorf("output gzip = %v, want %v", p.gzip, zipped)
			}
			if !bytes.Equal(p.header, ta.header) {
				t.Error("header changed")
			}
			if len(p.meta) != len(ta.meta) {
				t.Fatalf("%d metadata documents, want %d", len(p.meta), len(ta.meta))
			}
			for i := range p.meta {
				if !bytes.Equal(p.meta[i], ta.meta[i]) {
					t.Errorf("metadata %d changed", i)
				}
			}
			want := []tns{{"normal-oj", "submission"}, {"normal-oj", "user"}, {"other", "things"}, {"normal-oj", "course"},
				{"normal-oj", "announcement"}, {"normal-oj", "problem"}, {"normal-oj", "homework"}, {"", "oplog"}}
			if !slices.Equal(p.order, want) {
				t.Errorf("namespaces %v, want %v (first appearance)", p.order, want)
			}
			for _, ns := range want {
				w := concat(docs[ns])
				if ns.coll == "user" {
					w = concat(newUser)
				}
				if !bytes.Equal(p.data[ns], w) {
					t.Errorf("%s: %d bytes of documents, want %d", ns, len(p.data[ns]), len(w))
				}
			}

			// And the output reads back through the production reader.
			b := unpack(t, out.Bytes())
			got, err := b.Dir().Read("user")
			if err != nil || len(got) != 2 {
				t.Fatalf("re-read: %d users, %v", len(got), err)
			}
		})
	}
}

// TestArchiveWriteUnchanged: with no rewrite, a sequential archive (what
// mongodump -j1 writes, one segment per namespace) comes back byte for
// byte.
func TestArchiveWriteUnchanged(t *testing.T) {
	ta := &testArchive{header: doc(t, "concurrent_collections", int32(1), "version", "0.1", "server_version", "7.0.0", "tool_version", "100.9.4")}
	ta.meta = [][]byte{metaDoc(t, "normal-oj", "user", ""), metaDoc(t, "normal-oj", "course", "")}
	ta.segs = []tseg{
		{ns: tns{"normal-oj", "user"}, docs: [][]byte{doc(t, "_id", "a"), doc(t, "_id", "b")}},
		{ns: tns{"normal-oj", "user"}, eof: true},
		{ns: tns{"normal-oj", "course"}},
		{ns: tns{"normal-oj", "course"}, eof: true},
	}
	in := ta.bytes(t)
	a := unpack(t, in)
	var out bytes.Buffer
	if err := a.Write(context.Background(), &out, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("rewritten unchanged archive differs:\n% x\n% x", out.Bytes(), in)
	}
}

// TestArchiveRefused: a corrupt, cut or incomplete archive is refused with
// a message saying what is wrong, and leaves no temporary directory.
func TestArchiveRefused(t *testing.T) {
	bad := uint64(12345)
	cases := []struct {
		name   string
		mutate func(a *testArchive)
		raw    func(b []byte) []byte
		want   string
	}{
		{name: "CRC mismatch", mutate: func(a *testArchive) {
			for i := range a.segs {
				if a.segs[i].eof && a.segs[i].ns.coll == "user" {
					a.segs[i].crc = &bad
				}
			}
		}, want: "CRC-64"},
		{name: "a document changed", raw: func(b []byte) []byte {
			i := bytes.Index(b, []byte("yyyyyyyyyy"))
			b = slices.Clone(b)
			b[i] = 'z'
			return b
		}, want: "CRC-64"},
		{name: "missing EOF", mutate: func(a *testArchive) {
			a.segs = slices.DeleteFunc(a.segs, func(s tseg) bool { return s.eof && s.ns.coll == "homework" })
		}, want: "no EOF header for normal-oj.homework"},
		{name: "prelude collection never ended", mutate: func(a *testArchive) {
			a.segs = slices.DeleteFunc(a.segs, func(s tseg) bool { return s.ns.coll == "announcement" })
		}, want: "the prelude lists normal-oj.announcement"},
		{name: "data after EOF", mutate: func(a *testArchive) {
			a.segs = append(a.segs, tseg{ns: tns{"normal-oj", "user"}, docs: [][]byte{doc(t, "_id", "late")}})
		}, want: "continues after its EOF header"},
		{name: "document after an EOF header", raw: func(b []byte) []byte {
			// The oplog's EOF header is the last but one element: put a
			// document between it and its terminator.
			return append(slices.Clone(b[:len(b)-4]), append(doc(t, "x", int32(1)), 0xff, 0xff, 0xff, 0xff)...)
		}, want: "a document after the EOF header"},
		{name: "unknown namespace header field", mutate: func(a *testArchive) {
			a.segs = append(a.segs, tseg{}) // placeholder replaced in raw
		}, raw: func(b []byte) []byte {
			// Drop the empty placeholder namespace header written for
			// tseg{} and write one with an extra field.
			h := bsontest.Marshal(t, bson.D{{Key: "db", Value: ""}, {Key: "collection", Value: ""}, {Key: "EOF", Value: false}, {Key: "CRC", Value: int64(0)}})
			b = b[:len(b)-len(h)-4]
			return append(slices.Clone(b), append(doc(t, "db", "x", "collection", "y", "EOF", false, "CRC", int64(0), "extra", int32(1)), 0xff, 0xff, 0xff, 0xff)...)
		}, want: `unknown field "extra"`},
		// A corrupt collection metadata (seen failing: accepted, and
		// copied into the corrected archive).
		{name: "metadata cut short", mutate: func(a *testArchive) {
			a.meta[1] = doc(t, "db", "normal-oj", "collection", "problem", "metadata", `{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id"`, "size", int32(0), "type", "collection")
		}, want: "normal-oj.problem: not valid JSON"},
		{name: "metadata index without key", mutate: func(a *testArchive) {
			a.meta[1] = doc(t, "db", "normal-oj", "collection", "problem", "metadata", `{"indexes":[{"name":"_id_"}]}`, "size", int32(0), "type", "collection")
		}, want: "normal-oj.problem: index 0 has no key"},
		{name: "not an archive", raw: func(b []byte) []byte { return doc(t, "_id", int32(1)) }, want: "looks like a collection's .bson file"},
		{name: "empty", raw: func(b []byte) []byte { return nil }, want: "empty, not a mongodump archive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ta, _ := interleavedArchive(t)
			if c.mutate != nil {
				c.mutate(ta)
			}
			b := ta.bytes(t)
			if c.raw != nil {
				b = c.raw(b)
			}
			for _, zipped := range []bool{false, true} {
				in := b
				if zipped {
					in = gz(t, b)
				}
				checkRefused(t, in, c.want)
			}
		})
	}
}

func checkRefused(t *testing.T, in []byte, want string) {
	t.Helper()
	tmp := t.TempDir()
	a, err := dump.Unpack(context.Background(), bytes.NewReader(in), "test.archive", dump.UnpackOptions{Database: "normal-oj", TempDir: tmp})
	if err == nil {
		a.Close()
		t.Fatalf("accepted; want an error containing %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left %s behind", left[0].Name())
	}
}

// TestArchiveTruncated: the archive cut anywhere is refused (and never
// read as a shorter valid one): at each of its first bytes, then at a
// stride, and at both sides of every terminator (where a cut is most
// easily taken for a clean end); so is a gzip stream cut short.
func TestArchiveTruncated(t *testing.T) {
	ta, _ := interleavedArchive(t)
	b := ta.bytes(t)
	var cuts []int
	for n := 0; n < len(b); n++ {
		if n < 128 || n%17 == 0 {
			cuts = append(cuts, n)
		}
	}
	for i := 0; i+4 <= len(b); i++ {
		if bytes.Equal(b[i:i+4], []byte{0xff, 0xff, 0xff, 0xff}) && i+4 < len(b) {
			cuts = append(cuts, i, i+1, i+4)
		}
	}
	tmp := t.TempDir()
	for _, n := range cuts {
		a, err := dump.Unpack(context.Background(), bytes.NewReader(b[:n]), "cut.archive", dump.UnpackOptions{Database: "normal-oj", TempDir: tmp})
		if err == nil {
			a.Close()
			t.Fatalf("the archive cut at byte %d of %d was accepted", n, len(b))
		}
		if n > 0 && !strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "not a mongodump archive") {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left %s behind", left[0].Name())
	}
	z := gz(t, b)
	for _, n := range []int{len(z) - 1, len(z) - 8, len(z) / 2, 10} {
		checkRefused(t, z[:n], "truncated")
	}
	// The gzip trailer's CRC-32 is checked too.
	z = slices.Clone(z)
	z[len(z)-6] ^= 1
	checkRefused(t, z, "checksum")
}

// realArchivesEnv names a folder holding archives written by a real
// mongodump. They are public test data of mongodb/mongo-tools, which this
// repository does not redistribute; testdata/README.md names each file and
// where it comes from.
const realArchivesEnv = "MATERIALIZER_TEST_MONGODUMP_ARCHIVES"

// TestArchiveRealMongodump reads archives written by a real mongodump
// (testdata/README.md names their source): every CRC checks, and what
// Write gives back is what the independent reader reads in the input.
func TestArchiveRealMongodump(t *testing.T) {
	dir := os.Getenv(realArchivesEnv)
	if dir == "" {
		t.Skipf("%s is not set: put the mongodump archives named in dump/testdata/README.md in a folder and set it to that folder", realArchivesEnv)
	}
	cases := []struct {
		file string
		ns   []tns
	}{
		{"test.bar.archive", []tns{{"test", "bar"}, {"admin", "system.version"}}},
		{"dump-w-oplog.archive", []tns{{"test", "foo"}, {"admin", "system.version"}, {"", "oplog"}}},
		// The prelude lists timeseries_test.foo_ts; its data (and EOF) is
		// system.buckets.foo_ts's.
		{"timeseries.archive", []tns{{"timeseries_test", "system.buckets.foo_ts"}, {"admin", "system.views"}}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, c.file))
			if err != nil {
				t.Fatal(err)
			}
			want := readTestArchive(t, in)
			for _, ns := range c.ns {
				if _, ok := want.data[ns]; !ok {
					t.Fatalf("the test's reader found no %s in %s (found %v)", ns, c.file, want.order)
				}
			}
			a, err := dump.Unpack(context.Background(), bytes.NewReader(in), c.file, dump.UnpackOptions{Database: c.ns[0].db, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			var got []tns
			for _, ns := range a.Namespaces() {
				got = append(got, tns{ns.DB, ns.Collection})
			}
			if !slices.Equal(got, want.order) {
				t.Errorf("namespaces %v, the test's reader %v", got, want.order)
			}
			var out bytes.Buffer
			if err := a.Write(context.Background(), &out, nil, nil); err != nil {
				t.Fatal(err)
			}
			back := readTestArchive(t, out.Bytes())
			if !bytes.Equal(back.header, want.header) || len(back.meta) != len(want.meta) {
				t.Fatal("header or metadata changed")
			}
			for i := range back.meta {
				if !bytes.Equal(back.meta[i], want.meta[i]) {
					t.Errorf("metadata %d changed", i)
				}
			}
			for _, ns := range want.order {
				if !bytes.Equal(back.data[ns], want.data[ns]) {
					t.Errorf("%s changed", ns)
				}
			}
		})
	}
}

// TestArchiveKeep: namespaces not kept are checked but not stored, and an
// archive missing some cannot be written back.
func TestArchiveKeep(t *testing.T) {
	ta, _ := interleavedArchive(t)
	tmp := t.TempDir()
	a, err := dump.Unpack(context.Background(), bytes.NewReader(ta.bytes(t)), "t", dump.UnpackOptions{Database: "normal-oj", TempDir: tmp,
		Keep: func(ns dump.Namespace) bool {
			return ns.DB == "normal-oj" && slices.Contains(dump.Sources, ns.Collection)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	entries, _ := os.ReadDir(filepath.Join(a.TempDir(), "other"))
	if len(entries) != 0 {
		t.Errorf("kept %d namespaces not asked for", len(entries))
	}
	if err := a.Write(context.Background(), io.Discard, nil, nil); err == nil || !strings.Contains(err.Error(), "not kept") {
		t.Errorf("Write = %v", err)
	}
	// A CRC mismatch in a namespace not kept is still refused.
	for i := range ta.segs {
		if ta.segs[i].eof && ta.segs[i].ns.db == "other" {
			bad := uint64(1)
			ta.segs[i].crc = &bad
		}
	}
	if _, err := dump.Unpack(context.Background(), bytes.NewReader(ta.bytes(t)), "t", dump.UnpackOptions{Database: "normal-oj", TempDir: tmp,
		Keep: func(ns dump.Namespace) bool {
			return ns.DB == "normal-oj" && slices.Contains(dump.Sources, ns.Collection)
		}}); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Errorf("CRC mismatch in a discarded namespace: %v", err)
	}
	if a.Close() != nil {
		t.Fatal("close")
	}
	if _, err := os.Stat(a.TempDir()); a.TempDir() != "" || err == nil {
		t.Errorf("temporary directory left after Close")
	}
}

// TestArchiveFile: the output appears only at Commit, never replaces a
// file, and Abort leaves nothing.
func TestArchiveFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "out.archive")
	af, err := dump.CreateArchiveFile(p)
	if err != nil {
		t.Fatal(err)
	}
	af.Write([]byte("x"))
	if _, err := os.Stat(p); err == nil {
		t.Fatal("output visible before Commit")
	}
	if err := af.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "x" {
		t.Fatalf("output %q", b)
	}
	if _, err := dump.CreateArchiveFile(p); err == nil {
		t.Fatal("an existing output was accepted")
	}
	q := filepath.Join(dir, "sub", "other.archive")
	af, err = dump.CreateArchiveFile(q)
	if err != nil {
		t.Fatal(err)
	}
	af.Abort()
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(entries) != 1 {
		t.Fatalf("after Abort: %v", entries)
	}
	// Someone else creating the output meanwhile is not overwritten.
	af, err = dump.CreateArchiveFile(q)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(q, []byte("theirs"), 0o644)
	if err := af.Commit(); err == nil {
		t.Fatal("Commit replaced a file created meanwhile")
	}
	af.Abort()
	if b, _ := os.ReadFile(q); string(b) != "theirs" {
		t.Fatalf("their file became %q", b)
	}
	// A name ending in a separator names a directory: refused at once,
	// not after the whole archive is written (seen failing: the final
	// rename failed, "not a directory").
	if af, err := dump.CreateArchiveFile(filepath.Join(dir, "newdir") + string(filepath.Separator)); err == nil {
		af.Abort()
		t.Fatal("an output naming a directory (trailing separator) was accepted")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a refused output left %v", entries)
	}
}

// TestArchiveNames: collection names that are no file names, or that a
// case-insensitive file system confuses with a source collection's, are
// stored apart, and come back under their own names.
func TestArchiveNames(t *testing.T) {
	ta := &testArchive{header: doc(t, "version", "0.1")}
	names := []string{"User", "user", "a/b", "..", "user.bson", "system.buckets.user"}
	for i, c := range names {
		ns := tns{"normal-oj", c}
		ta.meta = append(ta.meta, metaDoc(t, ns.db, ns.coll, ""))
		ta.segs = append(ta.segs, tseg{ns: ns, docs: [][]byte{doc(t, "_id", c, "n", int32(i))}}, tseg{ns: ns, eof: true})
	}
	in := ta.bytes(t)
	a := unpack(t, in)
	users, err := a.Dir().Read("user")
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 1 || users[0].Lookup("_id").StringValue() != "user" {
		t.Fatalf("user read as %v", users)
	}
	var out bytes.Buffer
	if err := a.Write(context.Background(), &out, nil, nil); err != nil {
		t.Fatal(err)
	}
	p := readTestArchive(t, out.Bytes())
	for i, c := range names {
		ns := tns{"normal-oj", c}
		if !bytes.Equal(p.data[ns], doc(t, "_id", c, "n", int32(i))) {
			t.Errorf("%q came back as %q", c, p.data[ns])
		}
	}
}

// TestArchiveInterrupted: a cancelled context stops the reading and
// leaves no temporary directory.
func TestArchiveInterrupted(t *testing.T) {
	ta, _ := interleavedArchive(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tmp := t.TempDir()
	_, err := dump.Unpack(ctx, bytes.NewReader(ta.bytes(t)), "t", dump.UnpackOptions{Database: "normal-oj", TempDir: tmp})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Unpack = %v, want context.Canceled", err)
	}
	emptyTemp(t, tmp)
	a := unpack(t, ta.bytes(t))
	if err := a.Write(ctx, io.Discard, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want context.Canceled", err)
	}
}

// TestArchiveWriteInterruptedInLastNamespace: a context cancelled while
// the last namespace is being written (where a signal most often lands: it
// is usually submission, the bulk of the archive) fails Write, so the
// caller removes its partial output instead of moving it into place.
func TestArchiveWriteInterruptedInLastNamespace(t *testing.T) {
	ta, _ := interleavedArchive(t)
	a := unpack(t, ta.bytes(t))
	var total int64
	if err := a.Write(context.Background(), io.Discard, nil, func(n int64) { total += n }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sum int64
	err := a.Write(ctx, io.Discard, nil, func(n int64) {
		if sum += n; sum >= total {
			cancel() // on the last bytes: past every per-namespace check
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want context.Canceled", err)
	}
}

func emptyTemp(t *testing.T, dir string) {
	t.Helper()
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("left %s behind", left[0].Name())
	}
}

// TestArchiveManyNamespaces: more namespaces interleaved than files kept
// open while unpacking: each comes back whole and in order.
func TestArchiveManyNamespaces(t *testing.T) {
	ta := &testArchive{header: doc(t, "version", "0.1")}
	want := map[tns][]byte{}
	const colls, rounds = 40, 3
	for r := range rounds {
		for c := range colls {
			ns := tns{"school", fmt.Sprintf("c%02d", c)}
			if r == 0 {
				ta.meta = append(ta.meta, metaDoc(t, ns.db, ns.coll, ""))
			}
			d := doc(t, "_id", int32(r), "c", int32(c))
			want[ns] = append(want[ns], d...)
			ta.segs = append(ta.segs, tseg{ns: ns, docs: [][]byte{d}})
		}
	}
	for c := range colls {
		ta.segs = append(ta.segs, tseg{ns: tns{"school", fmt.Sprintf("c%02d", c)}, eof: true})
	}
	a := unpack(t, ta.bytes(t))
	var out bytes.Buffer
	if err := a.Write(context.Background(), &out, nil, nil); err != nil {
		t.Fatal(err)
	}
	p := readTestArchive(t, out.Bytes())
	if len(p.order) != colls {
		t.Fatalf("%d namespaces, want %d", len(p.order), colls)
	}
	for ns, w := range want {
		if !bytes.Equal(p.data[ns], w) {
			t.Errorf("%s: %d bytes, want %d", ns, len(p.data[ns]), len(w))
		}
	}
}

// TestArchivePrelude: the prelude's collections are handed over before
// any document is read (a refusal there does not wait for the data).
func TestArchivePrelude(t *testing.T) {
	ta, _ := interleavedArchive(t)
	b := ta.bytes(t)
	cut := b[:bytes.Index(b, []byte{0xff, 0xff, 0xff, 0xff})+4+10] // the data cut short
	stop := errors.New("stop")
	var got []dump.Namespace
	tmp := t.TempDir()
	_, err := dump.Unpack(context.Background(), bytes.NewReader(cut), "t", dump.UnpackOptions{Database: "normal-oj", TempDir: tmp,
		Prelude: func(c []dump.Namespace) error { got = c; return stop }})
	if !errors.Is(err, stop) {
		t.Fatalf("Unpack = %v, want the Prelude's error", err)
	}
	if len(got) != len(ta.meta) || got[0] != (dump.Namespace{DB: "normal-oj", Collection: "submission"}) || got[len(got)-1] != (dump.Namespace{Collection: "oplog"}) {
		t.Errorf("Prelude got %v", got)
	}
	emptyTemp(t, tmp)
}

// TestArchiveWriter: a new archive written document by document, its
// collections interleaved and one empty, reads back with the test's own
// reader (every CRC checked, every namespace ended, the empty one as an
// empty segment and its EOF), its prelude listing every collection with
// the header mongorestore reads, gzip-compressed exactly when asked; the
// production reader unpacks it; the bytes counted are the stream's before
// compression; a collection not declared is refused.
func TestArchiveWriter(t *testing.T) {
	const db = "normal-oj"
	colls := []string{"user", "problem", "homework", "submission"}
	adds := []struct {
		coll string
		doc  []byte
	}{
		{"user", doc(t, "_id", "u0")}, {"user", doc(t, "_id", "u1")},
		{"submission", doc(t, "_id", bson.ObjectID{1}, "user", "u0")},
		{"user", doc(t, "_id", "u2", "x", strings.Repeat("y", 300))},
		{"homework", doc(t, "_id", bson.ObjectID{9}, "studentStatus", bson.D{})},
		{"submission", doc(t, "_id", bson.ObjectID{2}, "user", "u1")},
	}
	for _, gzipped := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gzipped), func(t *testing.T) {
			var out bytes.Buffer
			var counted int64
			aw, err := dump.NewArchiveWriter(&out, gzipped, db, colls, func(n int64) { counted += n })
			if err != nil {
				t.Fatal(err)
			}
			want := map[tns][]byte{}
			for _, a := range adds {
				if err := aw.Add(a.coll, a.doc); err != nil {
					t.Fatal(err)
				}
				want[tns{db, a.coll}] = append(want[tns{db, a.coll}], a.doc...)
			}
			if err := aw.Add("course", doc(t, "_id", 1)); err == nil || !strings.Contains(err.Error(), "course") {
				t.Errorf("a collection not declared: %v", err)
			}
			if err := aw.Close(); err != nil {
				t.Fatal(err)
			}
			p := readTestArchive(t, out.Bytes())
			if p.gzip != gzipped {
				t.Errorf("gzip %v, want %v", p.gzip, gzipped)
			}
			raw := out.Bytes()
			if gzipped {
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				if raw, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if counted != int64(len(raw)) {
				t.Errorf("counted %d bytes, the stream is %d before compression", counted, len(raw))
			}
			var h struct {
				Concurrent int32  `bson:"concurrent_collections"`
				Version    string `bson:"version"`
			}
			if err := bson.Unmarshal(p.header, &h); err != nil || h.Concurrent != 4 || h.Version != "0.1" {
				t.Errorf("header %v (%v): want concurrent_collections 4, version 0.1", bson.Raw(p.header), err)
			}
			if len(p.meta) != len(colls) {
				t.Fatalf("%d metadata documents, want %d", len(p.meta), len(colls))
			}
			for i, m := range p.meta {
				var md struct {
					DB, Collection, Metadata, Type string
				}
				if err := bson.Unmarshal(m, &md); err != nil || md.DB != db || md.Collection != colls[i] || md.Type != "collection" ||
					!strings.Contains(md.Metadata, `"collectionName":"`+colls[i]+`"`) {
					t.Errorf("metadata %d: %v (%v)", i, bson.Raw(m), err)
				}
			}
			for _, c := range colls {
				ns := tns{db, c}
				got, ok := p.data[ns]
				if !ok || !bytes.Equal(got, want[ns]) {
					t.Errorf("%s: %d bytes (present %v), want %d", ns, len(got), ok, len(want[ns]))
				}
			}
			a := unpack(t, out.Bytes())
			if a.Gzip != gzipped {
				t.Errorf("Unpack: gzip %v", a.Gzip)
			}
			if got := a.Size(); got != int64(len(concat([][]byte{want[tns{db, "user"}], want[tns{db, "submission"}], want[tns{db, "homework"}]}))) {
				t.Errorf("Size %d", got)
			}
		})
	}
}

// TestArchiveWriteStopsWithinANamespace: a cancel stops Write within the
// namespace being copied, not after it: the last namespace of a large
// backup (its submissions) is most of the writing, and an interrupted
// rebuild must not keep writing for minutes. Seen failing (every byte
// written before the cancel was noticed) with the context checked only
// between namespaces.
func TestArchiveWriteStopsWithinANamespace(t *testing.T) {
	ns := tns{"normal-oj", "submission"}
	var docs [][]byte
	for i := range 20_000 {
		docs = append(docs, doc(t, "_id", bson.ObjectID{byte(i >> 8), byte(i)}, "user", "alice", "code", strings.Repeat("x", 100)))
	}
	ta := &testArchive{header: doc(t, "version", "0.1"), meta: [][]byte{metaDoc(t, ns.db, ns.coll, "")},
		segs: []tseg{{ns: ns, docs: docs}, {ns: ns, eof: true}}}
	a := unpack(t, ta.bytes(t))
	for _, rewrite := range []map[string]dump.Rewrite{nil, {"submission": func(emit func([]byte) error) error {
		for _, d := range docs {
			if err := emit(d); err != nil {
				return err
			}
		}
		return nil
	}}} {
		ctx, cancel := context.WithCancel(context.Background())
		var sum int64
		err := a.Write(ctx, io.Discard, rewrite, func(n int64) {
			if sum += n; sum >= 64<<10 {
				cancel()
			}
		})
		cancel()
		if !errors.Is(err, context.Canceled) || sum > 1<<20 {
			t.Errorf("rewritten %v: Write = %v after %d of %d bytes, want context.Canceled within the first MiB", rewrite != nil, err, sum, a.Size())
		}
	}
}

// TestArchiveWriteRefusesBrokenRewrite: a rewritten document whose
// framing is broken (shorter than a document, a length prefix that is not
// its length, no terminating NUL) fails the write naming the namespace,
// rather than writing an archive mongorestore would misread. Seen
// failing with the check removed: the write succeeded.
func TestArchiveWriteRefusesBrokenRewrite(t *testing.T) {
	good := doc(t, "_id", "a")
	for _, c := range []struct {
		name string
		doc  []byte
	}{
		{"too short", []byte{4, 0, 0, 0}},
		{"length prefix too small", append([]byte{byte(len(good) - 1)}, good[1:]...)},
		{"length prefix too large", append([]byte{byte(len(good) + 1)}, good[1:]...)},
		{"no terminating NUL", append(slices.Clone(good[:len(good)-1]), 1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ta := &testArchive{header: doc(t, "concurrent_collections", int32(1), "version", "0.1", "server_version", "7.0.0", "tool_version", "100.9.4")}
			ta.meta = [][]byte{metaDoc(t, "normal-oj", "user", "")}
			ta.segs = []tseg{
				{ns: tns{"normal-oj", "user"}, docs: [][]byte{good}},
				{ns: tns{"normal-oj", "user"}, eof: true},
			}
			a := unpack(t, ta.bytes(t))
			rewrite := map[string]dump.Rewrite{"user": func(emit func([]byte) error) error {
				if err := emit(good); err != nil {
					return err
				}
				return emit(c.doc)
			}}
			var out bytes.Buffer
			err := a.Write(context.Background(), &out, rewrite, nil)
			if err == nil || !strings.Contains(err.Error(), "normal-oj.user: a rewritten document's framing is broken") {
				t.Fatalf("Write with a broken rewritten document: %v, want the framing refused", err)
			}
		})
	}
}
