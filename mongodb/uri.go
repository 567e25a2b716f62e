package mongodb

import (
	"errors"
	"fmt"
	"net"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// clientOptions returns the client options Open connects with: uri's
// options, with reads sent to the primary whatever the URI says.
func clientOptions(uri string) *options.ClientOptions {
	return options.Client().ApplyURI(uri).SetReadPreference(readpref.Primary())
}

// CheckURI reports whether the driver accepts uri, without connecting. It
// validates the options Open connects with, as mongo.Connect would:
// ApplyURI parses and validates the string (connstring.ParseAndValidate,
// mongo/options/clientoptions.go:350; its error is kept at :750), and
// ClientOptions.Validate (:576) adds the checks mongo.Connect otherwise
// makes only when it builds the topology
// (x/mongo/driver/topology/topology_options.go:207): heartbeatFrequencyMS
// of at least 500 ms, minPoolSize <= maxPoolSize, a direct connection to
// one host, and so on. The error names no password: it is scrubbed like
// Open's.
//
// A mongodb+srv URI is resolved at parse time (its SRV and TXT records,
// x/mongo/driver/connstring/connstring.go:1002-1025): a failed DNS lookup
// (*net.DNSError) is not a malformed URI but an unreachable server, so
// CheckURI accepts it and leaves Open to report it.
func CheckURI(uri string) error {
	err := clientOptions(uri).Validate()
	var dnsErr *net.DNSError
	if err == nil || errors.As(err, &dnsErr) {
		return nil
	}
	return scrub(fmt.Errorf("%s: %w", Redact(uri), err), uriSecrets(uri))
}
