package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/normal-oj/noj-materializer/dump"
)

// TestOfflineRefusesKilledRunsPartial: a run killed outright (a second
// signal, as timeout sends) leaves its hidden partial output beside an
// absent --out; the next run to that --out refuses, naming it, and
// deletes nothing (it may be a run writing there now).
func TestOfflineRefusesKilledRunsPartial(t *testing.T) {
	cleanConfigEnv(t)
	in := cleanVectorDump(t)
	archive := filepath.Join(t.TempDir(), "in.archive")
	if r := runCLI(t, "seed", "--users", "3", "--problems", "2", "--homeworks", "1", "--submissions", "5", "--archive", archive); r.code != exitOK {
		t.Fatalf("seed --archive\n%v", r)
	}
	for _, c := range []struct {
		name  string
		leave func(out string) // what the killed run left
		args  func(out string) []string
	}{
		{"rebuild directory", leaveOutput, func(out string) []string { return []string{"rebuild", "--dump", in, "--out", out} }},
		{"rebuild archive", leaveArchiveFile, func(out string) []string { return []string{"rebuild", "--dump", archive, "--out", out} }},
		{"seed directory", leaveOutput, func(out string) []string { return []string{"seed", "--out", out} }},
		{"seed archive", leaveArchiveFile, func(out string) []string { return []string{"seed", "--archive", out} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "fixed")
			if strings.Contains(c.name, "archive") {
				out += ".archive"
			}
			c.leave(out)
			left := treeOf(t, parent)
			r := runCLI(t, c.args(out)...)
			if r.code != exitConfig || !strings.Contains(r.stderr, ".partial-") {
				t.Fatalf("with a killed run's partial output beside %s: want exit 2 naming it\n%v", out, r)
			}
			if got := treeOf(t, parent); !mapsEqual(got, left) {
				t.Errorf("the refused run changed %s: %v, was %v", parent, sortedKeys(got), sortedKeys(left))
			}
		})
	}
}

// leaveOutput leaves what a run killed while writing the dump directory
// out leaves: its partial directory, with a file in it.
func leaveOutput(out string) {
	o, err := dump.CreateOutput(out)
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir(), "user.bson"), []byte("partial"), 0o644); err != nil {
		panic(err)
	}
}

// leaveArchiveFile leaves what a run killed while writing the archive
// out leaves: its partial file.
func leaveArchiveFile(out string) {
	af, err := dump.CreateArchiveFile(out)
	if err != nil {
		panic(err)
	}
	if _, err := af.Write([]byte("partial")); err != nil {
		panic(err)
	}
}

