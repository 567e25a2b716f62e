package dump_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/dump"
)

// TestOpenRefusesIncompleteDump: Open resolves a dump directory and
// refuses one missing a source collection (it would read as empty and
// verify as clean), naming what is missing and no configuration variable.
func TestOpenRefusesIncompleteDump(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "normal-oj")
	if err := os.MkdirAll(db, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"user", "problem", "homework"} {
		if err := os.WriteFile(filepath.Join(db, c+".bson"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	_, err := dump.Open(root, "normal-oj")
	var ie *dump.IncompleteError
	if !errors.As(err, &ie) || ie.NoneFound {
		t.Fatalf("Open: %v (%T), want an *IncompleteError", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "has no submission.bson") || !strings.Contains(msg, db) || strings.Contains(msg, "MATERIALIZER") {
		t.Errorf("Open: %q", msg)
	}
	if err := os.WriteFile(filepath.Join(db, "submission.bson.gz"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	d, err := dump.Open(root, "normal-oj")
	if err != nil || d.Path != db {
		t.Fatalf("Open of a complete dump: %+v, %v", d, err)
	}
	var nf *dump.NotFoundError
	if _, err := dump.Open(root, "other"); !errors.As(err, &nf) || len(nf.Others) != 1 {
		t.Errorf("Open of another database's dump: %v, want a *NotFoundError naming normal-oj", err)
	}
}

// TestCheckComplete: an archive's namespaces must hold the database's four
// source collections; with none of them, the error lists the archive's
// databases.
func TestCheckComplete(t *testing.T) {
	all := func(db string) []dump.Namespace {
		var ns []dump.Namespace
		for _, c := range dump.Sources {
			ns = append(ns, dump.Namespace{DB: db, Collection: c})
		}
		return ns
	}
	if err := dump.CheckComplete("a.archive", all("normal-oj"), "normal-oj"); err != nil {
		t.Errorf("complete archive: %v", err)
	}
	var ie *dump.IncompleteError
	err := dump.CheckComplete("a.archive", all("normal-oj")[1:], "normal-oj")
	if !errors.As(err, &ie) || ie.NoneFound || !strings.Contains(err.Error(), "archive a.archive has no normal-oj.user") {
		t.Errorf("archive missing user: %v", err)
	}
	err = dump.CheckComplete("a.archive", all("site"), "normal-oj")
	if !errors.As(err, &ie) || !ie.NoneFound || !strings.Contains(err.Error(), "its databases are site") || strings.Contains(err.Error(), "MATERIALIZER") {
		t.Errorf("archive of another database: %v", err)
	}
}

// TestResolveRefusesTwoLayouts: a folder holding the database's folder
// and loose collection files is refused with a *LayoutError naming both;
// either alone resolves.
func TestResolveRefusesTwoLayouts(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "normal-oj")
	if err := os.MkdirAll(db, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(db, "user.bson"), filepath.Join(root, "user.bson"), filepath.Join(root, "homework.bson.gz")} {
		if err := os.WriteFile(f, nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	_, err := dump.Resolve(root, "normal-oj")
	var le *dump.LayoutError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "user.bson, homework.bson.gz") || strings.Contains(err.Error(), "MATERIALIZER") {
		t.Fatalf("Resolve: %v (%T), want a *LayoutError naming %s and the loose files", err, err, db)
	}
	if d, err := dump.Resolve(db, "normal-oj"); err != nil || d.Path != db {
		t.Errorf("Resolve of the database folder itself: %+v, %v", d, err)
	}
	for _, f := range []string{"user.bson", "homework.bson.gz"} {
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := dump.Resolve(root, "normal-oj"); err != nil || d.Path != db {
		t.Errorf("Resolve without the loose files: %+v, %v", d, err)
	}
}
