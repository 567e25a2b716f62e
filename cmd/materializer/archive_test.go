package main

// The offline commands on mongodump archives (--archive, with
// or without --gzip), from a file and from standard input: the same
// reports as on the same dump as a directory, and a corrected archive in
// the same format whose untouched namespaces and metadata are byte for
// byte the input's. Archives are built and read here with the format's
// layout (mongo-tools' common/archive/spec.md); package dump's tests
// cross-check its reader and writer in depth.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/bsontest"
	"github.com/normal-oj/noj-materializer/materialize"
)

type archNS struct{ db, coll string }

// archiveInput is a dump's namespaces and their documents, in order.
type archiveInput struct {
	ns   []archNS
	docs map[archNS][]bson.Raw
}

// archiveOfDump lays out the collections of a dump (the database
// normal-oj), one collection of another database and an oplog as a
// parallel mongodump does: every namespace's documents in segments of two,
// interleaved round-robin, each namespace's EOF header with the CRC-64
// (ECMA) of its documents. The prelude holds a metadata document per
// namespace, with a secondary index, as a real dump's does.
func archiveOfDump(t testing.TB, colls map[string][]bson.Raw, zipped bool) ([]byte, archiveInput) {
	t.Helper()
	in := archiveInput{docs: map[archNS][]bson.Raw{}}
	for _, c := range sortedKeys(colls) {
		ns := archNS{"normal-oj", c}
		in.ns = append(in.ns, ns)
		in.docs[ns] = colls[c]
	}
	other, oplog := archNS{"school", "roster"}, archNS{"", "oplog"}
	in.ns = append(in.ns, other, oplog)
	in.docs[other] = []bson.Raw{bsontest.Marshal(t, bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "x"}})}
	in.docs[oplog] = []bson.Raw{bsontest.Marshal(t, bson.D{{Key: "ts", Value: bson.Timestamp{T: 9, I: 1}}, {Key: "op", Value: "n"}, {Key: "o", Value: bson.D{}}})}

	var b bytes.Buffer
	put32 := func(v uint32) { b.Write(binary.LittleEndian.AppendUint32(nil, v)) }
	put32(0x8199e26d)
	b.Write(bsontest.Marshal(t, bson.D{{Key: "concurrent_collections", Value: int32(4)}, {Key: "version", Value: "0.1"},
		{Key: "server_version", Value: "7.0.14"}, {Key: "tool_version", Value: "100.10.0"}}))
	for _, ns := range in.ns {
		md := fmt.Sprintf(`{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},{"v":{"$numberInt":"2"},"key":{"user":{"$numberInt":"1"},"problem":{"$numberInt":"1"}},"name":"user_1_problem_1"}],"uuid":"00112233445566778899aabbccddeeff","collectionName":%q,"type":"collection"}`, ns.coll)
		if ns.db == "" {
			md = ""
		}
		b.Write(bsontest.Marshal(t, bson.D{{Key: "db", Value: ns.db}, {Key: "collection", Value: ns.coll}, {Key: "metadata", Value: md},
			{Key: "size", Value: int32(0)}, {Key: "type", Value: ""}}))
	}
	put32(0xffffffff)
	header := func(ns archNS, eof bool, crc uint64) {
		b.Write(bsontest.Marshal(t, bson.D{{Key: "db", Value: ns.db}, {Key: "collection", Value: ns.coll}, {Key: "EOF", Value: eof}, {Key: "CRC", Value: int64(crc)}}))
	}
	table := crc64.MakeTable(crc64.ECMA)
	crcs := map[archNS]uint64{}
	next := map[archNS]int{}
	for left := true; left; {
		left = false
		for _, ns := range in.ns {
			d := in.docs[ns][next[ns]:]
			if len(d) == 0 {
				continue
			}
			left = true
			d = d[:min(2, len(d))]
			next[ns] += len(d)
			header(ns, false, 0)
			for _, doc := range d {
				b.Write(doc)
				crcs[ns] = crc64.Update(crcs[ns], table, doc)
			}
			put32(0xffffffff)
		}
	}
	for _, ns := range in.ns {
		header(ns, true, crcs[ns])
		put32(0xffffffff)
	}
	if !zipped {
		return b.Bytes(), in
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes(), in
}

