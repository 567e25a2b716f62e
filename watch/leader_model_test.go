package watch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// leaderModel is the Promela model of the Leader's term, its write guard,
// the lease store and the fenced checkpoint save (docs/testing.md).
const leaderModel = "testdata/leader.pml"

// spinTools returns the paths of spin and a C compiler, or skips (fails
// with MATERIALIZER_REQUIRE_SPIN=1) when one is missing.
func spinTools(t *testing.T) (spin, cc string) {
	t.Helper()
	spin, err := exec.LookPath("spin")
	if err == nil {
		cc, err = exec.LookPath("cc")
	}
	if err != nil {
		msg := "spin or cc not on PATH: the Promela model of the Leader is not checked (Debian: apt-get install spin gcc; `make spin`)"
		if os.Getenv("MATERIALIZER_REQUIRE_SPIN") == "1" {
			t.Fatal(msg + "; MATERIALIZER_REQUIRE_SPIN=1 requires it")
		}
		t.Skip(msg)
	}
	return spin, cc
}

// verify generates, compiles and runs spin's verifier of the model with
// the given preprocessor definitions, returning its report: a safety
// search (assertions and invalid end states), exhaustive within
// MATERIALIZER_SPIN_MAXT (default: the model's MAXT, 8; `make spin`: 10)
// time units.
func verify(t *testing.T, spin, cc, opt string, defines ...string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(leaderModel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "leader.pml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if m := os.Getenv("MATERIALIZER_SPIN_MAXT"); m != "" {
		defines = append(defines, "MAXT="+m)
	}
	args := []string{}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(spin, append(args, "-a", "leader.pml")...)
	// SAFETY: assertions and invalid end states, no cycles. COLLAPSE
	// keeps memory near 0.5 GB; MEMLIM makes a larger bound stop, saying
	// so ("Search not completed"), rather than exhaust the machine.
	run(cc, opt, "-w", "-DSAFETY", "-DCOLLAPSE", "-DMEMLIM=2048", "-o", "pan", "pan.c")
	return run(filepath.Join(dir, "pan"), "-m200000")
}

// report picks the lines of a pan report a reader needs.
func report(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"pan:", "State-vector", "states, stored", "transitions", "Search not completed", "total actual memory"} {
			if strings.HasPrefix(l, p) || strings.Contains(l, p) {
				keep = append(keep, l)
				break
			}
		}
	}
	return strings.Join(keep, "\n")
}

// TestLeaderModel: spin explores every schedule of the model up to its
// bound and finds no error: fencing (no derived write of an epoch lands
// once a later epoch exists, none later than Margin/2 before its
// epoch's expiry, no checkpoint of an older epoch accepted), one writer
// per epoch, a lost lease stops the job (no term waits forever for it).
// Each planted bug makes spin report the violation it breaks (with
// MATERIALIZER_SPIN_PLANTED=1, as `make spin` sets).
func TestLeaderModel(t *testing.T) {
	if os.Getenv("MATERIALIZER_REQUIRE_SPIN") != "1" && os.Getenv("MATERIALIZER_TEST_SPIN") != "1" {
		// Compiling and running the verifier costs seconds of CPU that
		// make test's budget has not: `make spin` (CI) runs it.
		// TestLeaderModelInStep, which keeps the model in step with the
		// code, runs in make test.
		t.Skip("the Leader's model is checked by make spin (or MATERIALIZER_TEST_SPIN=1)")
	}
	spin, cc := spinTools(t)
	t.Run("as the code is", func(t *testing.T) {
		start := time.Now()
		t.Parallel()
		out := verify(t, spin, cc, "-O1")
		t.Logf("spin %s in %s:\n%s", leaderModel, time.Since(start).Round(time.Millisecond), report(out))
		if !strings.Contains(out, "errors: 0") || strings.Contains(out, "Search not completed") {
			t.Fatalf("the model of the Leader fails or was not explored completely:\n%s", out)
		}
	})
	const (
		late  = "assertion violated ((now+(2/2))<=granted[e])" // past the margin
		taken = "assertion violated (leaseEpoch==e)"           // after a takeover
	)
	for _, c := range []struct {
		bug  string
		want []string // any of
	}{
		{"BUG_RENEW_AFTER_REPLY", []string{late}},
		{"BUG_NO_EPOCH_CHECK", []string{"==leaseEpoch)", ">=cpEpoch)"}},
		{"BUG_NO_GUARD", []string{late, taken}},
		{"BUG_NO_CANCEL", []string{"invalid end state"}},
		{"BUG_SAME_EPOCH", []string{"assertion violated (writer[e]==(i+1))"}},
		{"BUG_RELEASE_ANY", []string{taken, late}},
	} {
		t.Run(c.bug, func(t *testing.T) {
			if os.Getenv("MATERIALIZER_SPIN_PLANTED") != "1" {
				// Each costs a compile of the verifier (seconds of CPU):
				// `make spin` runs them, `make test` checks the model.
				t.Skip("the planted bugs are checked by make spin (MATERIALIZER_SPIN_PLANTED=1)")
			}
			t.Parallel()
			// The search stops at the first error: compiling dominates.
			out := verify(t, spin, cc, "-O0", c.bug)
			t.Logf("spin -D%s:\n%s", c.bug, report(out))
			found := false
			for _, w := range c.want {
				found = found || strings.Contains(out, w)
			}
			if !strings.Contains(out, "errors: 1") || !found {
				t.Errorf("planted %s: spin did not report any of %q:\n%s", c.bug, c.want, out)
			}
		})
	}
}