// TestOfflineRefusesCorruptMetadata: a collection's metadata that
// mongorestore could not read (cut short, not JSON, an index without a
// key) is refused before anything is read or written, naming the file:
// verify does not call such a dump clean, and rebuild does not copy it
// into a "restorable" corrected copy. Seen failing: verify exit 0,
// rebuild exit 0 with the file copied.
func TestOfflineRefusesCorruptMetadata(t *testing.T) {
	cleanConfigEnv(t)
	for _, c := range []struct {
		name, file string
		text       []byte
	}{
		{"source collection cut short", "user.metadata.json", []byte(`{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$num`)},
		{"another collection overwritten", "course.metadata.json", []byte("\x00\x00\x00\x00garbage")},
		{"index without a key", "homework.metadata.json", []byte(`{"indexes":[{"v":{"$numberInt":"2"},"name":"_id_"}],"collectionName":"homework"}`)},
		{"gzipped, not JSON", "problem.metadata.json.gz", gzipBytes(t, []byte("not json"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := t.TempDir()
			writeDump(t, in, applyExpected(t, readVectors(t)[0]), otherCollections())
			if strings.HasSuffix(c.file, ".gz") {
				os.Remove(filepath.Join(in, strings.TrimSuffix(c.file, ".gz")))
			}
			if err := os.WriteFile(filepath.Join(in, c.file), c.text, 0o644); err != nil {
				t.Fatal(err)
			}
			r := runCLI(t, "verify", "--dump", in)
			if r.code != exitConfig || !strings.Contains(r.stderr, c.file) || !strings.Contains(r.stderr, "mongorestore would fail") {
				t.Errorf("verify --dump: want exit 2 naming %s\n%v", c.file, r)
			}
			out := filepath.Join(t.TempDir(), "fixed")
			r = runCLI(t, "rebuild", "--dump", in, "--out", out)
			if r.code != exitConfig || !strings.Contains(r.stderr, c.file) {
				t.Errorf("rebuild --dump --out: want exit 2 naming %s\n%v", c.file, r)
			}
			if left, _ := os.ReadDir(filepath.Dir(out)); len(left) > 0 {
				t.Errorf("the refused rebuild left %s", left[0].Name())
			}
		})
	}
}

// TestOfflineRefusesNonRegularFiles: a named pipe or a socket where a
// dump file belongs is refused up front, naming it, by every command
// reading the dump (a named pipe blocked the open past SIGTERM); a
// symbolic link to a regular file is still read. Seen failing: verify
// opened the named pipe (here given a writer that closes at once, so the
// old code ends instead of hanging: exit 1, an empty submission file).
func TestOfflineRefusesNonRegularFiles(t *testing.T) {
	cleanConfigEnv(t)
	for _, c := range []struct {
		name, file string
		make       func(t *testing.T, path string)
		args       func(in string) [][]string
	}{
		{"named pipe as submission.bson", "submission.bson", mkfifo, allOffline},
		{"named pipe as another collection", "course.bson", mkfifo, func(in string) [][]string {
			return [][]string{{"verify", "--dump", in}, {"rebuild", "--dump", in, "--out", in + "-fixed"}}
		}},
		{"socket as problem.bson", "problem.bson", mksocket, allOffline},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "dump")
			writeDump(t, in, applyExpected(t, readVectors(t)[0]), otherCollections())
			p := filepath.Join(in, c.file)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			c.make(t, p)
			for _, args := range c.args(in) {
				r := runCLI(t, args...)
				if r.code != exitConfig || !strings.Contains(r.stderr, c.file) || !strings.Contains(r.stderr, "not a regular file") {
					t.Errorf("%v: want exit 2 naming %s, not a regular file\n%v", args, c.file, r)
				}
			}
			if _, err := os.Stat(in + "-fixed"); err == nil {
				t.Errorf("the refused rebuild wrote %s-fixed", in)
			}
		})
	}
	t.Run("symbolic link to a regular file", func(t *testing.T) {
		in := filepath.Join(t.TempDir(), "dump")
		writeDump(t, in, applyExpected(t, readVectors(t)[0]), nil)
		p := filepath.Join(in, "submission.bson")
		if err := os.Rename(p, p+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("submission.bson.real", p); err != nil {
			t.Fatal(err)
		}
		if r := runCLI(t, "verify", "--dump", in); r.code != exitOK {
			t.Errorf("verify --dump through a symbolic link: want exit 0\n%v", r)
		}
	})
}

// allOffline are the offline commands reading dump in.
func allOffline(in string) [][]string {
	return [][]string{{"verify", "--dump", in}, {"rebuild", "--dump", in, "--out", in + "-fixed"},
		{"explain", "--dump", in, "--user", "user00", "--problem", "1"}}
}

// mkfifo makes a named pipe at path. Should a command open it for
// reading, a writer opens it too and closes at once, so that the command
// reads an empty file rather than hang the test; at cleanup a reader
// releases a writer no command met.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return // removed with the test's directory
			}
			f.Close()
		}
	}()
	t.Cleanup(func() {
		// A reader lets the writer's open through; once the pipe is
		// removed its next open fails and it returns.
		r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		os.Remove(path)
		<-done
		if err == nil {
			r.Close()
		}
	})
}

// mksocket makes a listening Unix socket at path.
func mksocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	t.Cleanup(func() { l.Close() })
}
