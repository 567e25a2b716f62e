package mongodb

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckURI: CheckURI fails exactly where the driver's ApplyURI would
// (connstring.ParseAndValidate), never names the password, and leaves an
// SRV name that does not resolve to Open (a reachability problem).
func TestCheckURI(t *testing.T) {
	cases := []struct {
		uri    string
		ok     bool
		secret string
	}{
		{"mongodb://127.0.0.1:27017/?replicaSet=rs0", true, ""},
		{"mongodb://user:p%40ss@a:1,b:2/normal-oj?authSource=admin&w=majority", true, ""},
		{"mongodb+srv://cluster.example.invalid/", true, ""}, // DNS lookup fails: not malformed
		{"mongodb://user:s3c@ret@h/", false, "s3c@ret"},
		{"mongodb://user:s3c%zzret@h/", false, "s3c%zzret"},
		{"mongodb://user:s3cret@h:1/?connectTimeoutMS=soon", false, "s3cret"},
		{"mongodb://user:s3cret@h:1,h:2/?directConnection=true", false, "s3cret"},
		{"mongodb://h/?authMechanismProperties=TOKEN_s3cret", false, "TOKEN_s3cret"},
		{"postgres://h/", false, ""},
		// Parsed, but refused by ClientOptions.Validate, which mongo.Connect
		// would run only when it builds the topology.
		{"mongodb://user:s3cret@h/?heartbeatFrequencyMS=100", false, "s3cret"},
		{"mongodb://user:s3cret@h/?minPoolSize=10&maxPoolSize=5", false, "s3cret"},
	}
	for _, c := range cases {
		err := CheckURI(c.uri)
		if (err == nil) != c.ok {
			t.Errorf("CheckURI(%q) = %v, want ok=%v", c.uri, err, c.ok)
			continue
		}
		if err != nil && c.secret != "" && strings.Contains(err.Error(), c.secret) {
			t.Errorf("CheckURI(%q) = %v: names the secret", c.uri, err)
		}
	}
}

// TestCheckURIOptions: an empty replicaSet and any timeoutMS are refused,
// read as the driver reads options (either separator, any case, escaped),
// and a '?' in the password is not the start of the options.
func TestCheckURIOptions(t *testing.T) {
	for _, c := range []struct{ uri, option string }{
		{"mongodb://127.0.0.1:1/?replicaSet=", "replicaSet"},
		{"mongodb://127.0.0.1:1/?directConnection=true&replicaSet=&w=majority", "replicaSet"},
		{"mongodb://127.0.0.1:1/?replicaSet=rs0&timeoutMS=5000", "timeoutMS"},
		{"mongodb://u:p%3Fx@127.0.0.1:1/db?TIMEOUTMS=0", "timeoutMS"},
		{"mongodb://127.0.0.1:1/?replicaSet=rs0;timeoutms=10", "timeoutMS"},
		{"mongodb://127.0.0.1:1/?replicaSet=rs0", ""},
		{"mongodb://u:p?timeoutMS=1@127.0.0.1:1/", ""},
	} {
		err := CheckURIOptions(c.uri)
		var oe *URIOptionError
		switch {
		case c.option == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.uri, err)
		case c.option != "" && (!errors.As(err, &oe) || oe.Option != c.option || !strings.Contains(err.Error(), c.option)):
			t.Errorf("%s: %v, want a *URIOptionError for %s", c.uri, err, c.option)
		}
	}
}

// TestCheckDatabaseName: the names MongoDB refuses are refused, others
// accepted.
func TestCheckDatabaseName(t *testing.T) {
	for _, name := range []string{"", "a.b", "a$b", "a b", `a"b`, "a/b", `a\b`, "a\x00b", strings.Repeat("n", 64)} {
		if err := CheckDatabaseName(name); err == nil || !strings.Contains(err.Error(), "database name") {
			t.Errorf("%q: %v, want refused", name, err)
		}
	}
	for _, name := range []string{"normal-oj", "noj_prod", strings.Repeat("n", 63)} {
		if err := CheckDatabaseName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestURIOptionAsDriver: URIOption reads an option as the driver's
// connstring parser does (x/mongo/driver/connstring/connstring.go:1084,
// :332-347): options split at '&' or ';', keys unescaped and without case,
// the last one winning, and a '?' in the password not starting them.
func TestURIOptionAsDriver(t *testing.T) {
	for _, c := range []struct{ uri, name, want string }{
		{"mongodb://h/?w=1;directConnection=true", "directConnection", "true"},
		{"mongodb://h/?directConnection=false&directConnection=true", "directConnection", "true"},
		{"mongodb://h/?replica%53et=rs0", "replicaSet", "rs0"},
		{"mongodb://u:p?replicaSet=x@h/?replicaSet=rs0", "replicaSet", "rs0"},
		{"mongodb://u:p?directConnection=true@h/", "directConnection", ""},
		{"mongodb://h/?replicaSet=rs%2F0", "replicaSet", "rs/0"},
	} {
		if got := URIOption(c.uri, c.name); got != c.want {
			t.Errorf("URIOption(%q, %q) = %q, want %q", c.uri, c.name, got, c.want)
		}
	}
}

// TestCheckURIOptionsRepeated: the driver keeps the last replicaSet
// (connstring.go:509), so an empty one followed by a name is no empty set
// name, and a name followed by an empty one is.
func TestCheckURIOptionsRepeated(t *testing.T) {
	if err := CheckURIOptions("mongodb://h/?replicaSet=&replicaSet=rs0"); err != nil {
		t.Errorf("replicaSet=&replicaSet=rs0: %v, want accepted (the driver uses rs0)", err)
	}
	if err := CheckURIOptions("mongodb://h/?replicaSet=rs0;replicaSet="); err == nil {
		t.Errorf("replicaSet=rs0;replicaSet=: accepted, want refused (the driver uses \"\")")
	}
}

// TestCheckDatabaseNameTooLong: the message for a long name says what the
// rule is, not that the name keeps it.
func TestCheckDatabaseNameTooLong(t *testing.T) {
	err := CheckDatabaseName(strings.Repeat("n", 64))
	if err == nil || !strings.Contains(err.Error(), "must have fewer than 64 bytes") || !strings.Contains(err.Error(), "64") {
		t.Errorf("64 bytes: %v, want \"... must have fewer than 64 bytes (this one has 64)\"", err)
	}
}