// archiveRead is an archive as read here: prelude and each namespace's
// documents concatenated, in the order the namespaces first appear.
type archiveRead struct {
	gzip    bool
	prelude []byte // header and metadata documents
	order   []archNS
	data    map[archNS][]byte
}

// readArchive reads an archive (gunzipping it when it starts with the gzip
// magic), checking each namespace's CRC at its EOF header and that every
// namespace ended.
func readArchive(t testing.TB, b []byte) archiveRead {
	t.Helper()
	var a archiveRead
	if len(b) > 1 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
		a.gzip = true
	}
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != 0x8199e26d {
		t.Fatal("not an archive")
	}
	pos := 4
	next := func() []byte { // a document, or nil at a terminator
		t.Helper()
		if pos+4 > len(b) {
			t.Fatalf("archive cut at %d", pos)
		}
		n := int(binary.LittleEndian.Uint32(b[pos:]))
		if uint32(n) == 0xffffffff {
			pos += 4
			return nil
		}
		if n < 5 || pos+n > len(b) {
			t.Fatalf("bad length %d at %d", n, pos)
		}
		pos += n
		return b[pos-n : pos]
	}
	for next() != nil {
	}
	a.prelude = b[4 : pos-4]
	a.data = map[archNS][]byte{}
	ended := map[archNS]bool{}
	table := crc64.MakeTable(crc64.ECMA)
	for pos < len(b) {
		h := bson.Raw(next())
		ns := archNS{h.Lookup("db").StringValue(), h.Lookup("collection").StringValue()}
		if _, ok := a.data[ns]; !ok {
			a.order = append(a.order, ns)
			a.data[ns] = []byte{}
		}
		if h.Lookup("EOF").Boolean() {
			if got, want := crc64.Checksum(a.data[ns], table), uint64(h.Lookup("CRC").Int64()); got != want {
				t.Fatalf("%v: CRC %d, EOF header %d", ns, got, want)
			}
			ended[ns] = true
			if next() != nil {
				t.Fatal("document after EOF header")
			}
			continue
		}
		for d := next(); d != nil; d = next() {
			a.data[ns] = append(a.data[ns], d...)
		}
	}
	for _, ns := range a.order {
		if !ended[ns] {
			t.Fatalf("%v: no EOF", ns)
		}
	}
	return a
}

func concatRaw(docs []bson.Raw) []byte {
	var b []byte
	for _, d := range docs {
		b = append(b, d...)
	}
	return b
}

