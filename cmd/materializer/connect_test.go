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

	"go.mongodb.org/mongo-driver/v2/mongo/address"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/normal-oj/noj-materializer/mongodb"
)

// TestWithConnectHint: a failure to connect that mongodb.ConnectHint has a
// hint for is the driver's error (errors.Is sees it), then the hint line;
// any other error is returned as it is.
func TestWithConnectHint(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	sse := topology.ServerSelectionError{Wrapped: context.DeadlineExceeded, Desc: description.Topology{
		Servers: []description.Server{{Addr: address.Address("127.0.0.1:1"), Kind: description.Unknown, LastError: refused}}}}
	uri := "mongodb://127.0.0.1:1/"
	selErr := fmt.Errorf("MATERIALIZER_MONGODB_URI: mongodb://h: ping: %w", sse)
	h := mongodb.ConnectHint(uri, selErr)
	if h == "" {
		t.Fatal("no hint for a refused connection")
	}
	err := withConnectHint(uri, selErr)
	if !errors.Is(err, selErr) || !strings.HasSuffix(err.Error(), "\n"+h) {
		t.Errorf("wrapped error %q: want the driver's error then the hint line", err)
	}
	other := errors.New("auth failed")
	if err := withConnectHint(uri, other); err != other {
		t.Errorf("another error became %q", err)
	}
}

// TestSayConnecting: the notice names the redacted URI, never the password.
func TestSayConnecting(t *testing.T) {
	var b strings.Builder
	sayConnecting(&b, &Config{MongoDBURI: "mongodb://u:s3cret@db:27017/?replicaSet=rs0", Database: "normal-oj"})
	if got := b.String(); !strings.Contains(got, "connecting to mongodb://u:xxxxx@db:27017/?replicaSet=rs0") || strings.Contains(got, "s3cret") || !strings.HasSuffix(got, "\n") {
		t.Fatalf("notice %q", got)
	}
	// The wait it announces is the URI's serverSelectionTimeoutMS
	// (mongodb.ServerSelectionTimeout).
	b.Reset()
	sayConnecting(&b, &Config{MongoDBURI: "mongodb://db/?serverSelectionTimeoutMS=2500", Database: "x"})
	if !strings.Contains(b.String(), "waits up to 2.5s for a server, serverSelectionTimeoutMS") {
		t.Errorf("notice %q", b.String())
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
			hintLine = `"hint":"nothing answers at 127.0.0.1:1`                                // run's fatal error is a log line too
		}
		at, hint := strings.Index(r.stderr, say), strings.Index(r.stderr, hintLine)
		if at < 0 || hint < 0 || at > hint {
			t.Errorf("%v: want %q, then the hint line, on stderr\n%v", args, say, r)
		}
		if strings.Contains(r.output(), "s3cret") {
			t.Errorf("%v: the password is printed\n%v", args, r)
		}
		if strings.Contains(r.stderr, "mongodb mongodb://") {
			t.Errorf("%v: the error says \"mongodb\" before the URI, which says it again\n%v", args, r)
		}
	}
}
