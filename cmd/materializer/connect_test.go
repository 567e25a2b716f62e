package main

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
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/normal-oj/noj-materializer/mongodb"
)

// selectionError builds the error the driver returns when server
// selection gives up, wrapped the way mongodb.Open and openMongo wrap it.
func selectionError(kind description.TopologyKind, servers ...description.Server) error {
	sse := topology.ServerSelectionError{Wrapped: context.DeadlineExceeded, Desc: description.Topology{Kind: kind, Servers: servers}}
	return fmt.Errorf("MATERIALIZER_MONGODB_URI: mongodb mongodb://h: ping: %w", sse)
}

func server(addr string, kind description.ServerKind, lastErr error) description.Server {
	return description.Server{Addr: address.Address(addr), Kind: kind, LastError: lastErr}
}

// TestConnectHint classifies constructed server-selection errors (the
// shapes x/mongo/driver/topology produces, see connectHint) into one hint
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
			h := connectHint(c.uri, c.err)
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
			err := withConnectHint(c.uri, c.err)
			if !errors.Is(err, c.err) || !strings.HasSuffix(err.Error(), "\n"+h) {
				t.Errorf("wrapped error %q: want the driver's error then the hint line", err)
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
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			db, err := mongodb.Open(ctx, mongodb.Config{URI: c.uri})
			if err == nil {
				_ = db.Close(ctx)
				t.Skip("something answered")
			}
			h := connectHint(c.uri, err)
			if !strings.Contains(h, c.want) {
				t.Fatalf("error %v\nhint %q, want it to contain %q", err, h, c.want)
			}
		})
	}
}

// TestSayConnecting: the notice names the redacted URI, never the password.
func TestSayConnecting(t *testing.T) {
	var b strings.Builder
	sayConnecting(&b, &Config{MongoDBURI: "mongodb://u:s3cret@db:27017/?replicaSet=rs0", Database: "normal-oj"})
	if got := b.String(); !strings.Contains(got, "connecting to mongodb://u:xxxxx@db:27017/?replicaSet=rs0") || strings.Contains(got, "s3cret") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("notice %q", got)
	}
}

// TestCommandsSayWhereAndHint: every command that connects names the
// redacted URI on stderr before it waits, and, when nothing answers, ends
// with the hint line.
func TestCommandsSayWhereAndHint(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://u:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=300")
	for _, args := range [][]string{{"run"}, {"status"}, {"verify"}, {"rebuild"}, {"rebuild", "--dry-run"},
		{"seed", "--users", "1", "--submissions", "1"}, {"explain", "--user", "u", "--problem", "1"}} {
		r := runCLI(t, args...)
		if r.code != exitFail {
			t.Errorf("%v: want exit 1\n%v", args, r)
		}
		say, hintLine := "connecting to mongodb://u:xxxxx@127.0.0.1:1/", "\nhint: nothing answers at 127.0.0.1:1"
		if args[0] == "run" {
			say = `"uri":"mongodb://u:xxxxx@127.0.0.1:1/?serverSelectionTimeoutMS=300","time"` // the log line "connecting to MongoDB"
			hintLine = `"hint":"hint: nothing answers at 127.0.0.1:1`                          // run's fatal error is a log line too
		}
		at, hint := strings.Index(r.stderr, say), strings.Index(r.stderr, hintLine)
		if at < 0 || hint < 0 || at > hint {
			t.Errorf("%v: want %q, then the hint line, on stderr\n%v", args, say, r)
		}
		if strings.Contains(r.output(), "s3cret") {
			t.Errorf("%v: the password is printed\n%v", args, r)
		}
	}
}

// TestSelectionTimeout: the wait the notice announces is the URI's
// serverSelectionTimeoutMS as the driver reads it, else 30 s.
func TestSelectionTimeout(t *testing.T) {
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
		d, set := selectionTimeout(c.uri)
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
	var b strings.Builder
	sayConnecting(&b, &Config{MongoDBURI: "mongodb://db/?serverSelectionTimeoutMS=2500", Database: "x"})
	if !strings.Contains(b.String(), "waits up to 2.5s for a server, serverSelectionTimeoutMS") {
		t.Errorf("notice %q", b.String())
	}
}
