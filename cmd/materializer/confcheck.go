package main

import (
	"fmt"
	"net/url"
	"strings"
)

// checkDatabaseName refuses a MATERIALIZER_DATABASE MongoDB would refuse
// (its manual's naming restrictions, "MongoDB Limits and Thresholds"):
// empty, 64 bytes or more, or holding one of / \ . space " $ or the null
// character, forbidden on every platform. "a.b" would otherwise name the
// database "a" and a collection prefix "b." on the server, and a dump
// directory a.b/ that mongodump never writes.
func checkDatabaseName(name string) error {
	const v = envPrefix + "_DATABASE"
	switch {
	case name == "":
		return &configError{v + " must not be empty"}
	case len(name) >= 64:
		return &configError{fmt.Sprintf("%s=%q: a MongoDB database name has fewer than 64 bytes", v, name)}
	}
	if i := strings.IndexAny(name, "/\\. \"$\x00"); i >= 0 {
		return &configError{fmt.Sprintf("%s=%q: a MongoDB database name cannot contain %q (none of / \\ . space \" $ or NUL)", v, name, name[i])}
	}
	return nil
}

// checkURIOptions refuses connection-string options the daemon cannot
// work with, read as the driver reads them (x/mongo/driver/connstring:
// options after the first '?' split at '&' or ';', keys and values
// unescaped, keys without case):
//
//   - replicaSet with an empty value: the driver takes it as no set name
//     and connects to whatever the host is, where the operator meant to
//     name the set;
//   - timeoutMS: it gives every command a deadline, index builds included,
//     which the daemon runs without one (docs/install.md, Indexes); its
//     own deadlines are MATERIALIZER_WRITE_TIMEOUT and the lease.
func checkURIOptions(uri string) error {
	_, rest, _ := strings.Cut(uri, "://")
	authority := rest
	if i := strings.Index(rest, "/"); i >= 0 {
		authority = rest[:i]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		rest = rest[i+1:] // the user information may hold a '?'
	}
	_, query, ok := strings.Cut(rest, "?")
	if !ok {
		return nil
	}
	for _, pair := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' }) {
		k, val, _ := strings.Cut(pair, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if uv, err := url.QueryUnescape(val); err == nil {
			val = uv
		}
		switch strings.ToLower(k) {
		case "replicaset":
			if val == "" {
				return &configError{envPrefix + "_MONGODB_URI has an empty replicaSet=: give the replica set's name (rs.conf()._id, e.g. replicaSet=rs0) or leave the option out"}
			}
		case "timeoutms":
			return &configError{fmt.Sprintf("%s_MONGODB_URI sets timeoutMS=%s: it would give every command a deadline, index builds included (docs/install.md, Indexes); remove it (the daemon's own deadline is %s_WRITE_TIMEOUT)", envPrefix, val, envPrefix)}
		}
	}
	return nil
}
