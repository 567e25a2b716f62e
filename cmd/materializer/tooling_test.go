package main

// The make targets and scripts an operator or a contributor runs first:
// what they say when a tool is missing.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeTestNamesSkippedTools: `make test` says, before the tests run,
// which tests will skip for want of a tool: promtool's and redis-server's
// (the Redis cache tests), with how to get each.
func TestMakeTestNamesSkippedTools(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	out, err := exec.Command("make", "-n", "-C", filepath.Join("..", ".."), "test").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n test: %v\n%s", err, out)
	}
	for _, tool := range []string{"promtool", "redis-server"} {
		notice := regexp.MustCompile(`command -v ` + tool + `[^\n]*\|\| echo "` + tool + ` not on PATH: [^"]*skip[^"]*apt-get install`)
		if !notice.Match(out) {
			t.Errorf("make test says nothing when %s is missing:\n%s", tool, out)
		}
	}
}

// TestInstallHintsSkipRecommends: every apt-get install the Makefile and
// the scripts suggest or run installs without Recommends (Debian's
// docker-compose recommends a whole container engine).
func TestInstallHintsSkipRecommends(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "Makefile"), filepath.Join(root, ".ci", "run")}
	scripts, err := filepath.Glob(filepath.Join(root, "contrib", "*", "*", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, scripts...)
	hints := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if !strings.Contains(line, "apt-get install") || strings.Contains(line, `log "apt-get install`) || strings.Contains(line, `echo "apt-get install`) {
				continue
			}
			hints++
			if !strings.Contains(line, "--no-install-recommends") {
				t.Errorf("%s:%d: apt-get install without --no-install-recommends: %s", f, n, strings.TrimSpace(line))
			}
		}
		fh.Close()
	}
	if hints < 3 {
		t.Errorf("found %d apt-get install lines, expected the Makefile's and .ci/run's", hints)
	}
}
