package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/address"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
	drivertopology "go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// selectionError builds the error the driver returns when server
// selection gives up, wrapped the way Open wraps it.
func selectionError(kind description.TopologyKind, servers ...description.Server) error {
	sse := drivertopology.ServerSelectionError{Wrapped: context.DeadlineExceeded, Desc: description.Topology{Kind: kind, Servers: servers}}
	return fmt.Errorf("mongodb://h: ping: %w", sse)
}

func server(addr string, kind description.ServerKind, lastErr error) description.Server {
	return description.Server{Addr: address.Address(addr), Kind: kind, LastError: lastErr}
}

// TestConnectHint classifies constructed server-selection errors (the
// shapes x/mongo/driver/topology produces, see ConnectHint) into one hint
// line naming the cause and the fix.
func TestConnectHint(t *testing.T) {
	dnsErr := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "mongo", IsNotFound: true}}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cases := []struct {
		name string
		uri  string
		err  error
		want []string // substrings of the hint; nil: no hint
	}{
		{"member name does not resolve (the demo from the host)", "mongodb://127.0.0.1:27017/",
			selectionError(description.TopologyKindReplicaSetNoPrimary, server("mongo:27017", description.Unknown, dnsErr)),
			[]string{"mongo:27017", "does not resolve", "directConnection=true", demoURI}},
		{"wrong replica set name", "mongodb://db:27017/?replicaSet=rs1",
			selectionError(description.TopologyKindReplicaSetNoPrimary),
			// A replica set is fixed by its URI, not by a direct
			// connection (which never follows a fail-over).
			[]string{`replica set "rs1"`, "replicaSet=", "rs.status().set"}},
		{"wrong replica set name, direct", "mongodb://db:27017/?replicaSet=rs1&directConnection=true",
			selectionError(description.TopologyKindSingle, server("db:27017", description.Unknown, nil)),
			[]string{"db:27017", `replica set "rs1"`, "replicaSet="}},
		{"nothing listens", "mongodb://127.0.0.1:1/",
			selectionError(description.TopologyKind(0), server("127.0.0.1:1", description.Unknown, refused)),
			[]string{"nothing answers at 127.0.0.1:1"}},
		{"dial timeout on two hosts", "mongodb://a:1,b:2/",
			selectionError(description.TopologyKind(0), server("a:1", description.Unknown, timeout), server("b:2", description.Unknown, refused)),
			[]string{"nothing answers at a:1, b:2"}},
		{"no primary", "mongodb://a:1,b:2/?replicaSet=rs0",
			selectionError(description.TopologyKindReplicaSetNoPrimary, server("a:1", description.ServerKindRSSecondary, nil), server("b:2", description.ServerKindRSSecondary, nil)),
			[]string{"none is primary", "rs.initiate()"}},
		{"other selection failure", "mongodb://a:1/",
			selectionError(description.TopologyKindSharded, server("a:1", description.ServerKindMongos, nil)),
			[]string{"no suitable server", "replicaSet=<set name>"}},
		{"not a selection error", "mongodb://a:1/", errors.New("auth failed"), nil},
		{"nil", "mongodb://a:1/", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := ConnectHint(c.uri, c.err)
			if c.want == nil {
				if h != "" {
					t.Fatalf("hint %q, want none", h)
				}
				return
			}
			if strings.Contains(h, "\n") || !strings.HasPrefix(h, "hint: ") {
				t.Errorf("hint is not one line starting with \"hint: \": %q", h)
			}
			for _, w := range c.want {
				if !strings.Contains(h, w) {
					t.Errorf("hint %q does not contain %q", h, w)
				}
			}
		})
	}
}

// TestConnectHintRealDriver opens, with the real driver, a host name that
// cannot resolve and a port nothing listens on, and checks the hint the
// driver's own error leads to.
func TestConnectHintRealDriver(t *testing.T) {
	cases := []struct {
		uri, want string
	}{
		{"mongodb://materializer-test-no-such-host.invalid:27017/?serverSelectionTimeoutMS=1500", "does not resolve"},
		{"mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500", "nothing answers at 127.0.0.1:1"},
	}
	for _, c := range cases {
		t.Run(c.uri, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, err := Open(ctx, Config{URI: c.uri})
			if err == nil {
				_ = db.Close(ctx)
				t.Skip("something answered")
			}
			h := ConnectHint(c.uri, err)
			if !strings.Contains(h, c.want) {
				t.Fatalf("error %v\nhint %q, want it to contain %q", err, h, c.want)
			}
		})
	}
}

// TestServerSelectionTimeout: the URI's serverSelectionTimeoutMS as the
// driver reads it, else 30 s.
func TestServerSelectionTimeout(t *testing.T) {
	for _, c := range []struct {
		uri  string
		want time.Duration
		set  bool
	}{
		{"mongodb://db:27017/", 30 * time.Second, false},
		{"mongodb://db:27017/?replicaSet=rs0", 30 * time.Second, false},
		{"mongodb://db:27017/?replicaSet=rs0&serverSelectionTimeoutMS=5000", 5 * time.Second, true},
		{"mongodb://db/?SERVERSELECTIONTIMEOUTMS=100;replicaSet=rs0", 100 * time.Millisecond, true},
		{"mongodb://db/?serverSelectionTimeoutMS=100&serverSelectionTimeoutMS=200", 200 * time.Millisecond, true},
		{"mongodb://db/?serverSelectionTimeoutMS=0", 0, true},
		{"mongodb://u:p%3Fx@db/?serverSelectionTimeoutMS=1500", 1500 * time.Millisecond, true},
		{"mongodb+srv://cluster.example.com/?serverSelectionTimeoutMS=2000", 2 * time.Second, true},
	} {
		d, set := ServerSelectionTimeout(c.uri)
		if d != c.want || set != c.set {
			t.Errorf("%s: %v, %v; want %v, %v", c.uri, d, set, c.want, c.set)
		}
		// The driver agrees where it can parse without DNS.
		if strings.HasPrefix(c.uri, "mongodb://") {
			cs, err := connstring.Parse(c.uri)
			if err != nil {
				t.Fatalf("%s: %v", c.uri, err)
			}
			if cs.ServerSelectionTimeoutSet != set || (set && cs.ServerSelectionTimeout != d) {
				t.Errorf("%s: the driver reads %v (set %v)", c.uri, cs.ServerSelectionTimeout, cs.ServerSelectionTimeoutSet)
			}
		}
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
		h := ConnectHint(c.uri, c.err)
		if strings.Contains(h, "directConnection=true") {
			t.Errorf("%s: hint %q recommends directConnection=true for a replica set", c.uri, h)
		}
	}
}

// TestConnectHintOldServer: the driver's error for
// a MongoDB 4.2 server (wire version 8, x/mongo/driver/topology/fsm.go:151)
// gets a hint naming the upgrade section of the operations guide.
func TestConnectHintOldServer(t *testing.T) {
	err := fmt.Errorf("mongodb://db:27017/: ping: %w",
		errors.New("server at db:27017 reports wire version 8, but this version of the Go driver requires at least 9 (MongoDB 4.4)"))
	h := ConnectHint("mongodb://db:27017/", err)
	for _, w := range []string{"db:27017", "wire version 8", "4.4", upgradeDocs} {
		if !strings.Contains(h, w) {
			t.Errorf("hint %q does not contain %q", h, w)
		}
	}
}
