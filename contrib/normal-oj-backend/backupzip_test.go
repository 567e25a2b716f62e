package backend

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestBackupZipHoldsTheDataDirectoryAtItsRoot: Normal-OJ's backup.py
// zips ./MongoDB with shutil.make_archive('MongoDB', 'zip', 'MongoDB'),
// so its entries are the data directory's files at the zip's root, and
// recovery.md's `unzip -q ZIP -d restore` followed by
// `-v "$PWD/restore:/data/db"` hands mongod the data directory itself
// (not restore/MongoDB/...). Seen failing with base_dir='MongoDB' passed
// too (the entries then start with MongoDB/).
func TestBackupZipHoldsTheDataDirectoryAtItsRoot(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: backup.py's zip is made by Python's shutil")
	}
	site := t.TempDir()
	data := filepath.Join(site, "MongoDB")
	for _, f := range []string{"WiredTiger", "collection-0-1.wt", "journal/WiredTigerLog.0000000001"} {
		p := filepath.Join(data, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// backup.py's own call, in the stack's directory.
	cmd := exec.Command(py, "-c", "import shutil; shutil.make_archive('MongoDB', 'zip', 'MongoDB')")
	cmd.Dir = site
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_archive: %v\n%s", err, out)
	}
	zr, err := zip.OpenReader(filepath.Join(site, "MongoDB.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var files []string
	for _, f := range zr.File {
		if !f.FileInfo().IsDir() {
			files = append(files, f.Name)
		}
	}
	slices.Sort(files)
	if want := []string{"WiredTiger", "collection-0-1.wt", "journal/WiredTigerLog.0000000001"}; !slices.Equal(files, want) {
		t.Errorf("backup.py's zip holds %q, want the data directory's files at its root %q", files, want)
	}
}
