package main

// The offline commands as operators run them on backups, in
// containers, on mounted volumes.

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDumpPlainAndGzipBoth: a collection present as X.bson and X.bson.gz
// (a mongodump --gzip run into a directory a plain dump filled) is refused
// naming both files: reading one would write the stale one to the output.
// Both layouts: the collection files at the top, or in <database>/.
func TestDumpPlainAndGzipBoth(t *testing.T) {
	cleanConfigEnv(t)
	for _, layout := range []string{"flat", "nested"} {
		for _, coll := range []string{"user", "submission"} {
			t.Run(layout+"/"+coll, func(t *testing.T) {
				dir := cleanVectorDump(t)
				files := dir
				if layout == "nested" {
					dir = t.TempDir()
					files = filepath.Join(dir, "normal-oj")
					if err := os.Rename(cleanVectorDump(t), files); err != nil {
						t.Fatal(err)
					}
				}
				b, err := os.ReadFile(filepath.Join(files, coll+".bson"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(files, coll+".bson.gz"), gzipBytes(t, b), 0o644); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), "out")
				plain := filepath.Join(files, coll+".bson")
				for _, args := range [][]string{
					{"verify", "--dump", dir},
					{"rebuild", "--dump", dir, "--out", out},
					{"explain", "--dump", dir, "--user", "u", "--problem", "1"},
				} {
					r := runCLI(t, args...)
					if r.code != exitConfig || !strings.Contains(r.stderr, plain+" ") || !strings.Contains(r.stderr, plain+".gz") {
						t.Errorf("%q: want exit 2 naming %s and %s.gz\n%v", args, plain, plain, r)
					}
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("--out %s written: %v", out, err)
				}
			})
		}
	}
}

// TestOutKeepsExistingDirectory: a pre-created --out keeps its inode,
// mode (setgid included) and owner; a new one is made by the umask.
func TestOutKeepsExistingDirectory(t *testing.T) {
	cleanConfigEnv(t)
	in := cleanVectorDump(t)
	root := t.TempDir()
	pre := filepath.Join(root, "pre")
	if err := os.Mkdir(pre, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pre, 0o2775|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(pre, 4242, 4343); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(pre)
	if err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "rebuild", "--dump", in, "--out", pre); r.code != exitOK {
		t.Fatalf("rebuild into a pre-created --out: %v", r)
	}
	after, err := os.Stat(pre)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("--out %s was replaced by another directory", pre)
	}
	if before.Mode() != after.Mode() {
		t.Errorf("--out mode %v, was %v", after.Mode(), before.Mode())
	}
	bs, as := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if bs.Uid != as.Uid || bs.Gid != as.Gid {
		t.Errorf("--out owner %d:%d, was %d:%d", as.Uid, as.Gid, bs.Uid, bs.Gid)
	}
	if _, err := os.Stat(filepath.Join(pre, "homework.bson")); err != nil {
		t.Errorf("no homework.bson in --out: %v", err)
	}
	if ents, _ := os.ReadDir(pre); len(ents) != len(mustReadDir(t, in)) {
		t.Errorf("--out holds %d entries, the dump %d (a partial directory left?)", len(ents), len(mustReadDir(t, in)))
	}

	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	fresh := filepath.Join(root, "fresh")
	if r := runCLI(t, "rebuild", "--dump", in, "--out", fresh); r.code != exitOK {
		t.Fatalf("rebuild into a new --out: %v", r)
	}
	st, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode().Perm(), os.FileMode(0o750); got != want {
		t.Errorf("new --out mode %v, want %v (0777 less the umask 027)", got, want)
	}
	if fst, err := os.Stat(filepath.Join(fresh, "user.bson")); err != nil || fst.Mode().Perm() != 0o640 {
		t.Errorf("new --out's user.bson: %v %v, want 0640", fst.Mode(), err)
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

// TestOutInsideDumpThroughSymlink: an --out inside the dump reached
// through a symbolic link (either path) is refused before anything is
// read (exit 2), like a plain one.
func TestOutInsideDumpThroughSymlink(t *testing.T) {
	cleanConfigEnv(t)
	in := cleanVectorDump(t)
	root := t.TempDir()
	link := filepath.Join(root, "link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dump, out string }{
		{in, filepath.Join(link, "fixed")},
		{link, filepath.Join(in, "fixed")},
	} {
		r := runCLI(t, "rebuild", "--dump", c.dump, "--out", c.out)
		if r.code != exitConfig || !strings.Contains(r.stderr, "inside the input dump") {
			t.Errorf("rebuild --dump %s --out %s: want exit 2, inside the input dump\n%v", c.dump, c.out, r)
		}
		if ents := mustReadDir(t, in); len(ents) != 8 {
			t.Errorf("the dump now holds %d entries, want its 8 files", len(ents))
		}
	}
}

// TestOutOnMountPoint: --out on a mount point (docker run -v host:/out)
// is written on that filesystem and the run succeeds: run in a private
// mount namespace (unshare -m) on a tmpfs mounted at --out, with the
// binary built by the test.
func TestOutOnMountPoint(t *testing.T) {
	cleanConfigEnv(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (unshare -m and mount -t tmpfs); run as root, e.g. in a container")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1) to mount a tmpfs in a private mount namespace")
	}
	if err := exec.Command("unshare", "-m", "--propagation", "private", "true").Run(); err != nil {
		t.Skipf("unshare -m is not permitted here (%v): a container without CAP_SYS_ADMIN", err)
	}
	bin := buildBinary(t)
	in := cleanVectorDump(t)
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// The script mounts, runs, and prints the filesystem of the written
	// file and what the parent holds; the mount dies with the namespace.
	script := `set -e
mount -t tmpfs -o size=64m tmpfs "$OUT"
"$BIN" rebuild --dump "$IN" --out "$OUT" --quiet
echo "exit=$?"
stat -f -c 'fs=%T' "$OUT/homework.bson"
ls -A "$OUT" | tr '\n' ' '; echo
ls -A "$(dirname "$OUT")" | tr '\n' ' '; echo
`
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "BIN="+bin, "IN="+in, "OUT="+out)
	b, err := cmd.CombinedOutput()
	s := string(b)
	if err != nil || !strings.Contains(s, "exit=0") {
		t.Fatalf("rebuild --out on a tmpfs mount point: %v\n%s", err, s)
	}
	if !strings.Contains(s, "fs=tmpfs") {
		t.Errorf("homework.bson not on the mounted tmpfs:\n%s", s)
	}
	if strings.Contains(s, ".partial") {
		t.Errorf("a partial directory is left:\n%s", s)
	}
	// Nothing was written to the parent filesystem under the mount.
	if ents := mustReadDir(t, out); len(ents) != 0 {
		t.Errorf("the directory under the mount point holds %d entries: written to the parent filesystem", len(ents))
	}
	if ents := mustReadDir(t, filepath.Dir(out)); len(ents) != 1 {
		t.Errorf("--out's parent holds %v, want only out", ents)
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
