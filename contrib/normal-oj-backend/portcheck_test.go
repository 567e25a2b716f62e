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
// the status it reported per scope ("app.py Store.add" → "same") and per
// writer of derived data outside them ("other.py count" → "known").
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
		if len(f) >= 3 && (f[0] == "same" || f[0] == "DIFFERS" || f[0] == "gone" ||
			f[0] == "known" || f[0] == "CHANGED" || f[0] == "NEW") {
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
        z = y
        w = z
        return w

    def size(self):
        return self.limit


def helper(a):
    b = a * 2
    c = b + 1
    d = c + 1
    e = d + 1
    return e


def scale(x):
    return x * 2
`

// baseOther holds a writer of derived data the series does not change.
const baseOther = `def untouched():
    return 1


def count(user):
    user.submission += 1
`

func TestPortCheck(t *testing.T) {
	needTools(t)
	repo, patches := t.TempDir(), t.TempDir()
	origin := repo
	gitIn(t, repo, "init", "-q")
	writeFiles(t, repo, map[string]string{"app.py": baseApp, "other.py": baseOther})
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-qm", "base")
	gitIn(t, repo, "tag", "base")
	// The series: one patch per function, as the Back-End's is made.
	for _, p := range []struct{ old, new, msg string }{
		// six lines more: the next patch's line numbers are not the base's
		{"total += 1", "total += 2" + strings.Repeat("\n        # by two", 6), "add by two"},
		{"b = a * 2", "b = a * 3", "helper triples"},
		// only the def line: booked to scale, not to the module
		{"def scale(x):", "def scale(x, factor=2):", "scale takes a factor"},
		// a decorator inserted above a method: booked to that method
		{"    def size(self):", "    @property\n    def size(self):", "size is a property"},
		// the class body outside its methods
		{"limit = 3", "limit = 4", "limit four"},
	} {
		b, err := os.ReadFile(filepath.Join(repo, "app.py"))
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, repo, map[string]string{"app.py": strings.Replace(string(b), p.old, p.new, 1)})
		gitIn(t, repo, "commit", "-qam", p.msg)
	}
	gitIn(t, repo, "format-patch", "-q", "--full-index", "-o", patches, "base")
	gitIn(t, repo, "branch", "patched")
	gitIn(t, repo, "checkout", "-q", "base")
	all := func(status string) map[string]string {
		return map[string]string{"app.py Store.add": status, "app.py helper": status,
			"app.py scale": status, "app.py Store.size": status, "app.py Store": status,
			"other.py count": "known"}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}

	for _, c := range []struct {
		name   string
		from   string            // the commit the site's branch starts at
		edit   map[string]string // old → new in app.py, committed on from
		other  string            // other.py, committed on from ("": unchanged)
		base   string            // --base ("": the default)
		exit   int
		apply  string
		scopes map[string]string
	}{
		{name: "at the base", exit: 0, apply: "applies: cleanly", scopes: all("same")},
		{name: "--base HEAD", base: "HEAD", exit: 0, apply: "applies: cleanly", scopes: all("same")},
		{name: "--base a branch", base: "site", exit: 0, apply: "applies: cleanly", scopes: all("same")},
		{name: "already applied", from: "patched", exit: 4, apply: "applies: already applied",
			scopes: all("same")},
		{name: "untouched function, comment and offset", edit: map[string]string{
			"import os\n": "import os\nimport sys\n",
			// a method the series leaves alone: its class stays the same
			"y = x - 1":      "y = x - 2",
			"    return e\n": "    # five lines down\n    return e\n",
		}, exit: 0, apply: "applies: cleanly", scopes: all("same")},
		{name: "the class header changed", edit: map[string]string{"class Store:": "class Store(dict):"},
			exit: 3, apply: "applies: NO", scopes: with(all("same"), "app.py Store", "DIFFERS")},
		{name: "touched function changed within the context", edit: map[string]string{"d = c + 1": "d = c + 5"},
			exit: 1, apply: "applies: only with a 3-way merge", scopes: with(all("same"), "app.py helper", "DIFFERS")},
		{name: "the changed line changed", edit: map[string]string{"total += 1": "total += 5"},
			exit: 3, apply: "applies: NO, not even with a 3-way merge: Patch failed at 0001",
			scopes: with(all("same"), "app.py Store.add", "DIFFERS")},
		{name: "a new writer of derived data", other: baseOther + "\n\ndef bump(user, hw):\n    hw.student_status[user]['1']['score'] = 0\n",
			exit: 5, apply: "applies: cleanly", scopes: with(all("same"), "other.py bump", "NEW")},
		{name: "a known writer changed", other: strings.Replace(baseOther, "+= 1", "+= 2", 1),
			exit: 5, apply: "applies: cleanly", scopes: with(all("same"), "other.py count", "CHANGED")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			gitIn(t, dir, "clone", "-q", origin, "site")
			repo := filepath.Join(dir, "site")
			from := "base"
			if c.from != "" {
				from = "origin/" + c.from
			}
			gitIn(t, repo, "checkout", "-q", "-B", "site", from)
			if c.edit != nil {
				text := baseApp
				for o, n := range c.edit {
					text = strings.Replace(text, o, n, 1)
				}
				writeFiles(t, repo, map[string]string{"app.py": text})
				gitIn(t, repo, "commit", "-qam", c.name)
			}
			if c.other != "" {
				writeFiles(t, repo, map[string]string{"other.py": c.other})
				gitIn(t, repo, "commit", "-qam", c.name)
			}
			head := gitIn(t, repo, "rev-parse", "HEAD")
			base := "base"
			if c.base != "" {
				base = c.base
			}
			code, out, scopes := portCheck(t, "--base", base, "--patches", patches, repo)
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
// name the functions it changes; at its series' base (dfbd76a, 0a6e25c) it
// applies cleanly, every one is the same and no other writer is new.
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
	if _, base := pickSeries(t, dir); gitIn(t, dir, "rev-parse", "HEAD") == base {
		if code != 0 || strings.Contains(out, "DIFFERS") || strings.Contains(out, "gone") {
			t.Errorf("at %s: exit %d, or a function differs:\n%s", base, code, out)
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

// pickSeries returns the series series.sh picks for dir's HEAD: its
// patches and its base commit.
func pickSeries(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	out, err := exec.Command("bash", "series.sh", dir).Output()
	if err != nil {
		t.Fatalf("series.sh %s: %v", dir, err)
	}
	series, err := filepath.Glob(filepath.Join(strings.Split(string(out), "\t")[0], "*.patch"))
	if err != nil || len(series) == 0 {
		t.Fatalf("series.sh %s: no patches in %q: %v", dir, out, err)
	}
	b, err := os.ReadFile(series[0])
	if err != nil {
		t.Fatal(err)
	}
	_, base, ok := strings.Cut(string(b), "\nbase-commit: ")
	if !ok {
		t.Fatalf("%s: no base-commit line", series[0])
	}
	return series, strings.Fields(base)[0]
}

// TestSeriesAppliesAlike: on the base of the series for NOJ_BACKEND_DIR,
// git am of the series (what switch-over.md has an operator run) and git
// apply of each patch in order on a copy without git (check.sh's way for a
// plain directory) give the same tree.
func TestSeriesAppliesAlike(t *testing.T) {
	dir := os.Getenv("NOJ_BACKEND_DIR")
	if dir == "" {
		t.Skip("set NOJ_BACKEND_DIR to a Normal-OJ/Back-End checkout (git clone https://github.com/Normal-OJ/Back-End)")
	}
	needTools(t)
	series, base := pickSeries(t, dir)
	work := t.TempDir()
	am, plain := filepath.Join(work, "am"), filepath.Join(work, "plain")
	gitIn(t, work, "clone", "-q", dir, "am")
	gitIn(t, am, "checkout", "-q", base)
	gitIn(t, am, append([]string{"am", "-q"}, series...)...)
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-c", `git -C "$1" archive "$3" | tar -C "$2" -xf -`, "-", am, plain, base).CombinedOutput(); err != nil {
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

// TestSeriesPicks: series.sh picks, of two series made on a line's older
// and newer commit, the nearest base in the checkout's history, and by
// content when neither base is in it.
func TestSeriesPicks(t *testing.T) {
	needTools(t)
	repo, root := t.TempDir(), t.TempDir()
	gitIn(t, repo, "init", "-q")
	commit := func(text, msg string) string {
		writeFiles(t, repo, map[string]string{"app.py": text})
		gitIn(t, repo, "add", ".")
		gitIn(t, repo, "commit", "-qm", msg)
		return gitIn(t, repo, "rev-parse", "HEAD")
	}
	old := commit("a = 1\nb = 2\n", "old line")
	mid := commit("a = 1\nb = 2\nc = 3\n", "between")
	newer := commit("x = 1\nb = 2\nc = 3\n", "new line")
	// a series on each base: change b there
	for _, base := range []string{old, newer} {
		gitIn(t, repo, "checkout", "-q", base)
		b, err := os.ReadFile(filepath.Join(repo, "app.py"))
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, repo, map[string]string{"app.py": strings.Replace(string(b), "b = 2", "b = 3", 1)})
		gitIn(t, repo, "commit", "-qam", "the change")
		gitIn(t, repo, "format-patch", "-q", "--base", base, "-o", filepath.Join(root, base[:7]), base)
	}
	gitIn(t, repo, "checkout", "-q", newer)
	after := commit("x = 1\nb = 2\nc = 3\nd = 4\n", "after")
	// a copy of the newer line without its history
	flat := t.TempDir()
	gitIn(t, flat, "init", "-q")
	writeFiles(t, flat, map[string]string{"app.py": "x = 1\nb = 2\nc = 3\n"})
	gitIn(t, flat, "add", ".")
	gitIn(t, flat, "commit", "-qm", "imported")
	for _, c := range []struct{ name, dir, rev, want, why string }{
		{"at the old base", repo, old, old, "ancestry: 0 commits past"},
		{"between the bases", repo, mid, old, "ancestry: 1 commits past"},
		{"at the newer base", repo, newer, newer, "ancestry: 0 commits past"},
		{"past the newer base", repo, after, newer, "ancestry: 1 commits past"},
		{"no base in the history", flat, "HEAD", newer, "content: "},
	} {
		cmd := exec.Command("bash", "series.sh", c.dir, c.rev)
		cmd.Env = append(os.Environ(), "NOJ_PATCHES="+root)
		out, err := cmd.CombinedOutput()
		dir, why, _ := strings.Cut(strings.TrimSpace(string(out)), "\t")
		if err != nil || filepath.Base(dir) != c.want[:7] || !strings.HasPrefix(why, c.why) {
			t.Errorf("%s: %v %q, want series %s (%s...)", c.name, err, out, c.want[:7], c.why)
		}
	}
}