// runCLIStdin runs a command line with stdin.
func runCLIStdin(t testing.TB, stdin []byte, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	env := &environment{stdout: &stdout, stderr: &stderr, stdin: bytes.NewReader(stdin)}
	code := runMain(ctx, env, args)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// emptyDir fails the test when dir holds anything (a temporary directory
// left behind).
func emptyDir(t testing.TB, dir, after string) {
	t.Helper()
	if e, _ := os.ReadDir(dir); len(e) > 0 {
		t.Errorf("after %s, %s holds %s", after, dir, e[0].Name())
	}
}

// TestOfflineArchive: verify, explain and rebuild on an archive (a file
// and standard input; gzip or not) report what they report on the same
// dump as a directory; rebuild writes an archive in the input's format
// whose user and homework documents are the directory rebuild's, byte for
// byte, and whose every other namespace, the header and the metadata are
// the input's; the corrected archive verifies clean; no temporary
// directory is left behind.
func TestOfflineArchive(t *testing.T) {
	cleanConfigEnv(t)
	v, want := driftiestVector(t)
	colls := dumpColls(v.DB, otherCollections())
	for _, zipped := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", zipped), func(t *testing.T) {
			tmpdir := t.TempDir()
			t.Setenv("TMPDIR", tmpdir)
			root := t.TempDir()
			dir, outDir := filepath.Join(root, "dir"), filepath.Join(root, "out")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeDump(t, dir, v.DB, otherCollections())
			arch, in := archiveOfDump(t, colls, zipped)
			archFile := filepath.Join(root, "in.archive")
			if err := os.WriteFile(archFile, arch, 0o644); err != nil {
				t.Fatal(err)
			}

			rDir := runCLI(t, "verify", "--dump", dir)
			checkReport(t, "verify of the directory", rDir, v, want)
			for _, r := range []cliResult{runCLI(t, "verify", "--dump", archFile), runCLIStdin(t, arch, "verify", "--dump", "-")} {
				if r.code != rDir.code || r.stdout != rDir.stdout {
					t.Errorf("verify of the archive:\n%v\nof the directory:\n%v", r, rDir)
				}
			}
			emptyDir(t, tmpdir, "verify")

			s := v.DB.Submissions[0]
			user, problem := s.Lookup("user").StringValue(), fmt.Sprint(s.Lookup("problem").AsInt64())
			eDir := runCLI(t, "explain", "--dump", dir, "--user", user, "--problem", problem, "--json")
			eArch := runCLI(t, "explain", "--dump", archFile, "--user", user, "--problem", problem, "--json")
			if eArch.code != exitOK || eDir.code != exitOK {
				t.Fatalf("explain: directory %v\narchive %v", eDir, eArch)
			}
			noSource := func(s string) string {
				lines := strings.Split(s, "\n")
				return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, `"source"`) }), "\n")
			}
			if noSource(eArch.stdout) != noSource(eDir.stdout) {
				t.Errorf("explain of the archive:\n%s\nof the directory:\n%s", eArch.stdout, eDir.stdout)
			}
			if !strings.Contains(eArch.stdout, archFile) {
				t.Errorf("explain names its source as %q, not the archive", eArch.stdout)
			}
			emptyDir(t, tmpdir, "explain")

			if r := runCLI(t, "rebuild", "--dump", dir, "--out", outDir); r.code != exitOK {
				t.Fatalf("rebuild of the directory: %v", r)
			}
			suffix := ".archive" // the output is compressed as its name says
			if zipped {
				suffix = ".archive.gz"
			}
			outFile := filepath.Join(root, "corrected", "out"+suffix)
			r := runCLI(t, "rebuild", "--dump", archFile, "--out", outFile)
			if r.code != exitOK {
				t.Fatalf("rebuild of the archive: %v", r)
			}
			checkReport(t, "rebuild of the archive", r, v, want)
			emptyDir(t, tmpdir, "rebuild")
			out, err := os.ReadFile(outFile)
			if err != nil {
				t.Fatal(err)
			}
			got, inRead := readArchive(t, out), readArchive(t, arch)
			if got.gzip != zipped {
				t.Errorf("output gzip-compressed: %v, input: %v", got.gzip, zipped)
			}
			if !bytes.Equal(got.prelude, inRead.prelude) {
				t.Error("the header or the collection metadata changed")
			}
			if !slices.Equal(got.order, inRead.order) || len(got.order) != len(in.ns) {
				t.Errorf("namespaces %v, want %v (the input's, in the order they first appear)", got.order, inRead.order)
			}
			for _, ns := range in.ns {
				want := concatRaw(in.docs[ns])
				if ns.db == "normal-oj" && (ns.coll == materialize.CollUser || ns.coll == materialize.CollHomework) {
					want = concatRaw(readBSONFile(t, filepath.Join(outDir, ns.coll+".bson")))
					if bytes.Equal(want, concatRaw(in.docs[ns])) {
						t.Errorf("%v: the directory rebuild changed nothing (the vector should drift)", ns)
					}
				}
				if !bytes.Equal(got.data[ns], want) {
					t.Errorf("%v: %d bytes of documents, want %d", ns, len(got.data[ns]), len(want))
				}
			}

			if r := runCLI(t, "verify", "--dump", outFile); r.code != exitOK {
				t.Errorf("verify of the corrected archive: want exit 0\n%v", r)
			}
			// From standard input, the same corrected archive.
			outFile2 := filepath.Join(root, "out2"+suffix)
			if r := runCLIStdin(t, arch, "rebuild", "--dump", "-", "--out", outFile2); r.code != exitOK {
				t.Fatalf("rebuild from stdin: %v", r)
			}
			if out2, _ := os.ReadFile(outFile2); !bytes.Equal(out2, out) {
				t.Error("rebuild from standard input wrote another archive than from the file")
			}
			emptyDir(t, tmpdir, "rebuild from stdin")
			if e, _ := os.ReadDir(filepath.Dir(outFile)); len(e) != 1 {
				t.Errorf("beside the output: %v", e)
			}
		})
	}
}

