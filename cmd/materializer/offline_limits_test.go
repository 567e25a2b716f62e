package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestOfflineHomeworkAtExactly16MiB: MongoDB takes a document of exactly
// 16 MiB and refuses one byte more, and so do verify and rebuild: a
// homework whose repair makes it exactly MaxDocumentSize bytes is written,
// one byte more fails naming it. The repair's growth is measured first on
// a smaller homework of the same shape, so the two sizes are exact. Seen
// failing with the limit checked as >= (the exact case refused).
func TestOfflineHomeworkAtExactly16MiB(t *testing.T) {
	cleanConfigEnv(t)
	root := t.TempDir()
	probeIn, probeOut := filepath.Join(root, "probe"), filepath.Join(root, "probe-out")
	const probeSize = materialize.MaxDocumentSize - 1<<20
	bigHomeworkDump(t, probeIn, probeSize)
	if r := runCLI(t, "rebuild", "--dump", probeIn, "--out", probeOut); r.code != exitOK {
		t.Fatalf("probe rebuild: %v", r)
	}
	grow := len(readBSONFile(t, filepath.Join(probeOut, "homework.bson"))[0]) - probeSize
	if grow <= 0 {
		t.Fatalf("the repair grows the homework by %d bytes: the probe drifts nowhere", grow)
	}
	sizeRE := regexp.MustCompile(`homework ([0-9a-f]{24}) would be (\d+) bytes`)
	for _, c := range []struct {
		name   string
		result int // the corrected homework's size
	}{
		{"exactly 16 MiB", materialize.MaxDocumentSize},
		{"one byte over", materialize.MaxDocumentSize + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, out := filepath.Join(root, c.name), filepath.Join(root, c.name+"-out")
			hw := bigHomeworkDump(t, in, c.result-grow)
			rv := runCLI(t, "verify", "--dump", in)
			rr := runCLI(t, "rebuild", "--dump", in, "--out", out)
			if c.result <= materialize.MaxDocumentSize {
				if rv.code != exitFail || strings.Contains(rv.stderr, "would be") || rr.code != exitOK {
					t.Fatalf("verify: want exit 1 for drift alone\n%v\nrebuild: want exit 0\n%v", rv, rr)
				}
				if n := len(readBSONFile(t, filepath.Join(out, "homework.bson"))[0]); n != c.result {
					t.Fatalf("corrected homework is %d bytes, want %d", n, c.result)
				}
				return
			}
			for _, r := range []cliResult{rv, rr} {
				m := sizeRE.FindStringSubmatch(r.stderr)
				if r.code != exitFail || m == nil || m[1] != hw.Hex() || m[2] != strconv.Itoa(c.result) {
					t.Errorf("want exit 1 naming homework %s at %d bytes\n%v", hw.Hex(), c.result, r)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("--out %s written by a failed rebuild (%v)", out, err)
			}
		})
	}
}

// TestOfflineArchiveFailedRebuildLeavesNoOutput: a rebuild of an archive
// that fails after the archive was read (here a homework over 16 MiB once
// corrected) removes the partial archive it had begun, so --out does not
// exist and nothing is left beside it. Seen
// failing with the partial archive kept when the rebuild fails after
// unpacking.
func TestOfflineArchiveFailedRebuildLeavesNoOutput(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	dir := filepath.Join(root, "dir")
	bigHomeworkDump(t, dir, materialize.MaxDocumentSize-100)
	arch, _ := archiveOfDump(t, dumpColls(readDumpDocs(t, dir), nil), false)
	archFile := filepath.Join(root, "in.archive")
	if err := os.WriteFile(archFile, arch, 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(root, "outs")
	out := filepath.Join(outDir, "fixed.archive")
	r := runCLI(t, "rebuild", "--dump", archFile, "--out", out)
	if r.code != exitFail || !strings.Contains(r.stderr, "would be") {
		t.Fatalf("want exit 1 naming the oversized homework\n%v", r)
	}
	if entries, err := os.ReadDir(outDir); err == nil && len(entries) != 0 {
		t.Errorf("the failed rebuild left %v in %s", entries, outDir)
	}
	emptyDir(t, os.Getenv("TMPDIR"), "the failed rebuild")
}
