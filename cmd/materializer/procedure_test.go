package main

// The operator's procedures for Normal-OJ's stack (docs/install.md,
// docs/switch-over.md, docs/recovery.md), run as pasted into a shell, in
// a copy of the site (the fixtures of contrib/normal-oj-backend/compose/
// testdata), against the Docker CLI of composeshim_test.go.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docScript returns the shell block following marker in a Markdown file
// as written.
func docScript(t *testing.T, path, marker string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("%s: no %q", path, marker)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatalf("%s: no sh block after %q", path, marker)
	}
	end := strings.Index(s[start+6:], "```")
	if end < 0 {
		t.Fatalf("%s: no sh block after %q", path, marker)
	}
	return s[start+6 : start+6+end]
}

// docBlock returns the shell block following marker in a Markdown file,
// its continuation lines joined.
func docBlock(t *testing.T, path, marker string) []string {
	t.Helper()
	var lines []string
	cur := ""
	for _, l := range strings.Split(docScript(t, path, marker), "\n") {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		if l = cur + l; strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
		cur = ""
	}
	return lines
}

// shellWords splits a command line as sh would for these lines: single
// and double quotes, a trailing # comment (returned apart).
func shellWords(line string) (words []string, comment string) {
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '#' && !in:
			return words, strings.TrimSpace(line[i+1:])
		case c == ' ' || c == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, ""
}

// restoreStep names what one line of a restore procedure does to the
// services that write to the database: stop or start (with the compose
// services named), the mongorestore --drop, or the online rebuild.
func restoreStep(line string) (action string, services []string) {
	words, _ := shellWords(line)
	if len(words) > 2 && words[0] == "docker" && words[1] == "compose" {
		words = words[2:]
		for len(words) > 0 && strings.HasPrefix(words[0], "-") { // -f FILE, -p NAME
			words = words[min(2, len(words)):]
		}
		if len(words) == 0 {
			return "", nil
		}
		verb, rest := words[0], words[1:]
		var names []string
		for _, w := range rest {
			if !strings.HasPrefix(w, "-") {
				names = append(names, w)
			}
		}
		switch verb {
		case "stop", "down":
			return "stop", names
		case "start", "up", "restart":
			return "start", names
		case "run", "exec":
			words = rest
		}
	}
	online, rebuild := false, false
	for _, w := range words {
		switch w {
		case "mongorestore":
			if strings.Contains(line, "--drop") {
				return "mongorestore", nil
			}
		case "materializer":
			online = true
		case "rebuild":
			rebuild = online
		case "--dump":
			return "", nil
		}
	}
	if rebuild {
		return "rebuild", nil
	}
	return "", nil
}

// TestRestoreProcedureOrder: in both restore procedures of
// docs/recovery.md, the Back-End's web processes, the judging path (the
// sandbox service) and the daemon are stopped before mongorestore --drop
// (a submission or result landing while collections are dropped and
// reloaded is lost), and started only after the online rebuild has
// recorded a fresh start position.
func TestRestoreProcedureOrder(t *testing.T) {
	for _, c := range []struct{ name, marker string }{
		{"directory", "<!-- procedure: restore from a directory"},
		{"archive", "<!-- procedure: restore from an archive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := docBlock(t, filepath.Join("..", "..", "docs", "recovery.md"), c.marker)
			stopped, started := map[string]int{}, map[string]int{} // service → first stop, last start
			restore, rebuild := -1, -1
			for i, line := range lines {
				action, services := restoreStep(line)
				for _, s := range services {
					if _, ok := stopped[s]; action == "stop" && !ok {
						stopped[s] = i
					} else if action == "start" {
						started[s] = i
					}
				}
				switch {
				case action == "mongorestore" && restore < 0:
					restore = i
				case action == "rebuild" && restore >= 0 && rebuild < 0:
					rebuild = i
				}
			}
			if restore < 0 || rebuild < 0 {
				t.Fatalf("no mongorestore --drop followed by an online materializer rebuild in:\n%s", strings.Join(lines, "\n"))
			}
			for _, s := range []string{"web", "sandbox", "materializer"} {
				if i, ok := stopped[s]; !ok || i > restore {
					t.Errorf("%s is not stopped before mongorestore --drop", s)
				}
				if i, ok := started[s]; !ok || i < rebuild {
					t.Errorf("%s is not started after the online rebuild", s)
				}
			}
		})
	}
}