// TestOfflineArchiveErrors: an archive that cannot be used is refused
// before any output exists, saying why, and leaves no temporary directory.
func TestOfflineArchiveErrors(t *testing.T) {
	cleanConfigEnv(t)
	v, _ := driftiestVector(t)
	tmpdir := t.TempDir()
	t.Setenv("TMPDIR", tmpdir)
	root := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, _ := archiveOfDump(t, dumpColls(v.DB, nil), false)
	goodFile := write("good.archive", good)
	noHW := dumpColls(v.DB, nil)
	delete(noHW, materialize.CollHomework)
	noHWArch, _ := archiveOfDump(t, noHW, false)
	corrupt := slices.Clone(good)
	corrupt[len(corrupt)-10] ^= 1 // in the last EOF header's CRC
	existing := write("exists.archive", []byte("keep me"))
	dir := filepath.Join(root, "dir")
	writeDump(t, dir, v.DB, nil)

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing collection", []string{"verify", "--dump", write("nohw.archive", noHWArch)}, exitConfig, "has no normal-oj.homework"},
		{"CRC mismatch", []string{"rebuild", "--dump", write("corrupt.archive", corrupt), "--out", filepath.Join(root, "o1.archive")}, exitFail, "CRC-64"},
		{"truncated", []string{"verify", "--dump", write("cut.archive", good[:len(good)-30])}, exitFail, "truncated"},
		{"not an archive", []string{"verify", "--dump", write("user.bson", concatRaw(v.DB.Users))}, exitConfig, "not a mongodump archive"},
		{"out exists", []string{"rebuild", "--dump", goodFile, "--out", existing}, exitConfig, "exists"},
		{"out is the input", []string{"rebuild", "--dump", goodFile, "--out", goodFile}, exitConfig, "exists"},
		{"out is stdout", []string{"rebuild", "--dump", goodFile, "--out", "-"}, exitConfig, "standard output"},
		{"archive out for a directory", []string{"rebuild", "--dump", dir, "--out", filepath.Join(root, "o2.archive")}, exitConfig, "is a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("want exit %d and %q\n%v", c.code, c.want, r)
			}
			if strings.Contains(r.stdout, "submissions read") {
				t.Errorf("a report printed before the refusal:\n%v", r)
			}
			emptyDir(t, tmpdir, c.name)
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep me" {
		t.Errorf("the existing output became %q", b)
	}
	for _, f := range []string{"o1.archive", "o2.archive"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s written by a failed rebuild", f)
		}
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.Contains(e.Name(), "partial") {
			t.Errorf("partial output %s left", e.Name())
		}
	}
}

