package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOfflineBrokenPipeRemovesUnpackedArchive: a one-shot command whose
// standard output is a pipe nobody reads any more (verify ARCHIVE |
// head, head gone) gets EPIPE on its writes instead of dying by SIGPIPE,
// so it still removes the archive it unpacked under $TMPDIR, and exits
// with its own status. Seen failing: killed by SIGPIPE (exit -1), the
// materializer-archive-* directory left in $TMPDIR.
func TestOfflineBrokenPipeRemovesUnpackedArchive(t *testing.T) {
	cleanConfigEnv(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	archive := filepath.Join(t.TempDir(), "in.archive.gz")
	if r := runCLI(t, "seed", "--users", "5", "--problems", "3", "--homeworks", "2", "--submissions", "40", "--archive", archive); r.code != exitOK {
		t.Fatalf("seed --archive\n%v", r)
	}
	for _, c := range []struct {
		name string
		args func(dir string) []string
		want int
	}{
		{"verify", func(string) []string { return []string{"verify", "--dump", archive} }, exitFail}, // the seed's stale values
		{"rebuild to an archive", func(dir string) []string {
			return []string{"rebuild", "--dump", archive, "--out", filepath.Join(dir, "fixed.archive.gz")}
		}, exitOK},
		{"explain", func(string) []string {
			return []string{"explain", "--dump", archive, "--user", "student0000", "--problem", "1"}
		}, -2}, // any status of its own: the user may not exist
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp, dir := t.TempDir(), t.TempDir()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close() // the reader is gone before the first write
			cmd := exec.Command(bin, c.args(dir)...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			cmd.Stdout = w
			var stderr syncBuffer
			cmd.Stderr = &stderr
			err = cmd.Run()
			w.Close()
			code := cmd.ProcessState.ExitCode()
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left %s in $TMPDIR (exit %d, %v)\n%s", left[0].Name(), code, err, stderr.String())
			}
			if code < 0 || (c.want != -2 && code != c.want) {
				t.Errorf("exit %d (%v), want %d\n%s", code, err, c.want, stderr.String())
			}
			if strings.HasPrefix(c.name, "rebuild") {
				out := filepath.Join(dir, "fixed.archive.gz")
				if rr := runCLI(t, "verify", "--dump", out); rr.code != exitOK {
					t.Errorf("verify of the corrected archive: want exit 0\n%v", rr)
				}
			}
		})
	}
}