func TestRestoreStep(t *testing.T) {
	for _, c := range []struct {
		line, action string
		services     []string
	}{
		{"docker compose stop web sandbox materializer", "stop", []string{"web", "sandbox", "materializer"}},
		{"docker compose -f a.yml start materializer  # later", "start", []string{"materializer"}},
		{"docker compose up -d web", "start", []string{"web"}},
		{"docker compose exec mongo mongorestore --gzip --drop /data/db/x", "mongorestore", nil},
		{"mongorestore --uri \"$URI\" --archive=x", "", nil},
		{"docker compose run --rm materializer rebuild", "rebuild", nil},
		{"materializer rebuild", "rebuild", nil},
		{"materializer rebuild --dump b --out f", "", nil},
		{"docker run --rm noj-materializer:1 rebuild --dump /dump --out /out", "", nil},
		{"# stop the daemon, then:", "", nil},
	} {
		action, services := restoreStep(c.line)
		if action != c.action || strings.Join(services, " ") != strings.Join(c.services, " ") {
			t.Errorf("restoreStep(%q) = %q %v, want %q %v", c.line, action, services, c.action, c.services)
		}
	}
}

// composeCommand is the real compose command the shim renders with.
func composeCommand(t *testing.T) []string {
	t.Helper()
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "compose", "version").Run() == nil {
		return []string{p, "compose"}
	}
	t.Skip("the procedure tests render with docker-compose (apt-get install --no-install-recommends docker-compose) or the docker compose plugin")
	return nil
}

// nojSite is a copy of Normal-OJ's stack directory whose docker and
// docker-compose are the shim.
type nojSite struct {
	dir, state string
	env        []string
	writes     map[string]bool // top-level entries of ./MongoDB a container wrote
}

const nojFixtures = "../../contrib/normal-oj-backend/compose/testdata"

