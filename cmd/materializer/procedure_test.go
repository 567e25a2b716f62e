package main

// docs/recovery.md's restore procedure, run as far as it runs
// without a server: its mongodump emulated by seed --out (same layout),
// its container invocations run in process with their volumes mapped to
// directories of the test.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docBlock returns the shell block following marker in a Markdown file,
// its continuation lines joined.
func docBlock(t *testing.T, path, marker string) []string {
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
	end := strings.Index(s[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatalf("%s: no sh block after %q", path, marker)
	}
	var lines []string
	cur := ""
	for _, l := range strings.Split(s[start+6:start+6+end], "\n") {
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

func TestOperationsRestoreProcedure(t *testing.T) {
	cleanConfigEnv(t)
	lines := docBlock(t, filepath.Join("..", "..", "docs", "recovery.md"), "<!-- procedure: restore from a directory")
	pwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(pwd, "MongoDB"), 0o755); err != nil {
		t.Fatal(err)
	}
	// /data/db in the mongo container is ./MongoDB (the stock compose file).
	mongoPath := func(p string) string {
		if !strings.HasPrefix(p, "/data/db/") {
			t.Fatalf("a mongo container path outside /data/db: %s", p)
		}
		return filepath.Join(pwd, "MongoDB", strings.TrimPrefix(p, "/data/db/"))
	}
	ran := map[string]int{}
	var fixed string
	for _, line := range lines {
		words, comment := shellWords(strings.ReplaceAll(line, "$PWD", pwd))
		if len(words) == 0 {
			continue
		}
		switch {
		case len(words) > 4 && strings.Join(words[:4], " ") == "docker compose exec mongo" && words[4] == "mongodump":
			// The backup: seed --out writes mongodump's layout; --gzip
			// compresses every file, as mongodump --gzip does.
			var db, out string
			gz := false
			for i := 5; i < len(words); i++ {
				switch words[i] {
				case "--db":
					db, i = words[i+1], i+1
				case "--out":
					out, i = mongoPath(words[i+1]), i+1
				case "--gzip":
					gz = true
				}
			}
			if db != "normal-oj" || out == "" {
				t.Fatalf("mongodump without --db normal-oj --out: %s", line)
			}
			if r := runCLI(t, "seed", "--users", "40", "--submissions", "3000", "--out", filepath.Join(out, db)); r.code != exitOK {
				t.Fatalf("seed as the backup: %v", r)
			}
			if gz {
				gzipDir(t, filepath.Join(out, db))
			}
			if r := runCLI(t, "verify", "--dump", out); r.code != exitFail {
				t.Fatalf("the backup verifies clean: the seed leaves stale values\n%v", r)
			}
			ran["mongodump"]++
		case words[0] == "mkdir":
			fixed = filepath.Join(pwd, words[len(words)-1])
			if err := os.Mkdir(fixed, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(fixed, 0o2775|os.ModeSetgid); err != nil {
				t.Fatal(err)
			}
			ran["mkdir"]++
		case len(words) > 2 && words[0] == "docker" && words[1] == "run":
			vols := map[string]string{} // container path → host path
			var ro []string
			i := 2
			for ; i < len(words) && strings.HasPrefix(words[i], "-"); i++ {
				switch words[i] {
				case "-v", "--volume":
					i++
					spec := strings.Split(words[i], ":")
					vols[spec[1]] = spec[0]
					if len(spec) > 2 && spec[2] == "ro" {
						ro = append(ro, spec[0])
					}
				case "--user", "-u", "-e", "--env":
					i++
				}
			}
			if i >= len(words) || !strings.HasPrefix(words[i], "noj-materializer:") {
				t.Fatalf("docker run of another image: %s", line)
			}
			args := words[i+1:]
			for k, a := range args {
				for c, h := range vols {
					if a == c || strings.HasPrefix(a, c+"/") {
						args[k] = h + strings.TrimPrefix(a, c)
					}
				}
			}
			before := map[string]map[string][]byte{}
			for _, h := range ro {
				before[h] = treeOf(t, h)
			}
			r := runCLI(t, args...)
			want := exitOK
			if strings.Contains(comment, "exit 1") {
				want = exitFail
			}
			if r.code != want {
				t.Fatalf("%s\n(as materializer %q): want exit %d\n%v", line, args, want, r)
			}
			for _, h := range ro {
				if !mapsEqual(before[h], treeOf(t, h)) {
					t.Errorf("the read-only volume %s was written to", h)
				}
			}
			ran[args[0]]++
		case len(words) > 1 && words[0] == "docker" && words[1] == "compose":
			// Stopping the daemon, mongorestore, the online rebuild: they
			// need a server; the offline part must be done by now.
			ran["server"]++
		default:
			t.Fatalf("a step the test does not know: %s", line)
		}
	}
	for _, step := range []string{"mongodump", "mkdir", "rebuild", "verify", "server"} {
		if ran[step] == 0 {
			t.Errorf("the procedure has no %s step", step)
		}
	}
	if fixed == "" {
		return
	}
	st, err := os.Stat(fixed)
	if err != nil || st.Mode()&os.ModeSetgid == 0 || st.Mode().Perm() != 0o775 {
		t.Errorf("the pre-created output lost its mode: %v %v", st.Mode(), err)
	}
	ents := mustReadDir(t, fixed)
	if len(ents) != 1 || ents[0].Name() != "normal-oj" {
		t.Fatalf("the output holds %v, want normal-oj/", ents)
	}
	for _, e := range mustReadDir(t, filepath.Join(fixed, "normal-oj")) {
		if !strings.HasSuffix(e.Name(), ".gz") {
			t.Errorf("%s in the output is not gzipped like the backup", e.Name())
		}
	}
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
