// Package backend holds the Back-End half's tests that run without the
// Back-End: port-check.sh over a synthetic repository, and over a real
// Back-End checkout when NOJ_BACKEND_DIR names one.
package backend

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"git", "python3", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("port-check.sh needs %s", tool)
		}
	}
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// portCheck runs port-check.sh and returns its exit status, its output and
// the status it reported per scope ("app.py Store.add" → "same").
func portCheck(t *testing.T, args ...string) (int, string, map[string]string) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{"port-check.sh"}, args...)...).CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	scopes := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && (f[0] == "same" || f[0] == "DIFFERS" || f[0] == "gone") {
			scopes[f[1]+" "+f[2]] = f[0]
		}
	}
	return code, string(out), scopes
}

const baseApp = `import os


class Store:
    limit = 3

    def add(self, x):
        total = x
        total += 1
        return total

    def remove(self, x):
        y = x - 1
        return y


def helper(a):
    b = a * 2
    c = b + 1
    d = c + 1
    e = d + 1
    return e
`

func TestPortCheck(t *testing.T) {
	needTools(t)
	repo, patches := t.TempDir(), t.TempDir()
	origin := repo
	gitIn(t, repo, "init", "-q")
	writeFiles(t, repo, map[string]string{"app.py": baseApp, "other.py": "def untouched():\n    return 1\n"})
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-qm", "base")
	gitIn(t, repo, "tag", "base")
	// The series: one patch per function, as the Back-End's is made.
	for _, p := range []struct{ old, new, msg string }{
		// six lines more: the next patch's line numbers are not the base's
		{"total += 1", "total += 2" + strings.Repeat("\n        # by two", 6), "add by two"},
		{"b = a * 2", "b = a * 3", "helper triples"},
	} {
		b, err := os.ReadFile(filepath.Join(repo, "app.py"))
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, repo, map[string]string{"app.py": strings.Replace(string(b), p.old, p.new, 1)})
		gitIn(t, repo, "commit", "-qam", p.msg)
	}
	gitIn(t, repo, "format-patch", "-q", "--full-index", "-o", patches, "base")
	gitIn(t, repo, "checkout", "-q", "base")

	for _, c := range []struct {
		name   string
		edit   map[string]string // old → new in app.py, committed on base
		exit   int
		apply  string
		scopes map[string]string
	}{
		{"at the base", nil, 0, "applies: cleanly",
			map[string]string{"app.py Store.add": "same", "app.py helper": "same"}},
		{"untouched function, comment and offset", map[string]string{
			"import os\n":    "import os\nimport sys\n",
			"y = x - 1":      "y = x - 2",
			"    return e\n": "    # five lines down\n    return e\n",
		}, 0, "applies: cleanly",
			map[string]string{"app.py Store.add": "same", "app.py helper": "same"}},
		{"touched function changed within the context", map[string]string{"d = c + 1": "d = c + 5"},
			1, "applies: only with a 3-way merge",
			map[string]string{"app.py Store.add": "same", "app.py helper": "DIFFERS"}},
		{"the changed line changed", map[string]string{"total += 1": "total += 5"},
			3, "applies: NO, not even with a 3-way merge: Patch failed at 0001",
			map[string]string{"app.py Store.add": "DIFFERS", "app.py helper": "same"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			gitIn(t, dir, "clone", "-q", origin, "site")
			repo := filepath.Join(dir, "site")
			gitIn(t, repo, "checkout", "-q", "-B", "site", "base")
			if c.edit != nil {
				text := baseApp
				for o, n := range c.edit {
					text = strings.Replace(text, o, n, 1)
				}
				writeFiles(t, repo, map[string]string{"app.py": text})
				gitIn(t, repo, "commit", "-qam", c.name)
			}
			head := gitIn(t, repo, "rev-parse", "HEAD")
			code, out, scopes := portCheck(t, "--base", "base", "--patches", patches, repo)
			if code != c.exit || !strings.Contains(out, c.apply) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, c.exit, c.apply, out)
			}
			for k, v := range c.scopes {
				if scopes[k] != v {
					t.Errorf("%s: %q, want %q:\n%s", k, scopes[k], v, out)
				}
			}
			if len(scopes) != len(c.scopes) {
				t.Errorf("scopes %v, want only %v", scopes, c.scopes)
			}
			if now := gitIn(t, repo, "rev-parse", "HEAD"); now != head || gitIn(t, repo, "status", "--porcelain") != "" {
				t.Errorf("the checkout was changed: HEAD %s, status %q", now, gitIn(t, repo, "status", "--porcelain"))
			}
		})
	}
}

