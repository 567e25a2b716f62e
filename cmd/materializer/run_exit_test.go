package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunExitAfterSignal: a signal makes run stop cleanly (exit 0), but
// an error run returns after it keeps its own status: a one-shot
// command's 130/143 ("interrupted, partial output removed") would hide a
// daemon that did not start or did not stop cleanly. Seen failing (143
// for both failures) with runMain turning every error after a signal
// into the signal's status, whatever the command.
func TestRunExitAfterSignal(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		name, httpAddr, redis string
		code                  int
		stderr                string
	}{
		{name: "stopped while connecting", httpAddr: "127.0.0.1:0", code: exitOK, stderr: "stopped while connecting"},
		{name: "HTTP address in use", httpAddr: busy.Addr().String(), code: exitConfig, stderr: "MATERIALIZER_HTTP_ADDR"},
		{name: "Redis URL invalid", httpAddr: "", redis: "http://not-redis", code: exitConfig, stderr: "MATERIALIZER_REDIS_URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cleanConfigEnv(t)
			t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=2000")
			t.Setenv("MATERIALIZER_HTTP_ADDR", c.httpAddr)
			if c.redis != "" {
				t.Setenv("MATERIALIZER_REDIS_URL", c.redis)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(&interruptedError{syscall.SIGTERM})
			r := runCLICtx(ctx, "run")
			if r.code != c.code || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d, want %d with %q on stderr\n%v", r.code, c.code, c.stderr, r)
			}
			if strings.Contains(r.stderr, "partial output removed") {
				t.Errorf("run reported as an interrupted one-shot command\n%v", r)
			}
		})
	}
}

// TestInterruptedSaysWhatWasRemoved: an interrupted one-shot command says
// it removed partial output only when it was writing one (status and
// pending write nothing). Seen failing with the old fixed message
// ("stopped (no report, partial output removed)" for every command).
func TestInterruptedSaysWhatWasRemoved(t *testing.T) {
	cleanConfigEnv(t)
	dir := cleanVectorDump(t)
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args    []string
		removed bool
	}{
		{[]string{"status"}, false},
		{[]string{"pending"}, false},
		{[]string{"verify", "--dump", dir}, false},
		{[]string{"rebuild", "--dump", dir, "--out", out}, true},
		{[]string{"seed", "--out", out}, true},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=2000")
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(&interruptedError{syscall.SIGINT})
			r := runCLICtx(ctx, c.args...)
			if r.code != 130 || !strings.Contains(r.stderr, "interrupted by SIGINT; stopped (no report") {
				t.Fatalf("%v: want exit 130, interrupted\n%v", c.args, r)
			}
			if said := strings.Contains(r.stderr, "partial output"); said != c.removed {
				t.Errorf("%v: speaks of partial output: %v, want %v\n%v", c.args, said, c.removed, r)
			}
			if c.removed && !strings.Contains(r.stderr, "partial output for "+out+" removed") {
				t.Errorf("%v: does not name the output whose partial was removed\n%v", c.args, r)
			}
			if exists(out) || len(partials(out)) > 0 {
				t.Errorf("%v: output left at %s", c.args, out)
			}
		})
	}
}
