package dump_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/bsontest"
)

// writeColls writes a dump directory at dir holding the named collections
// (one document each), gzipped when gz (as mongodump --gzip names them).
func writeColls(t *testing.T, dir string, gzipped bool, colls ...string) {
	t.Helper()
	docs := map[string][]bson.Raw{}
	for _, c := range colls {
		docs[c] = []bson.Raw{bsontest.Marshal(t, bson.D{{Key: "_id", Value: c}})}
	}
	if err := dump.Write(dir, docs); err != nil {
		t.Fatal(err)
	}
	if !gzipped {
		return
	}
	for _, c := range colls {
		p := filepath.Join(dir, c+".bson")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".gz", gz(t, b), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResolveLayouts: Resolve finds the database directory of every
// layout mongodump writes (DIR/<db>/ beside other databases or alone, or
// the .bson files in DIR itself, plain or gzipped), and reads the
// documents there, not those of another database.
func TestResolveLayouts(t *testing.T) {
	for _, c := range []struct {
		name, db, sub string
		others        []string
		gz            bool
	}{
		{name: "flat", db: "normal-oj", sub: "."},
		{name: "nested default database", db: "normal-oj", sub: "normal-oj"},
		{name: "nested beside other databases", db: "normal-oj", sub: "normal-oj", others: []string{"admin", "normal-oj-old"}},
		{name: "nested named database", db: "school", sub: "school", others: []string{"normal-oj"}},
		{name: "flat gzip", db: "normal-oj", sub: ".", gz: true},
		{name: "nested gzip", db: "normal-oj", sub: "normal-oj", gz: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			want := filepath.Join(root, c.sub)
			writeColls(t, want, c.gz, dump.Sources...)
			for _, o := range c.others {
				// Another database's dump, whose user document must not be read.
				if err := dump.Write(filepath.Join(root, o), map[string][]bson.Raw{"user": {bsontest.Marshal(t, bson.D{{Key: "_id", Value: "other"}})}}); err != nil {
					t.Fatal(err)
				}
			}
			d, err := dump.Resolve(root, c.db)
			if err != nil {
				t.Fatal(err)
			}
			if d.Root != root || filepath.Clean(d.Path) != filepath.Clean(want) {
				t.Fatalf("Resolve: Root %s, Path %s; want %s, %s", d.Root, d.Path, root, want)
			}
			if m := d.Missing(); len(m) != 0 {
				t.Errorf("Missing %v", m)
			}
			users, err := d.Read("user")
			if err != nil {
				t.Fatal(err)
			}
			if len(users) != 1 || users[0].Lookup("_id").StringValue() != "user" {
				t.Errorf("Read(user) = %v, want this database's one user document", users)
			}
		})
	}
}

// TestResolveErrors: a missing path, a file, a directory holding neither
// the database's directory nor collection files (naming the other
// databases' directories it holds), and a collection both plain and
// gzipped are refused with errors saying which.
func TestResolveErrors(t *testing.T) {
	root := t.TempDir()
	if _, err := dump.Resolve(filepath.Join(root, "absent"), "normal-oj"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v, want a not-exist error", err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := dump.Resolve(file, "normal-oj"); err == nil {
		t.Error("a file resolved as a dump directory")
	}

	empty := filepath.Join(root, "empty")
	writeColls(t, filepath.Join(empty, "school"), false, "user")
	if err := os.WriteFile(filepath.Join(empty, "course.bson"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := dump.Resolve(empty, "normal-oj")
	var nf *dump.NotFoundError
	if !errors.As(err, &nf) || nf.Path != empty || nf.Database != "normal-oj" || !slices.Equal(nf.Others, []string{"school"}) {
		t.Errorf("no database directory: %#v, want a NotFoundError naming the other database school", err)
	}

	both := filepath.Join(root, "both")
	writeColls(t, both, false, dump.Sources...)
	writeColls(t, filepath.Join(root, "gz"), true, "homework")
	if err := os.Rename(filepath.Join(root, "gz", "homework.bson.gz"), filepath.Join(both, "homework.bson.gz")); err != nil {
		t.Fatal(err)
	}
	_, err = dump.Resolve(both, "normal-oj")
	var ce *dump.ConflictError
	if !errors.As(err, &ce) || ce.Plain != filepath.Join(both, "homework.bson") || ce.Gzip != filepath.Join(both, "homework.bson.gz") {
		t.Errorf("plain and gzipped: %v, want a ConflictError naming both homework files", err)
	}
}

// TestCopyToThroughSymlink: a dump named through a symbolic link (to the
// dump's root, or to its database directory) is copied whole, with the
// rewritten collections rewritten, as when it is named by its own path.
func TestCopyToThroughSymlink(t *testing.T) {
	for _, c := range []struct{ name, sub string }{
		{name: "flat", sub: "."},
		{name: "nested", sub: "normal-oj"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			real := filepath.Join(base, "real")
			writeColls(t, filepath.Join(real, c.sub), false, dump.Sources...)
			link := filepath.Join(base, "link")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			d, err := dump.Resolve(link, "normal-oj")
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(base, "out") // as an Output creates it
			if err := os.Mkdir(out, 0o777); err != nil {
				t.Fatal(err)
			}
			rewritten := bsontest.Marshal(t, bson.D{{Key: "_id", Value: "rewritten"}})
			rw := map[string]dump.Rewrite{"user": func(emit func([]byte) error) error { return emit(rewritten) }}
			if err := d.CopyTo(t.Context(), out, rw, nil); err != nil {
				t.Fatalf("CopyTo through a symlink: %v", err)
			}
			got, err := dump.Resolve(out, "normal-oj")
			if err != nil {
				t.Fatal(err)
			}
			for _, coll := range dump.Sources {
				docs, err := got.Read(coll)
				if err != nil {
					t.Fatal(err)
				}
				want := coll
				if coll == "user" {
					want = "rewritten"
				}
				if len(docs) != 1 || docs[0].Lookup("_id").StringValue() != want {
					t.Errorf("%s: %v, want one document with _id %q", coll, docs, want)
				}
			}
		})
	}
}
