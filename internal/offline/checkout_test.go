package offline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/dump"
)

// TestCheckOutErrors: CheckOut's refusals are *PathErrors saying whether
// the output or the input is at fault, and name no command-line flag
// (the command words them with its own).
func TestCheckOutErrors(t *testing.T) {
	in := t.TempDir()
	full := filepath.Join(t.TempDir(), "full")
	if err := os.MkdirAll(filepath.Join(full, "x"), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		out  string
		want string
	}{
		{"inside the dump", filepath.Join(in, "out"), "inside the input dump"},
		{"the dump itself", in, "inside the input dump"},
		{"not empty", full, "not empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckOut(dump.Dir{Path: in}, c.out)
			var pe *PathError
			if !errors.As(err, &pe) || pe.Input {
				t.Fatalf("CheckOut: %v (%T), want an output *PathError", err, err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.out) {
				t.Errorf("CheckOut: %q, want it to name %s and say %q", err, c.out, c.want)
			}
			if strings.Contains(err.Error(), "--") {
				t.Errorf("CheckOut: %q names a flag", err)
			}
		})
	}
}
