package main

// The Docker CLI as the procedure tests see it: the test binary, run as
// `docker` or `docker-compose` (symbolic links first in PATH), plays a
// Normal-OJ site's containers. Every compose command renders its file set
// with the real `docker-compose config` (so which files a command reads is
// the real tool's answer), fails as compose would on a service the set
// lacks or a container that is not running, and keeps the containers'
// state between commands: running or not, and the rendered service each
// was created from (`up` recreates what changed). Container commands that
// matter run for real: mongodump writes a seeded dump, the materializer's
// offline commands run in process on the mapped directories; mongorestore
// is recorded with the writers still running, if any.

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The shim's environment, set by the procedure tests.
const (
	shimStateEnv   = "NOJ_SHIM_STATE"   // directory of state.json and log.jsonl
	shimComposeEnv = "NOJ_SHIM_COMPOSE" // the real compose command, JSON array
	shimFailAtEnv  = "NOJ_SHIM_FAIL_AT" // fail the Nth docker command (1-based)
	shimDryEnv     = "NOJ_SHIM_DRY"     // record only: no rendering, every command succeeds
)

// writers are the services that write to the database: a mongorestore
// --drop while one runs loses or half-lands its writes.
var writers = []string{"web", "sandbox", "materializer"}

// shimEntry is one line of the shim's log.
type shimEntry struct {
	Kind  string   // cmd, fail, recreate, start, stop, exec, run, restore, write, orphan
	Words []string `json:",omitempty"`
	Note  string   `json:",omitempty"`
}

type shimContainer struct {
	Running bool
	Hash    string         // the rendered service it was created from
	Build   int            // and the build of its image
	Service map[string]any // that service
}

type shimState struct {
	Commands   int
	Containers map[string]*shimContainer
	Builds     map[string]int // images built per service
}

// shimMain runs the shim when the binary was invoked as docker or
// docker-compose; ok is false otherwise (the tests run).
func shimMain() (code int, ok bool) {
	name := filepath.Base(os.Args[0])
	if os.Getenv(shimStateEnv) == "" || (name != "docker" && name != "docker-compose") {
		return 0, false
	}
	sh := &shim{dir: os.Getenv(shimStateEnv), dry: os.Getenv(shimDryEnv) != ""}
	if err := sh.load(); err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 125, true
	}
	code = sh.main(name, os.Args[1:])
	if err := sh.save(); err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 125, true
	}
	return code, true
}

type shim struct {
	dir   string
	dry   bool
	state shimState
	log   []shimEntry
}

