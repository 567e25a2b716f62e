package main

import (
	"fmt"
	"io"

	"github.com/normal-oj/noj-materializer/mongodb"
)

// sayConnecting tells the user, on stderr and before the driver starts
// waiting, which server a command connects to (the redacted URI) and how
// long it may wait for one: the driver's server-selection timeout, but
// never more than the command's own connection deadline (openTimeout),
// which also bounds serverSelectionTimeoutMS=0 (the driver's "no limit":
// internal/csot/csot.go:73-82 adds no deadline for 0).
func sayConnecting(w io.Writer, cfg *Config) {
	var wait string
	switch d, set := mongodb.ServerSelectionTimeout(cfg.MongoDBURI); {
	case set && (d == 0 || d > openTimeout):
		wait = fmt.Sprintf("waits up to %s for a server, the command's connection deadline (serverSelectionTimeoutMS=%d lifts only the driver's own limit)", openTimeout, d.Milliseconds())
	case !set:
		wait = fmt.Sprintf("waits up to %s for a server, the driver's default server-selection timeout", d)
	default:
		wait = fmt.Sprintf("waits up to %s for a server, serverSelectionTimeoutMS", d)
	}
	fmt.Fprintf(w, "connecting to %s (database %s; %s)\n", mongodb.Redact(cfg.MongoDBURI), cfg.Database, wait)
}

// connectError is a failure to reach MongoDB with the one-line hint
// mongodb.ConnectHint found for it. errors.Is and errors.As see the driver's error.
type connectError struct {
	err  error
	hint string
}

func (e *connectError) Error() string { return e.err.Error() + "\n" + e.hint }
func (e *connectError) Unwrap() error { return e.err }

// withConnectHint returns err with a hint line when mongodb.ConnectHint
// has one.
func withConnectHint(uri string, err error) error {
	if h := mongodb.ConnectHint(uri, err); h != "" {
		return &connectError{err: err, hint: h}
	}
	return err
}
