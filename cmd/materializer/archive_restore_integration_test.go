package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestIntegrationSeedArchiveRestores: mongorestore loads the archive seed
// --archive writes (gzip-compressed, as its .gz name says) into the
// database it names, every document byte for byte as seed --out writes it,
// and verify online reports on the restored database what verify --dump
// reports on the archive. It needs a replica set (newIntegration) and
// mongorestore (MongoDB Database Tools) on PATH; without either it skips.
func TestIntegrationSeedArchiveRestores(t *testing.T) {
	it := newIntegration(t)
	mongorestore, err := exec.LookPath("mongorestore")
	if err != nil {
		t.Skip("no mongorestore on PATH: install the MongoDB Database Tools to run this test")
	}
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	file, dir := filepath.Join(root, "seed.archive.gz"), filepath.Join(root, "seed")
	seedDump(t, dir, "7")
	if r := runCLI(t, append(append([]string{"seed"}, seedArgs...), "--seed", "7", "--archive", file)...); r.code != exitOK {
		t.Fatalf("seed --archive: %v", r)
	}
	if out, err := exec.Command(mongorestore, "--uri", it.uri, "--gzip", "--archive="+file).CombinedOutput(); err != nil {
		t.Fatalf("mongorestore --gzip --archive=%s: %v\n%s", file, err, out)
	}
	want, got := readDumpDocs(t, dir), it.read()
	for _, c := range []struct {
		coll      string
		want, got []bson.Raw
	}{
		{"user", want.Users, got.Users}, {"problem", want.Problems, got.Problems},
		{"homework", want.Homeworks, got.Homeworks}, {"submission", want.Submissions, got.Submissions},
	} {
		w, g := byID(c.want), byID(c.got)
		if len(w) != len(g) || len(w) == 0 {
			t.Errorf("%s: %d documents restored, the seed has %d", c.coll, len(g), len(w))
		}
		for id, d := range w {
			if !bytes.Equal(g[id], d) {
				t.Errorf("%s %v: restored %v, seeded %v", c.coll, d.Lookup("_id"), g[id], d)
				break
			}
		}
	}
	online, offline := runCLI(t, "verify"), runCLI(t, "verify", "--dump", file)
	if online.code != exitFail || offline.code != exitFail || parseReport(t, online) != parseReport(t, offline) {
		t.Errorf("verify of the restored database:\n%v\nverify --dump of the archive:\n%v", online, offline)
	}
}
