package mongodb

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

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

// ServerSelectionTimeout is how long the driver waits to select a server
// for uri, and whether the URI sets it: serverSelectionTimeoutMS read as
// the driver reads it (options split on '&' or ';', key case-insensitive,
// the last one winning: x/mongo/driver/connstring/connstring.go:1084 and
// :555 in mongo-driver v2.10.0; 0 means no limit, csot.go:77), else the
// default of 30 s (x/mongo/driver/topology/topology_options.go:31). A
// mongodb+srv TXT record cannot set it, so no DNS lookup is needed.
func ServerSelectionTimeout(uri string) (time.Duration, bool) {
	d, set := 30*time.Second, false
	for _, o := range uriOptions(uri) {
		if !strings.EqualFold(o.key, "serverSelectionTimeoutMS") {
			continue
		}
		if n, err := strconv.Atoi(o.value); err == nil && n >= 0 {
			d, set = time.Duration(n)*time.Millisecond, true
		}
	}
	return d, set
}

// uriOption is one option of a connection string, key and value
// unescaped.
type uriOption struct{ key, value string }

// uriOptions returns uri's options in order, read as the driver reads
// them (x/mongo/driver/connstring/connstring.go in mongo-driver v2.10.0):
// the user information ends at the '@' before the hosts (:927; it may hold
// a '?'), the options follow the first '?' after it (:1071-1084), split
// at '&' or ';', each key and value unescaped (:337-345). A pair the
// driver would refuse (no '=', bad escape) is skipped: CheckURI reports
// it.
func uriOptions(uri string) []uriOption {
	_, rest, _ := strings.Cut(uri, "://")
	authority := rest
	if i := strings.Index(rest, "/"); i >= 0 {
		authority = rest[:i]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	_, query, ok := strings.Cut(rest, "?")
	if !ok {
		return nil
	}
	var opts []uriOption
	for _, pair := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			continue
		}
		k, kerr := url.QueryUnescape(k)
		v, verr := url.QueryUnescape(v)
		if kerr != nil || verr != nil {
			continue
		}
		opts = append(opts, uriOption{k, v})
	}
	return opts
}

// URIOption returns the value of a connection-string option as the driver
// reads it (uriOptions; key without case, the last one winning), or "".
// Options a mongodb+srv TXT record sets (authSource, replicaSet,
// loadBalanced: x/mongo/driver/dns/dns.go:138-142) are not seen.
func URIOption(uri, name string) string {
	v := ""
	for _, o := range uriOptions(uri) {
		if strings.EqualFold(o.key, name) {
			v = o.value // the last one wins, as in the driver (connstring.go:331)
		}
	}
	return v
}

// URIOptionError is a connection-string option CheckURIOptions refuses.
type URIOptionError struct {
	Option string // as the adapter knows it: replicaSet, timeoutMS
	Value  string
	Reason string
}

func (e *URIOptionError) Error() string { return e.Reason }

// CheckURIOptions refuses connection-string options the daemon cannot
// work with, read as the driver reads them (uriOptions), with a
// *URIOptionError:
//
//   - replicaSet with an empty value: the driver takes it as no set name
//     and connects to whatever the host is, where the operator meant to
//     name the set;
//   - timeoutMS: it gives every command a deadline, index builds included,
//     which the daemon runs without one (docs/install.md, Indexes); its
//     own deadlines are Config.WriteTimeout and the lease.
func CheckURIOptions(uri string) error {
	for _, o := range uriOptions(uri) {
		if strings.EqualFold(o.key, "timeoutMS") {
			return &URIOptionError{Option: "timeoutMS", Value: o.value,
				Reason: fmt.Sprintf("timeoutMS=%s is not supported: the daemon bounds each command itself, and a non-zero timeoutMS would bound the index builds too (docs/install.md, Indexes); remove it", o.value)}
		}
	}
	// The driver keeps the last replicaSet (connstring.go:509).
	if rs := URIOption(uri, "replicaSet"); rs == "" && hasURIOption(uri, "replicaSet") {
		return &URIOptionError{Option: "replicaSet", Value: rs,
			Reason: "empty replicaSet=: give the replica set's name (rs.conf()._id, e.g. replicaSet=rs0) or leave the option out"}
	}
	return nil
}

func hasURIOption(uri, name string) bool {
	for _, o := range uriOptions(uri) {
		if strings.EqualFold(o.key, name) {
			return true
		}
	}
	return false
}

// CheckDatabaseName refuses a database name MongoDB would refuse (its
// manual's naming restrictions, "MongoDB Limits and Thresholds"): empty,
// 64 bytes or more, or holding one of / \ . space " $ or the null
// character, forbidden on every platform. "a.b" would otherwise name the
// database "a" and a collection prefix "b." on the server, and a dump
// directory a.b/ that mongodump never writes.
func CheckDatabaseName(name string) error {
	switch {
	case name == "":
		return errors.New("a MongoDB database name must not be empty")
	case len(name) >= 64:
		return fmt.Errorf("a MongoDB database name must have fewer than 64 bytes (this one has %d)", len(name))
	}
	if i := strings.IndexAny(name, "/\\. \"$\x00"); i >= 0 {
		return fmt.Errorf("a MongoDB database name cannot contain %q (none of / \\ . space \" $ or NUL)", name[i])
	}
	return nil
}
