package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo/address"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
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
	if h := fmt.Sprint(last["hint"]); !strings.HasPrefix(h, "hint: nothing answers at 127.0.0.1:1") {
		t.Errorf("last line %v: want the hint in a field", last)
	}
}

// TestConnectHintOldServer: the driver's error for
// a MongoDB 4.2 server (wire version 8, x/mongo/driver/topology/fsm.go:151)
// gets a hint naming the upgrade section of the operations guide.
func TestConnectHintOldServer(t *testing.T) {
	err := fmt.Errorf("MATERIALIZER_MONGODB_URI: mongodb mongodb://db:27017/: ping: %w",
		errors.New("server at db:27017 reports wire version 8, but this version of the Go driver requires at least 9 (MongoDB 4.2)"))
	h := connectHint("mongodb://db:27017/", err)
	for _, w := range []string{"db:27017", "wire version 8", "4.4", upgradeDocs} {
		if !strings.Contains(h, w) {
			t.Errorf("hint %q does not contain %q", h, w)
		}
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

// TestConnectHintNoDirectConnectionAdvice: for a
// real replica set the hints point to replicaSet=, and name
// directConnection=true only as the demo's one-node exception.
func TestConnectHintNoDirectConnectionAdvice(t *testing.T) {
	for _, c := range []struct {
		uri string
		err error
	}{
		{"mongodb://db:27017/?replicaSet=rs1", selectionError(description.TopologyKindReplicaSetNoPrimary)},
		{"mongodb://a:1,b:2/?replicaSet=rs0", selectionError(description.TopologyKindReplicaSetNoPrimary,
			description.Server{Addr: address.Address("a:1"), Kind: description.ServerKindRSSecondary},
			description.Server{Addr: address.Address("b:2"), Kind: description.ServerKindRSSecondary})},
	} {
		h := connectHint(c.uri, c.err)
		if strings.Contains(h, "directConnection=true") {
			t.Errorf("%s: hint %q recommends directConnection=true for a replica set", c.uri, h)
		}
	}
}
