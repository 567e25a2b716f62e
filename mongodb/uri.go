package mongodb

import (
	"errors"
	"fmt"
	"net"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

// CheckURI reports whether the driver can parse and validate uri, without
// connecting: it runs the same connstring.ParseAndValidate that
// options.Client().ApplyURI runs (mongo/options/clientoptions.go:350,
// stored as the options' error at :750 and returned by mongo.Connect
// through topology.NewConfig's opts.Validate,
// x/mongo/driver/topology/topology_options.go:207). The error names no
// password: it is scrubbed like Open's.
//
// A mongodb+srv URI is resolved at parse time (its SRV and TXT records,
// x/mongo/driver/connstring/connstring.go:1002-1025): a failed DNS lookup
// (*net.DNSError) is not a malformed URI but an unreachable server, so
// CheckURI accepts it and leaves Open to report it.
func CheckURI(uri string) error {
	_, err := connstring.ParseAndValidate(uri)
	var dnsErr *net.DNSError
	if err == nil || errors.As(err, &dnsErr) {
		return nil
	}
	return scrub(fmt.Errorf("%s: %w", Redact(uri), err), uriSecrets(uri))
}
