package main

import (
	"context"
	"net"
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
