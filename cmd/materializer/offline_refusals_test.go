package main

import (
	"os"
	"path/filepath"
	"strings"
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