// TestOfflineArchiveProgress: unpacking an archive reports progress
// (long on a big one), and --quiet keeps stderr empty.
func TestOfflineArchiveProgress(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	seedDir := filepath.Join(root, "seed")
	if r := runCLI(t, "seed", "--users", "30", "--problems", "8", "--homeworks", "4", "--submissions", "3000", "--out", seedDir); r.code != exitOK {
		t.Fatalf("seed\n%v", r)
	}
	colls := map[string][]bson.Raw{}
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		colls[c] = readBSONFile(t, filepath.Join(seedDir, c+".bson"))
	}
	arch, _ := archiveOfDump(t, colls, true)
	file := filepath.Join(root, "seed.archive.gz")
	if err := os.WriteFile(file, arch, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) cliResult {
		var stdout, stderr bytes.Buffer
		env := &environment{stdout: &stdout, stderr: &stderr, progressEvery: time.Nanosecond}
		code := runMain(context.Background(), env, args)
		return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	loud := run("verify", "--dump", file)
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// The total of the unpacking is the archive file's size.
	unpacking := regexp.MustCompile(`verify: unpacking the archive: [0-9.]+ [KM]iB of ` + regexp.QuoteMeta(binaryUnits(st.Size())) + ` \(\d+%\), \d+ documents`)
	if !unpacking.MatchString(loud.stderr) || loud.code != exitFail {
		t.Errorf("no progress with the archive's size while unpacking (or not the seed's drift)\n%v", loud)
	}
	// Writing the corrected archive: its uncompressed size is the total.
	fixed := run("rebuild", "--dump", file, "--out", filepath.Join(root, "fixed.archive.gz"))
	if !regexp.MustCompile(`rebuild: writing the archive: [0-9.]+ (B|KiB|MiB) of [0-9.]+ [KM]iB \(\d+%\)`).MatchString(fixed.stderr) || fixed.code != exitOK {
		t.Errorf("no progress with a total while the archive is written\n%v", fixed)
	}
	if quiet := run("verify", "--dump", file, "--quiet"); quiet.stderr != "" || quiet.stdout != loud.stdout {
		t.Errorf("--quiet: stderr not empty, or another report\n%v", quiet)
	}
}

// TestArchiveOutFollowsSuffix: the corrected archive is compressed as its
// name says, whatever the input was: .gz is gzip, .archive is not (what
// mongorestore --archive, with or without --gzip, will be given); another
// name keeps the input's format. A change of format is said on stderr.
func TestArchiveOutFollowsSuffix(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("TMPDIR", t.TempDir())
	v, _ := driftiestVector(t)
	root := t.TempDir()
	for _, c := range []struct {
		inGzip   bool
		out      string
		wantGzip bool
	}{
		{true, "fixed.archive", false},
		{false, "fixed.archive.gz", true},
		{true, "fixed.bak", true},
		{false, "fixed.bak", false},
		{true, "fixed.gz", true},
	} {
		t.Run(fmt.Sprintf("gzip=%v to %s", c.inGzip, c.out), func(t *testing.T) {
			arch, _ := archiveOfDump(t, dumpColls(v.DB, nil), c.inGzip)
			dir := filepath.Join(root, t.Name())
			in, out := filepath.Join(dir, "in"), filepath.Join(dir, c.out)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(in, arch, 0o644); err != nil {
				t.Fatal(err)
			}
			r := runCLI(t, "rebuild", "--dump", in, "--out", out)
			if r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := readArchive(t, b); got.gzip != c.wantGzip {
				t.Errorf("%s written gzip-compressed: %v, want %v\n%v", c.out, got.gzip, c.wantGzip, r)
			}
			if said := strings.Contains(r.stderr, "compress"); said != (c.inGzip != c.wantGzip) {
				t.Errorf("the change of format said on stderr: %v, want %v\n%v", said, c.inGzip != c.wantGzip, r)
			}
			if r := runCLI(t, "verify", "--dump", out); r.code != exitOK {
				t.Errorf("verify of %s: want exit 0\n%v", c.out, r)
			}
		})
	}
}

// binaryUnits is n as progress lines print it, below 1 GiB.
func binaryUnits(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
