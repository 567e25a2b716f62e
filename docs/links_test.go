// Package docs holds no code: its test checks that the documentation's
// cross-references resolve. The error messages, log lines, alert rules and
// the Back-End patch point operators at sections of these files
// ("docs/install.md#indexes"), and the files point at each other; a section
// renamed or moved must not leave a dead link behind.
package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// markdownFiles are the documents whose links are checked.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "deploy/monitoring/README.md", "contrib/normal-oj-backend/README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	return files
}

// slug is the anchor GitHub gives a heading: lower case, letters, digits,
// hyphens and underscores kept, spaces turned into hyphens, everything
// else (punctuation, backquotes, arrows) dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var headingRE = regexp.MustCompile(`^#{1,6} (.+?)\s*#*$`)

// anchors returns the heading anchors of a markdown file (a repeated
// heading gets -1, -2, ... as on GitHub); fenced code is skipped.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// linkRE matches an inline markdown link's target.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestMarkdownLinks: every relative link of the documents names a file
// that exists and, for a markdown file, a heading it has.
func TestMarkdownLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(p string) map[string]bool {
		if cache[p] == nil {
			cache[p] = anchors(t, p)
		}
		return cache[p]
	}
	for _, file := range markdownFiles(t) {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				if path == "" {
					path = file
				} else {
					path = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				}
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", file, i+1, target, path)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading #%s", file, i+1, target, path, anchor)
				}
			}
		}
	}
}

// docRefRE matches a reference to a document from code, a configuration
// file or a runbook URL: docs/install.md, docs/install.md#indexes.
var docRefRE = regexp.MustCompile(`docs/([a-z0-9_-]+\.md)(#[a-z0-9_-]+)?`)

// TestCodeDocReferences: every docs/X.md[#anchor] named by the code (error
// messages, log lines, comments), the monitoring kit, the compose files
// and the Back-End patch exists, anchor included.
func TestCodeDocReferences(t *testing.T) {
	exts := map[string]bool{".go": true, ".yml": true, ".yaml": true, ".json": true, ".sh": true, ".patch": true, ".py": true, ".example": true, ".env": true}
	cache := map[string]map[string]bool{}
	found := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if (!exts[filepath.Ext(p)] && d.Name() != "Makefile") || rel == "docs/links_test.go" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range docRefRE.FindAllStringSubmatch(string(data), -1) {
			found++
			doc := "docs/" + m[1]
			if _, err := os.Stat(filepath.Join(root, doc)); err != nil {
				t.Errorf("%s names %s: no such file", rel, m[0])
				continue
			}
			if m[2] == "" {
				continue
			}
			if cache[doc] == nil {
				cache[doc] = anchors(t, doc)
			}
			if !cache[doc][m[2][1:]] {
				t.Errorf("%s names %s: %s has no heading %s", rel, m[0], doc, m[2])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no docs/*.md reference found in the code: the walk is broken")
	}
}

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Upgrading 4.2 → 4.4 (and further)", "upgrading-42--44-and-further"},
		{"The setting: `DERIVED_DATA_OWNER`", "the-setting-derived_data_owner"},
		{"MaterializerLagHigh", "materializerlaghigh"},
		{`Answering "why is this student's homework score X?"`, "answering-why-is-this-students-homework-score-x"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}