// TestPortCheckBackend runs port-check.sh on the Back-End checkout named by
// NOJ_BACKEND_DIR: the series must apply at least with a 3-way merge and
// name the functions it changes; at dfbd76a it applies cleanly and every
// one is the same.
func TestPortCheckBackend(t *testing.T) {
	dir := os.Getenv("NOJ_BACKEND_DIR")
	if dir == "" {
		t.Skip("set NOJ_BACKEND_DIR to a Normal-OJ/Back-End checkout (git clone https://github.com/Normal-OJ/Back-End)")
	}
	needTools(t)
	code, out, scopes := portCheck(t, dir)
	for _, f := range []string{"Submission.finish_judging", "Submission.verify_token", "Submission.submit", "Homework.update", "on_submission_complete"} {
		found := false
		for k := range scopes {
			found = found || strings.HasSuffix(k, " "+f)
		}
		if !found {
			t.Errorf("%s not reported:\n%s", f, out)
		}
	}
	if code != 0 && code != 1 {
		t.Errorf("exit %d: the series does not apply to %s:\n%s", code, dir, out)
	}
	if gitIn(t, dir, "rev-parse", "--short=7", "HEAD") == "dfbd76a" {
		if code != 0 || strings.Contains(out, "DIFFERS") || strings.Contains(out, "gone") {
			t.Errorf("at dfbd76a: exit %d, or a function differs:\n%s", code, out)
		}
	}
	t.Logf("\n%s", out)
}

// TestSwitchOverSteps runs the Back-End steps of docs/switch-over.md's
// "Order of steps" (port-check, git apply --check, the branch and git am -3)
// on a clone of NOJ_BACKEND_DIR; check.sh runs only its first step there
// (PYTHON=/bin/false stops it before the Back-End's suite), which must
// find the series on the branch and take --baseline.
func TestSwitchOverSteps(t *testing.T) {
	dir := os.Getenv("NOJ_BACKEND_DIR")
	if dir == "" {
		t.Skip("set NOJ_BACKEND_DIR to a Normal-OJ/Back-End checkout (git clone https://github.com/Normal-OJ/Back-End)")
	}
	needTools(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "switch-over.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, steps, ok := strings.Cut(string(doc), "## Order of steps")
	if !ok {
		t.Fatal("docs/switch-over.md: no Order of steps")
	}
	steps, _, _ = strings.Cut(steps, "\n## ")
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	gitIn(t, work, "clone", "-q", dir, "Back-End")
	script := []string{"cd " + work, "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t"}
	ran := 0
	parts := strings.Split(steps, "```sh\n")
	for i, block := range parts[1:] {
		if strings.Contains(parts[i][strings.LastIndex(strings.TrimRight(parts[i], " \n"), "\n")+1:], "<!-- procedure:") {
			continue // a step of the compose stack, run by cmd/materializer's TestNOJProcedures
		}
		block, _, _ = strings.Cut(block, "```")
		for _, line := range strings.Split(block, "\n") {
			cmd, _, _ := strings.Cut(strings.TrimSpace(line), "#")
			cmd = strings.TrimSpace(cmd)
			switch {
			case cmd == "":
				continue
			case strings.HasPrefix(cmd, "P="):
				cmd = "P=" + here
			case strings.HasPrefix(cmd, "$P/port-check.sh"):
				cmd += " || [ $? = 1 ]" // a checkout past dfbd76a may need the 3-way merge
			case strings.HasPrefix(cmd, "$P/check.sh"):
				cmd = "PYTHON=/bin/false " + cmd + " 2>&1 | tee /dev/stderr | grep -q 'holds the series; baseline: [0-9a-f]\\{40\\}'"
			}
			script = append(script, cmd+` || { echo "FAILED: `+strings.ReplaceAll(cmd, `"`, `'`)+`"; exit 1; }`)
			ran++
		}
	}
	if ran < 6 {
		t.Fatalf("%d commands in the Order of steps' sh blocks, want port-check, git apply --check, the branch, git am, check.sh", ran)
	}
	out, err := exec.Command("bash", "-c", strings.Join(script, "\n")).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\n--- script:\n%s", err, out, strings.Join(script, "\n"))
	}
	if got := gitIn(t, filepath.Join(work, "Back-End"), "log", "--format=%s", "-6"); !strings.Contains(got, "DERIVED_DATA_OWNER") {
		t.Errorf("the branch does not hold the series:\n%s", got)
	}
}

// TestSeriesAppliesAlike: on NOJ_BACKEND_DIR's dfbd76a, git am of the
// series (what switch-over.md has an operator run) and git apply of each
// patch in order on a copy without git (check.sh's way for a plain
// directory) give the same tree.
func TestSeriesAppliesAlike(t *testing.T) {
	dir := os.Getenv("NOJ_BACKEND_DIR")
	if dir == "" {
		t.Skip("set NOJ_BACKEND_DIR to a Normal-OJ/Back-End checkout (git clone https://github.com/Normal-OJ/Back-End)")
	}
	needTools(t)
	series, err := filepath.Glob(filepath.Join(mustAbs(t, "patches"), "*.patch"))
	if err != nil || len(series) == 0 {
		t.Fatalf("no patches/*.patch: %v", err)
	}
	work := t.TempDir()
	am, plain := filepath.Join(work, "am"), filepath.Join(work, "plain")
	gitIn(t, work, "clone", "-q", dir, "am")
	gitIn(t, am, "checkout", "-q", "dfbd76a")
	gitIn(t, am, append([]string{"am", "-q"}, series...)...)
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-c", `git -C "$1" archive dfbd76a | tar -C "$2" -xf -`, "-", am, plain).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, p := range series {
		gitIn(t, plain, "apply", p)
	}
	gitIn(t, plain, "init", "-q")
	gitIn(t, plain, "add", "-A")
	if a, p := gitIn(t, am, "rev-parse", "HEAD^{tree}"), gitIn(t, plain, "write-tree"); a != p {
		t.Errorf("git am gives tree %s, git apply in order %s", a, p)
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
