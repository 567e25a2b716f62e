package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/demo"
)

// TestFloorReadsAndWrites: the floor reader touches every document of a
// seeded dump (its checksum depends on them) and, as a rebuild's floor,
// writes the output bytes: every file of the dump, byte for byte.
func TestFloorReadsAndWrites(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in")
	if err := dump.WriteStream(in, dump.Sources, func(emit func(string, bson.Raw) error) error {
		return demo.GenerateTo(demo.Params{Users: 40, Problems: 10, Homeworks: 4, Submissions: 500, Seed: 3}, emit)
	}); err != nil {
		t.Fatal(err)
	}
	sum, err := floor(in, "")
	if err != nil || sum == 0 {
		t.Fatalf("floor: %d, %v", sum, err)
	}
	out := filepath.Join(root, "out")
	sum2, err := floor(in, out)
	if err != nil || sum2 != sum {
		t.Fatalf("floor with output: %d (want %d), %v", sum2, sum, err)
	}
	entries, err := os.ReadDir(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		a, _ := os.ReadFile(filepath.Join(in, e.Name()))
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: not copied (%v)", e.Name(), err)
		}
	}
}