// newNOJSite copies the fixtures; dry: the shim records and never renders.
func newNOJSite(t *testing.T, dry bool) *nojSite {
	t.Helper()
	real := []string{"none"}
	if !dry {
		real = composeCommand(t)
	}
	s := &nojSite{dir: filepath.Join(t.TempDir(), "Normal-OJ"), state: t.TempDir(), writes: map[string]bool{}}
	if err := os.CopyFS(s.dir, os.DirFS(nojFixtures)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(s.dir, "deploy.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.dir, "MongoDB"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"docker", "docker-compose"} {
		if err := os.Symlink(exe, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	contrib, err := filepath.Abs("../../contrib/normal-oj-backend")
	if err != nil {
		t.Fatal(err)
	}
	realJSON, _ := json.Marshal(real)
	// The site's commands read only the configuration the compose files
	// give them, as cleanConfigEnv would leave them (without its
	// t.Setenv, so that the sites can be built by parallel tests).
	config := make(map[string]bool)
	for _, k := range configVarSuffixes() {
		config["MATERIALIZER_"+k], config[k] = true, true
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case config[k], strings.HasPrefix(k, "COMPOSE_"), strings.HasPrefix(k, "NOJ_"), strings.HasPrefix(k, "DOCKER_"), k == "P", k == "NEXT":
		case k == "PATH":
			s.env = append(s.env, "PATH="+bin+string(os.PathListSeparator)+v)
		default:
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env, shimStateEnv+"="+s.state, shimComposeEnv+"="+string(realJSON), "P="+contrib)
	if dry {
		s.env = append(s.env, shimDryEnv+"=1")
	}
	return s
}

// run runs a script as an operator pasting it into bash in the stack's
// directory, and returns its exit status, what the shim logged and the output.
func (s *nojSite) run(t *testing.T, script string, env ...string) (int, []shimEntry, string) {
	t.Helper()
	logPath := filepath.Join(s.state, "log.jsonl")
	if err := os.Remove(logPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	// NOJ_SHIM_FAIL_AT counts this script's docker commands.
	statePath := filepath.Join(s.state, "state.json")
	if b, err := os.ReadFile(statePath); err == nil {
		var st shimState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		st.Commands = 0
		if b, err = json.Marshal(st); err != nil || os.WriteFile(statePath, b, 0o644) != nil {
			t.Fatal("resetting the shim's command count", err)
		}
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = s.dir, append(slices.Clone(s.env), env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var log []shimEntry
	if f, err := os.Open(logPath); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e shimEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			log = append(log, e)
			if e.Kind == "write" {
				if rel, err := filepath.Rel(filepath.Join(s.dir, "MongoDB"), e.Words[0]); err == nil && !strings.HasPrefix(rel, "..") {
					s.writes[strings.Split(rel, string(filepath.Separator))[0]] = true
				}
			}
		}
		f.Close()
	}
	return code, log, string(out)
}

func (s *nojSite) containers(t *testing.T) map[string]*shimContainer {
	t.Helper()
	var st shimState
	b, err := os.ReadFile(filepath.Join(s.state, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Containers
}

var composeImage = regexp.MustCompile(`(?m)^  mongo:\n    image: (\S+)`)

// mongoImage is the image the site's docker-compose.yml gives mongo.
func (s *nojSite) mongoImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	m := composeImage.FindSubmatch(b)
	if m == nil {
		t.Fatal("the site's docker-compose.yml names no mongo image")
	}
	return string(m[1])
}

// check: what every procedure must keep, after each block.
func (s *nojSite) check(t *testing.T, name string, log []shimEntry) {
	t.Helper()
	image := s.mongoImage(t)
	for _, e := range log {
		switch {
		case e.Kind == "restore" && len(e.Words) > 0:
			t.Errorf("%s: mongorestore ran with %v running", name, e.Words)
		case e.Kind == "recreate" && e.Words[0] == "mongo" && e.Words[1] != image:
			t.Errorf("%s: mongo recreated on %s; the site's docker-compose.yml says %s", name, e.Words[1], image)
		case e.Kind == "orphan":
			t.Errorf("%s: %v %s", name, e.Words, e.Note)
		}
	}
	if m := s.containers(t)["mongo"]; m != nil && m.Service["image"] != image {
		t.Errorf("%s: mongo's container is on %v; the site's docker-compose.yml says %s", name, m.Service["image"], image)
	}
	ents, err := os.ReadDir(filepath.Join(s.dir, "MongoDB"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !s.writes[e.Name()] {
			t.Errorf("%s: MongoDB/%s written from the host: mongo owns ./MongoDB (uid 999), an operator cannot write there", name, e.Name())
		}
	}
}

// nojProcedure names a documented block: its page and marker, and the
// containers it recreates in TestNOJProcedures' order (what its comments
// say; all: every service).
type nojProcedure struct {
	name, doc string
	env       []string
	recreates string
}

func (p nojProcedure) script(t *testing.T) string {
	t.Helper()
	if p.doc == "" {
		return "./deploy.sh" // the site's routine deploy
	}
	return docScript(t, filepath.Join("..", "..", "docs", p.doc), "<!-- procedure: "+p.name)
}

// nojProcedures: the life of a site, from the stock stack to a rollback.
var nojProcedures = []nojProcedure{
	{name: "install the overlay", doc: "install.md"},
	{name: "upgrade mongo", doc: "install.md", env: []string{"NEXT=4.4"}, recreates: "mongo web"}, // web: the overlay's settings
	{name: "upgrade mongo", doc: "install.md", env: []string{"NEXT=5.0"}, recreates: "mongo"},
	{name: "upgrade mongo", doc: "install.md", env: []string{"NEXT=6.0"}, recreates: "mongo"},
	{name: "upgrade mongo", doc: "install.md", env: []string{"NEXT=7.0"}, recreates: "mongo"},
	{name: "switch-over: web", doc: "switch-over.md", recreates: "web"},
	{name: "switch-over: start the daemon", doc: "switch-over.md", recreates: "materializer"},
	{name: "switch-over: flip", doc: "switch-over.md", recreates: "web"},
	{name: "deploy.sh", recreates: "all"},
	{name: "restore from a directory", doc: "recovery.md"},
	{name: "restore from an archive", doc: "recovery.md"},
	{name: "rollback: flip back", doc: "switch-over.md", recreates: "web"},
	{name: "rollback: stop the daemon", doc: "switch-over.md"},
}

// TestNOJProcedures runs every documented block for Normal-OJ's stack in
// a site's order, from the stock stack deployed by its own deploy.sh:
// each ends with exit 0; every command finds its services in the file
// set it reads; mongo is only ever (re)created on the site's image;
// mongorestore runs only once web, sandbox and the daemon were stopped by
// a command that succeeded; the site's deploy.sh keeps the install.
func TestNOJProcedures(t *testing.T) {
	t.Parallel() // a site of its own; most time is in subprocesses
	s := newNOJSite(t, false)
	if code, log, out := s.run(t, "./deploy.sh"); code != 0 {
		t.Fatalf("the stock deploy.sh: exit %d\n%s\n%v", code, out, log)
	}
	for _, p := range nojProcedures {
		code, log, out := s.run(t, p.script(t), p.env...)
		if code != 0 {
			t.Fatalf("%s %v: exit %d\n%s", p.name, p.env, code, out)
		}
		s.check(t, p.name, log)
		c := s.containers(t)
		var recreated []string
		for _, e := range log {
			if e.Kind == "recreate" {
				recreated = append(recreated, e.Words[0])
			}
		}
		slices.Sort(recreated)
		want := p.recreates
		if want == "all" {
			want = strings.Join(slices.Sorted(maps.Keys(c)), " ")
		}
		if got := strings.Join(recreated, " "); got != want {
			t.Errorf("%s %v recreated %q, want %q", p.name, p.env, got, want)
		}
		switch p.name {
		case "restore from a directory", "restore from an archive":
			restored, redis, started := -1, -1, -1
			for i, e := range log {
				switch {
				case e.Kind == "restore":
					restored = i
				case e.Kind == "exec" && e.Words[0] == "redis" && strings.Contains(strings.Join(e.Words, " "), "PROBLEM_*_HIGH_SCORE"):
					redis = i
				case e.Kind == "start" && e.Words[0] == "web":
					started = i
				}
			}
			if restored < 0 || redis < restored || started < redis {
				t.Errorf("%s: want mongorestore, then Redis's cached high scores deleted in the redis container, then web started; log positions %d, %d, %d", p.name, restored, redis, started)
			}
			s.checkRepaired(t, p.name)
		case "deploy.sh":
			if w := c["web"]; w == nil || !strings.Contains(envOf(w.Service)["MONGO_HOST"], "replicaSet=rs0") || envOf(w.Service)["DERIVED_DATA_OWNER"] != "materializer" {
				t.Errorf("deploy.sh: web is not on the replica set in materializer mode: %v", w)
			}
			if m := c["mongo"]; m == nil || !strings.Contains(dumpJSON(m.Service["command"]), "--replSet") || m.Service["image"] != "mongo:7.0" {
				t.Errorf("deploy.sh: mongo is not mongo:7.0 with --replSet: %v", m)
			}
			if m := c["materializer"]; m == nil || !m.Running {
				t.Error("deploy.sh: the daemon does not run")
			}
		case "rollback: stop the daemon":
			if w := c["web"]; w == nil || !w.Running || envOf(w.Service)["DERIVED_DATA_OWNER"] != "backend" {
				t.Errorf("rollback: web is not running in Back-End mode: %v", w)
			}
			if m := c["materializer"]; m != nil && m.Running {
				t.Error("rollback: the daemon still runs")
			}
		}
	}
	if got := s.mongoImage(t); got != "mongo:7.0" {
		t.Errorf("after the upgrades the site's docker-compose.yml says %s, want mongo:7.0", got)
	}
}

// checkRepaired: the repaired dump a restore block wrote is compressed
// as its backup (mongorestore --gzip reads it).
func (s *nojSite) checkRepaired(t *testing.T, name string) {
	t.Helper()
	if name == "restore from an archive" {
		b, err := os.ReadFile(filepath.Join(s.dir, "fixed.archive.gz"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !readArchive(t, b).gzip {
			t.Errorf("%s: the repaired archive of a gzipped one is not gzipped", name)
		}
		return
	}
	files, _ := filepath.Glob(filepath.Join(s.dir, "MongoDB", "fixed-*", "normal-oj", "*"))
	if len(files) == 0 {
		t.Fatalf("%s: no repaired dump in MongoDB/fixed-*/normal-oj", name)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".gz") {
			t.Errorf("%s: %s in the repaired dump is not gzipped like the backup", name, filepath.Base(f))
		}
	}
}

// envOf is a rendered service's environment (a map, or KEY=VALUE lines).
func envOf(svc map[string]any) map[string]string {
	env := map[string]string{}
	switch e := svc["environment"].(type) {
	case map[string]any:
		for k, v := range e {
			env[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			env[k] = v
		}
	}
	return env
}

func dumpJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestNOJRestoreNeedsTheInstall: in a stack without the install's .env a
// bare docker compose reads the development set (no materializer): a
// restore block stops at its first failing command, and mongorestore
// never runs.
func TestNOJRestoreNeedsTheInstall(t *testing.T) {
	t.Parallel() // a site of its own; most time is in subprocesses
	for _, name := range []string{"restore from a directory", "restore from an archive"} {
		t.Run(name, func(t *testing.T) {
			s := newNOJSite(t, false)
			if code, _, out := s.run(t, "./deploy.sh"); code != 0 {
				t.Fatalf("the stock deploy.sh: exit %d\n%s", code, out)
			}
			code, log, out := s.run(t, nojProcedure{name: name, doc: "recovery.md"}.script(t))
			if code == 0 {
				t.Errorf("exit 0 without the install\n%s", out)
			}
			for _, e := range log {
				if e.Kind == "restore" {
					t.Errorf("mongorestore ran (with %v running)\n%s", e.Words, out)
				}
			}
		})
	}
}

// TestNOJProceduresStopAtFirstFailure: each documented block, pasted into
// a shell after the blocks before it, stops at whichever docker command
// fails first (set -e or &&).
func TestNOJProceduresStopAtFirstFailure(t *testing.T) {
	seen := map[string]bool{}
	for i, p := range nojProcedures {
		if seen[p.name] || p.doc == "" { // deploy.sh is the site's
			continue
		}
		seen[p.name] = true
		t.Run(p.name, func(t *testing.T) {
			t.Parallel() // each on a site of its own; most time is in subprocesses
			// site: a dry site after the blocks before this one.
			site := func() *nojSite {
				s := newNOJSite(t, true)
				for _, q := range nojProcedures[:i] {
					if code, _, out := s.run(t, q.script(t), q.env...); code != 0 {
						t.Fatalf("%s: exit %d\n%s", q.name, code, out)
					}
				}
				return s
			}
			script := p.script(t)
			code, log, out := site().run(t, script, p.env...)
			if code != 0 {
				t.Fatalf("exit %d with no command failing\n%s", code, out)
			}
			n := countKind(log, "cmd")
			if n == 0 {
				t.Fatal("no docker command")
			}
			for k := 1; k <= n; k++ {
				code, log, out := site().run(t, script, append(slices.Clone(p.env), shimFailAtEnv+"="+strconv.Itoa(k))...)
				if code == 0 || countKind(log, "cmd") != k {
					t.Errorf("docker command %d of %d failing: exit %d after %d commands, want non-zero after %d\n%s", k, n, code, countKind(log, "cmd"), k, out)
				}
			}
		})
	}
}

func countKind(log []shimEntry, kind string) int {
	n := 0
	for _, e := range log {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// TestNOJInstallStopsWithoutTheOverlay: an install pasted with P naming no
// checkout stops at the failing copy and leaves the stack's files as they
// were (a .env naming a missing overlay would break every docker compose
// there, deploy.sh's too).
func TestNOJInstallStopsWithoutTheOverlay(t *testing.T) {
	s := newNOJSite(t, true)
	deploy, err := os.ReadFile(filepath.Join(s.dir, "deploy.sh"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, out := s.run(t, nojProcedures[0].script(t), "P="+filepath.Join(t.TempDir(), "absent"))
	if code == 0 {
		t.Errorf("exit 0 without the overlay\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(s.dir, ".env")); err == nil {
		t.Error("the install wrote .env without the overlay")
	}
	if now, _ := os.ReadFile(filepath.Join(s.dir, "deploy.sh")); string(now) != string(deploy) {
		t.Error("the install changed deploy.sh without the overlay")
	}
}
