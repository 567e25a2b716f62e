package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"syscall"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
	drivertopology "go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// demoURI is the connection string the project's messages suggest for the
// demo from its host: the demo's one-node replica set, published on
// 127.0.0.1:27017, whose member calls itself mongo:27017 (a name only the
// compose network resolves), so from the host the driver must talk to the
// seed directly. A direct connection never follows a fail-over, which a
// one-node set does not have; for a real replica set the messages point
// to the replica set URI (replicaSet=...) instead.
const demoURI = "mongodb://127.0.0.1:27017/?directConnection=true"

// upgradeDocs is where the operations guide explains upgrading a
// MongoDB older than 4.4 (what stock Normal-OJ runs: 4.2).
const upgradeDocs = "docs/install.md#upgrading-42--44-and-further"

// wireVersionError matches the driver's error for a server too old for it
// (x/mongo/driver/topology/fsm.go:151-158: "server at %s reports wire
// version %d, but this version of the Go driver requires at least %d
// (MongoDB %s)"), which server selection returns as is
// (topology.go:718-720), a plain error with no type to match.
var wireVersionError = regexp.MustCompile(`server at (\S+) reports wire version (\d+), but this version of the Go driver requires at least`)

// ConnectHint names the likely cause of a server-selection failure and its
// fix, in one line, or returns "" for any other error. A server older than
// the driver supports (wire version below 9: MongoDB 4.2 or older) gets
// the upgrade section of the operations guide. Otherwise it reads the
// driver's topology.ServerSelectionError (x/mongo/driver/topology/
// errors.go:67 in mongo-driver v2.10.0: the topology description when
// selection gave up, each server with its Addr, Kind and LastError, the
// heartbeat's error), not its text:
//
//   - a server whose last error is a DNS failure: a member's host name does
//     not resolve from here. With a replica set, the driver replaces the
//     seed list by the members' names from the replica set config (fsm.go,
//     updateRSFromPrimary / updateRSWithoutPrimary), e.g. the demo's
//     mongo:27017, so a reachable seed is not enough;
//   - a replica-set topology with no server left: the driver removes a
//     server whose setName differs from the URI's replicaSet, and a
//     standalone when replicaSet is set (fsm.go:186, :351, :395, :417);
//     with directConnection=true it removes a standalone too (fsm.go:233-236,
//     a Single topology with no server) but keeps a member of another set
//     as Unknown with no error (fsm.go:248);
//   - servers that refused or timed out: nothing answers at those
//     addresses;
//   - members known but none primary: the set has no primary.
func ConnectHint(uri string, err error) string {
	if err == nil {
		return ""
	}
	if m := wireVersionError.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Sprintf("hint: the server at %s is older than MongoDB 4.4 (wire version %s; 8 is MongoDB 4.2, what stock Normal-OJ runs): the materializer needs 4.4 or newer; upgrade it as %s describes", m[1], m[2], upgradeDocs)
	}
	var sse drivertopology.ServerSelectionError
	if !errors.As(err, &sse) {
		return ""
	}
	desc := sse.Desc
	for _, s := range desc.Servers {
		var dns *net.DNSError
		if s.LastError != nil && errors.As(s.LastError, &dns) {
			host := s.Addr.String()
			return fmt.Sprintf("hint: the host name %s does not resolve from here (%v): a replica set is reached by the member names of its config (rs.conf()), such as the demo's mongo:27017; "+
				"make the member names resolve here (DNS, /etc/hosts, or run in the same network). Only for a one-node set such as the demo may a command connect to its one address with directConnection=true (from the demo's host: %s): a direct connection never follows a fail-over", host, dns.Err, demoURI)
		}
	}
	setName := URIOption(uri, "replicaSet")
	replicaSet := desc.Kind == description.TopologyKindReplicaSet || desc.Kind == description.TopologyKindReplicaSetNoPrimary ||
		desc.Kind == description.TopologyKindReplicaSetWithPrimary
	if len(desc.Servers) == 0 && (replicaSet || setName != "") {
		return fmt.Sprintf("hint: no server answered as a member of replica set %q: the URI's replicaSet differs from the server's set name (rs.status().set), or the server is a standalone; "+
			"fix replicaSet= (a standalone must become a replica set: docs/install.md#converting-the-standalone-to-a-one-node-replica-set)", setName)
	}
	if setName != "" && desc.Kind == description.TopologyKindSingle && len(desc.Servers) == 1 &&
		desc.Servers[0].Kind == description.Unknown && desc.Servers[0].LastError == nil {
		return fmt.Sprintf("hint: %s answers but not as a member of replica set %q: the URI's replicaSet differs from the server's set name (rs.status().set), or the server is a standalone; "+
			"fix or drop replicaSet= (the demo from its host: %s)", desc.Servers[0].Addr, setName, demoURI)
	}
	unreachable := 0
	var addrs []string
	for _, s := range desc.Servers {
		addrs = append(addrs, s.Addr.String())
		if s.LastError == nil {
			continue
		}
		var ne net.Error
		if errors.Is(s.LastError, syscall.ECONNREFUSED) || errors.As(s.LastError, &ne) && ne.Timeout() || errors.Is(s.LastError, context.DeadlineExceeded) {
			unreachable++
		}
	}
	if len(desc.Servers) > 0 && unreachable == len(desc.Servers) {
		return fmt.Sprintf("hint: nothing answers at %s: check that MongoDB runs and that this host can reach that address and port (the demo from its host: %s)",
			strings.Join(addrs, ", "), demoURI)
	}
	if desc.Kind == description.TopologyKindReplicaSetNoPrimary && len(desc.Servers) > 0 {
		return fmt.Sprintf("hint: replica set members answer (%s) but none is primary: a new set needs rs.initiate(), otherwise see rs.status() (the commands that write need a primary)", strings.Join(addrs, ", "))
	}
	return fmt.Sprintf("hint: no suitable server was found (topology %s); check the URI's hosts and replicaSet=<set name> (the demo from its host: %s)", desc.Kind, demoURI)
}
