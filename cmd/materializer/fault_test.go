package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestRunFatalErrorIsJSON: a fatal error of `run`
// (here: nothing answers at the URI) is one more JSON log line, with the
// connection hint in a field of its own, not plain text among the JSON
// lines; the exit status stays 1.
func TestRunFatalErrorIsJSON(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300")
	r := runCLI(t, "run")
	if r.code != exitFail {
		t.Fatalf("want exit 1\n%v", r)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	var last map[string]any
	for _, l := range lines {
		last = nil
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("stderr line %q is not JSON\n%v", l, r)
		}
	}
	if last["level"] != "error" || !strings.Contains(fmt.Sprint(last["error"]), "127.0.0.1:1") {
		t.Errorf("last line %v: want level error and the error", last)
	}
	if h := fmt.Sprint(last["hint"]); !strings.HasPrefix(h, "nothing answers at 127.0.0.1:1") {
		t.Errorf("last line %v: want the hint in a field", last)
	}
}

// TestSayConnectingTellsTheTruth: with
// serverSelectionTimeoutMS=0 the driver waits without limit
// (internal/csot/csot.go:77) but the command's own connection deadline
// (openTimeout) still ends the wait: the notice says so, not "no timeout".
func TestSayConnectingTellsTheTruth(t *testing.T) {
	for _, c := range []struct{ uri, want string }{
		{"mongodb://db/?serverSelectionTimeoutMS=0", "waits up to 30s for a server, the command's connection deadline (serverSelectionTimeoutMS=0"},
		{"mongodb://db/?serverSelectionTimeoutMS=120000", "waits up to 30s for a server, the command's connection deadline (serverSelectionTimeoutMS=120000"},
		{"mongodb://db/?serverSelectionTimeoutMS=2500", "waits up to 2.5s for a server, serverSelectionTimeoutMS"},
		{"mongodb://db/", "waits up to 30s for a server, the driver's default"},
	} {
		var b strings.Builder
		sayConnecting(&b, &Config{MongoDBURI: c.uri, Database: "x"})
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%s: notice %q, want %q", c.uri, b.String(), c.want)
		}
	}
}

// TestHTTPAddrDefault: the default listen address
// is not Prometheus's own :9090 and not every interface.
func TestHTTPAddrDefault(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:27017/?replicaSet=rs0")
	c, err := loadConfig(true)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9464" {
		t.Errorf("HTTP_ADDR default %q, want 127.0.0.1:9464 (loopback, clear of Prometheus's 9090)", c.HTTPAddr)
	}
}

// TestRunErrorNamesHistoryLostSetting: the engine's exit on lost history
// names its policy abstractly; run's error names the variable that chose
// it and the value that would rebuild instead.
func TestRunErrorNamesHistoryLostSetting(t *testing.T) {
	f := &watch.Fault{Phase: watch.PhaseStreamNext, Class: watch.HistoryLost, Action: watch.ActExit, Err: watch.ErrHistoryLost}
	err := runError(fmt.Errorf("lease epoch 3: %w", fmt.Errorf("resume token no longer in the oplog (history-lost policy: exit): %w", f)))
	if !errors.Is(err, watch.ErrHistoryLost) || !strings.Contains(err.Error(), "MATERIALIZER_HISTORY_LOST=exit") || !strings.Contains(err.Error(), "rebuild") {
		t.Errorf("run's error: %v", err)
	}
	other := errors.New("other")
	if runError(other) != other {
		t.Error("another error is changed")
	}
}
