package watch

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/monitoring.md's fault policy table from the code's")

const (
	policyBegin = "<!-- fault-policy:begin (generated from watch/fault.go by `go test ./watch -run TestPolicyDoc -update`; do not edit) -->"
	policyEnd   = "<!-- fault-policy:end -->"
)

// renderPolicy renders the policy table as Markdown: one row per class,
// one column per phase, each cell the action Decide returns, marked where
// Config.HistoryLost "exit" changes it.
func renderPolicy() string {
	var b strings.Builder
	b.WriteString("| class \\ phase |")
	for _, p := range Phases() {
		b.WriteString(" " + p.String() + " |")
	}
	b.WriteString("\n|---|")
	for range Phases() {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, c := range Classes() {
		b.WriteString("| **" + c.String() + "** |")
		for _, p := range Phases() {
			cell := Decide(c, p).String()
			if alt := decide(c, p, OnHistoryLostExit); alt != Decide(c, p) {
				cell += " (" + alt.String() + " with `MATERIALIZER_HISTORY_LOST=exit`)"
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestPolicyDoc: the fault policy table in docs/monitoring.md is the
// code's (run with -update to rewrite it after changing the table).
func TestPolicyDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "monitoring.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte(policyBegin))
	j := bytes.Index(doc, []byte(policyEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no section between %q and %q", path, policyBegin, policyEnd)
	}
	want := "\n" + renderPolicy()
	got := string(doc[i+len(policyBegin) : j])
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("%s's fault policy table differs from watch/fault.go's; run `go test ./watch -run TestPolicyDoc -update`.\ngot:\n%s\nwant:\n%s", path, got, want)
	}
	out := append(append(append([]byte{}, doc[:i+len(policyBegin)]...), want...), doc[j:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %s", path)
}