func (sh *shim) load() error {
	sh.state.Containers = map[string]*shimContainer{}
	sh.state.Builds = map[string]int{}
	b, err := os.ReadFile(filepath.Join(sh.dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &sh.state); err != nil {
		return err
	}
	if sh.state.Builds == nil {
		sh.state.Builds = map[string]int{}
	}
	return nil
}

func (sh *shim) save() error {
	b, err := json.Marshal(sh.state)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sh.dir, "state.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(sh.dir, "log.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, e := range sh.log {
		if err := enc.Encode(e); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func (sh *shim) record(kind string, words []string, note string) {
	sh.log = append(sh.log, shimEntry{Kind: kind, Words: words, Note: note})
}

// fail records why a command failed and says it on stderr, as compose would.
func (sh *shim) fail(format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	sh.record("fail", nil, msg)
	fmt.Fprintln(os.Stderr, "ERROR:", msg)
	return 1
}

func (sh *shim) main(name string, args []string) int {
	sh.state.Commands++
	sh.record("cmd", append([]string{name}, args...), "")
	if n, _ := strconv.Atoi(os.Getenv(shimFailAtEnv)); n == sh.state.Commands {
		return sh.fail("failed on purpose (%s=%d)", shimFailAtEnv, n)
	}
	if name == "docker" {
		if len(args) > 0 && args[0] == "compose" {
			return sh.compose(args[1:])
		}
		if len(args) > 0 && args[0] == "run" {
			return sh.dockerRun(args[1:])
		}
		return 0
	}
	return sh.compose(args)
}

// dryOutputs creates, empty, what a materializer command's --out would
// have written on a mounted directory, for the commands after it to find.
func (sh *shim) dryOutputs(verb string, args []string) int {
	if verb != "run" && verb != "exec" {
		return 0
	}
	flags, words := splitFlags(args, true)
	m := mounts(nil, flags)
	for i, w := range words {
		if w != "--out" || i+1 >= len(words) {
			continue
		}
		h := hostPath(m, words[i+1])
		if h == "" {
			continue
		}
		var err error
		if strings.HasSuffix(h, ".gz") || strings.HasSuffix(h, ".archive") {
			err = os.WriteFile(h, nil, 0o644)
		} else {
			err = os.MkdirAll(h, 0o755)
		}
		if err != nil {
			return sh.fail("%v", err)
		}
	}
	return 0
}

// dockerRun: a container of an image named by reference; an empty tag
// (noj-materializer:$UNSET) is refused as docker refuses it.
func (sh *shim) dockerRun(args []string) int {
	_, rest := splitFlags(args, true)
	if len(rest) == 0 || strings.HasSuffix(rest[0], ":") {
		return sh.fail("docker run: invalid reference format: %q", strings.Join(rest[:min(1, len(rest))], ""))
	}
	sh.record("run", rest, "docker run")
	return 0
}

// valueFlags take a value in the next word (compose's global flags and
// those of up, stop, exec and run).
var valueFlags = map[string]bool{
	"-f": true, "--file": true, "-p": true, "--project-name": true, "--project-directory": true,
	"--env-file": true, "--profile": true, "-t": true, "--timeout": true, "--scale": true,
	"-u": true, "--user": true, "-e": true, "--env": true, "-w": true, "--workdir": true,
	"--index": true, "-v": true, "--volume": true, "--name": true, "--entrypoint": true,
	"--publish": true, "-l": true, "--label": true,
}

// splitFlags splits leading flags from the words after them; with stop,
// at the first non-flag word, else all flags of the list (services may
// come between them).
func splitFlags(args []string, stop bool) (flags [][2]string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			if stop {
				return flags, append(rest, args[i:]...)
			}
			rest = append(rest, a)
			continue
		}
		if valueFlags[a] && i+1 < len(args) {
			flags = append(flags, [2]string{a, args[i+1]})
			i++
			continue
		}
		flags = append(flags, [2]string{a, ""})
	}
	return flags, rest
}

func hasFlag(flags [][2]string, names ...string) bool {
	return slices.ContainsFunc(flags, func(f [2]string) bool { return slices.Contains(names, f[0]) })
}

func (sh *shim) compose(args []string) int {
	globalFlags, rest := splitFlags(args, true)
	var globals []string
	for _, f := range globalFlags {
		globals = append(globals, f[0])
		if f[1] != "" {
			globals = append(globals, f[1])
		}
	}
	if len(rest) == 0 {
		return sh.fail("compose: no command")
	}
	verb, rest := rest[0], rest[1:]
	if sh.dry {
		return sh.dryOutputs(verb, rest)
	}
	if verb == "config" {
		return sh.realCompose(append(append(globals, "config"), rest...), os.Stdout)
	}
	services, err := sh.render(globals)
	if err != nil {
		return sh.fail("%v", err)
	}
	flags, words := splitFlags(rest, verb == "exec" || verb == "run")
	named := words
	if verb == "exec" || verb == "run" {
		if len(words) == 0 {
			return sh.fail("%s: no service", verb)
		}
		named = words[:1]
	}
	for _, s := range named {
		if _, ok := services[s]; !ok {
			return sh.fail("No such service: %s", s)
		}
	}
	if len(named) == 0 && verb != "exec" && verb != "run" {
		for s := range services {
			named = append(named, s)
		}
		slices.Sort(named)
	}
	switch verb {
	case "up":
		for _, s := range named {
			sh.up(services, s, !hasFlag(flags, "--no-deps"))
		}
	case "start", "restart":
		for _, s := range named {
			c := sh.state.Containers[s]
			if c == nil {
				return sh.fail("No containers to start: %s", s)
			}
			c.Running = true
			sh.record("start", []string{s}, verb)
		}
	case "stop":
		for _, s := range named {
			if c := sh.state.Containers[s]; c != nil {
				c.Running = false
			}
			sh.record("stop", []string{s}, "")
		}
	case "down":
		for _, s := range named {
			delete(sh.state.Containers, s)
			sh.record("stop", []string{s}, "down")
		}
		for s, c := range sh.state.Containers {
			if c.Running {
				sh.record("orphan", []string{s}, "down left it running: not in the file set")
			}
		}
	case "exec":
		c := sh.state.Containers[words[0]]
		if c == nil || !c.Running {
			return sh.fail("service %q is not running", words[0])
		}
		return sh.exec(c.Service, words[0], words[1:], flags)
	case "run":
		if !hasFlag(flags, "--no-deps") {
			for _, d := range dependsOn(services[words[0]]) {
				sh.up(services, d, true)
			}
		}
		return sh.exec(services[words[0]], words[0], words[1:], flags)
	case "build":
		for _, s := range named {
			if services[s]["build"] != nil {
				sh.state.Builds[s]++
			}
		}
	case "pull", "ps", "logs", "rm", "images":
	default:
		return sh.fail("compose: the shim does not know %q", verb)
	}
	return 0
}

// up starts a service (its dependencies first), recreating its container
// when the rendered service or its built image differs from the one it
// was created from.
func (sh *shim) up(services map[string]map[string]any, s string, deps bool) {
	if deps {
		for _, d := range dependsOn(services[s]) {
			sh.up(services, d, true)
		}
	}
	b, _ := json.Marshal(services[s])
	c := sh.state.Containers[s]
	if c == nil || c.Hash != string(b) || c.Build != sh.state.Builds[s] {
		image, _ := services[s]["image"].(string)
		sh.state.Containers[s] = &shimContainer{Running: true, Hash: string(b), Build: sh.state.Builds[s], Service: services[s]}
		sh.record("recreate", []string{s, image}, "")
		return
	}
	if !c.Running {
		c.Running = true
		sh.record("start", []string{s}, "up")
	}
}

func dependsOn(svc map[string]any) []string {
	var out []string
	switch d := svc["depends_on"].(type) {
	case []any:
		for _, x := range d {
			out = append(out, fmt.Sprint(x))
		}
	case map[string]any:
		for x := range d {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

func (sh *shim) realCompose(args []string, stdout io.Writer) int {
	var real []string
	if err := json.Unmarshal([]byte(os.Getenv(shimComposeEnv)), &real); err != nil || len(real) == 0 {
		return sh.fail("%s: %v", shimComposeEnv, err)
	}
	cmd := exec.Command(real[0], append(real[1:], args...)...)
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return sh.fail("compose %s: exit %d", strings.Join(args, " "), ee.ExitCode())
		}
		return sh.fail("compose: %v", err)
	}
	return 0
}

// render returns the services of the file set a command with these
// global flags reads, as the real compose renders them. A rendering is
// kept for as long as what it read is unchanged (the directory's compose
// files and .env, the variables): a site's procedures render the same set
// many times, and each docker-compose costs about half a second of CPU.
func (sh *shim) render(globals []string) (map[string]map[string]any, error) {
	key, err := renderKey(globals)
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(sh.dir, "render-"+key+".yml")
	out, err := os.ReadFile(cache)
	if err != nil {
		var b strings.Builder
		if sh.realCompose(append(slices.Clone(globals), "config"), &b) != 0 {
			return nil, errors.New("the file set does not render")
		}
		out = []byte(b.String())
		if err := os.WriteFile(cache, out, 0o644); err != nil {
			return nil, err
		}
	}
	var cfg struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		return nil, fmt.Errorf("parsing the rendered config: %w", err)
	}
	return cfg.Services, nil
}

// renderKey digests what a rendering reads: the global flags, the
// working directory, its compose files and .env, and the variables
// compose reads or interpolates (COMPOSE_*, NOJ_*).
func renderKey(globals []string) (string, error) {
	h := sha256.New()
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%q %q\n", globals, wd)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "COMPOSE_") || strings.HasPrefix(kv, "NOJ_") {
			fmt.Fprintf(h, "%q\n", kv)
		}
	}
	ents, err := os.ReadDir(".")
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && (n == ".env" || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".yaml")) {
			b, err := os.ReadFile(n)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%q %d %x\n", n, len(b), sha256.Sum256(b))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// mounts maps container paths to host paths: the service's volumes, then
// a run's -v flags.
func mounts(svc map[string]any, flags [][2]string) map[string]string {
	m := map[string]string{}
	add := func(spec string) {
		p := strings.Split(spec, ":")
		if len(p) >= 2 && filepath.IsAbs(p[0]) {
			m[p[1]] = p[0]
		}
	}
	if vs, ok := svc["volumes"].([]any); ok {
		for _, v := range vs {
			switch v := v.(type) {
			case string:
				add(v)
			case map[string]any:
				add(fmt.Sprintf("%v:%v", v["source"], v["target"]))
			}
		}
	}
	for _, f := range flags {
		if f[0] == "-v" || f[0] == "--volume" {
			add(f[1])
		}
	}
	return m
}

// hostPath is p in the container, on the host; "" when no mount holds it.
func hostPath(m map[string]string, p string) string {
	best := ""
	for c := range m {
		if (p == c || strings.HasPrefix(p, c+"/")) && len(c) > len(best) {
			best = c
		}
	}
	if best == "" {
		return ""
	}
	return m[best] + strings.TrimPrefix(p, best)
}

// exec runs a command in a service's container (exec) or a one-off one
// (run): the few that matter to a procedure for real, the rest recorded.
func (sh *shim) exec(svc map[string]any, service string, cmd []string, flags [][2]string) int {
	m := mounts(svc, flags)
	if len(cmd) == 0 {
		return sh.fail("%s: no command", service)
	}
	switch {
	case service == "materializer":
		// The container's environment, as the service renders it.
		for k, v := range envOf(svc) {
			if err := os.Setenv(k, v); err != nil {
				return sh.fail("%v", err)
			}
		}
		return sh.materializer(m, strings.TrimPrefix(strings.Join(cmd[:1], ""), "/") == "materializer", cmd)
	case cmd[0] == "mongodump":
		return sh.mongodump(m, cmd[1:])
	case cmd[0] == "mongorestore":
		if err := restoreInput(m, cmd[1:]); err != nil {
			return sh.fail("mongorestore: %v", err)
		}
		var running []string
		for _, w := range writers {
			if c := sh.state.Containers[w]; c != nil && c.Running {
				running = append(running, w)
			}
		}
		sh.record("restore", running, strings.Join(cmd, " "))
		return 0
	}
	sh.record("exec", append([]string{service}, cmd...), "")
	return 0
}

// restoreInput checks that what mongorestore is given exists: a dump
// directory on a volume, or an archive on standard input.
func restoreInput(m map[string]string, args []string) error {
	_, words := splitFlags(args, false)
	if slices.Contains(args, "--archive") {
		n, err := io.Copy(io.Discard, os.Stdin)
		if err == nil && n == 0 {
			err = errors.New("--archive: nothing on standard input")
		}
		return err
	}
	for _, w := range words {
		if strings.Contains(w, "*") { // --nsInclude's value
			continue
		}
		h := hostPath(m, w)
		if h == "" {
			return fmt.Errorf("%s: not on a volume", w)
		}
		if _, err := os.Stat(h); err != nil {
			return err
		}
		return nil
	}
	return errors.New("no dump directory and no --archive")
}

// materializer runs the image's command in process when it is offline
// (--dump, seed, version); an online one needs a server and is recorded.
func (sh *shim) materializer(m map[string]string, leadingBinary bool, cmd []string) int {
	if leadingBinary {
		cmd = cmd[1:]
	}
	args := slices.Clone(cmd)
	offline := false
	for i, a := range args {
		if a == "--dump" || a == "-dump" {
			offline = true
		}
		if h := hostPath(m, a); strings.HasPrefix(a, "/") && h != "" {
			args[i] = h
		}
	}
	if !offline {
		sh.record("run", append([]string{"materializer"}, cmd...), "online: needs a server")
		return 0
	}
	sh.record("run", append([]string{"materializer"}, cmd...), "offline: ran")
	// An --out it creates is the container's; one made before, the host's.
	var created []string
	for i, a := range cmd {
		if (a == "--out" || a == "-out") && i+1 < len(args) {
			if _, err := os.Lstat(args[i+1]); errors.Is(err, os.ErrNotExist) {
				created = append(created, args[i+1])
			}
		}
	}
	env := &environment{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
	code := runMain(context.Background(), env, args)
	for _, p := range created {
		sh.record("write", []string{p}, "materializer")
	}
	return code
}

// mongodump writes what the server would dump: a seeded Normal-OJ
// database with the stale values the old Back-End leaves, as a directory
// (--out) or an archive (--archive[=FILE]), gzipped with --gzip.
func (sh *shim) mongodump(m map[string]string, args []string) int {
	var db, out, archive string
	gz, toStdout := false, false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--db" && i+1 < len(args):
			db, i = args[i+1], i+1
		case a == "--out" && i+1 < len(args):
			out, i = args[i+1], i+1
		case a == "--gzip":
			gz = true
		case a == "--archive":
			toStdout = true
		case strings.HasPrefix(a, "--archive="):
			archive = strings.TrimPrefix(a, "--archive=")
		}
	}
	if db != "normal-oj" {
		return sh.fail("mongodump without --db normal-oj")
	}
	seed := func(args ...string) int {
		var stderr strings.Builder
		env := &environment{stdout: io.Discard, stderr: &stderr}
		code := runMain(context.Background(), env, append([]string{"seed", "--users", "40", "--submissions", "3000", "--quiet"}, args...))
		if code != 0 {
			fmt.Fprint(os.Stderr, stderr.String())
		}
		return code
	}
	switch {
	case out != "":
		h := hostPath(m, out)
		if h == "" {
			return sh.fail("mongodump --out %s: not on a volume, lost with the container", out)
		}
		if _, err := os.Lstat(h); err == nil {
			return sh.fail("mongodump --out %s: exists (the shim's backups are new)", out)
		}
		if code := seed("--out", filepath.Join(h, db)); code != 0 {
			return code
		}
		sh.record("write", []string{h}, "mongodump")
		if gz {
			return sh.gzipDir(filepath.Join(h, db))
		}
		return 0
	case toStdout || archive != "":
		tmp, err := os.MkdirTemp("", "shim-mongodump-*")
		if err != nil {
			return sh.fail("%v", err)
		}
		defer os.RemoveAll(tmp)
		name := filepath.Join(tmp, "dump.archive")
		if gz {
			name += ".gz"
		}
		if code := seed("--archive", name); code != 0 {
			return code
		}
		if toStdout {
			f, err := os.Open(name)
			if err != nil {
				return sh.fail("%v", err)
			}
			defer f.Close()
			w := bufio.NewWriter(os.Stdout)
			if _, err := io.Copy(w, f); err != nil {
				return sh.fail("%v", err)
			}
			return map[bool]int{true: 0, false: 1}[w.Flush() == nil]
		}
		return sh.fail("mongodump --archive=%s inside the container: lost with it", archive)
	}
	return sh.fail("mongodump without --out or --archive")
}

func (sh *shim) gzipDir(dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return sh.fail("%v", err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return sh.fail("%v", err)
		}
		f, err := os.Create(p + ".gz")
		if err != nil {
			return sh.fail("%v", err)
		}
		zw := gzip.NewWriter(f)
		_, err = zw.Write(b)
		err = errors.Join(err, zw.Close(), f.Close(), os.Remove(p))
		if err != nil {
			return sh.fail("%v", err)
		}
	}
	return 0
}
