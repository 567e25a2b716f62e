package main

import (
	"strings"
	"testing"
)

// backEndCollectionsFromSource are the collections of Back-End's
// mongoengine documents, read off Normal-OJ/Back-End mongo/engine.py at
// dfbd76a (class name in snake case; SubmissionConfig lives in Config's
// collection), plus GridFS's default fs.files/fs.chunks of its FileField.
var backEndCollectionsFromSource = []string{
	"user", "submission", "homework", "problem", "course", "number", "message",
	"announcement", "post_thread", "post", "config", "login_records", "fs.files", "fs.chunks",
}

// TestDaemonCollectionsNotBackEnds: a checkpoint or key-index collection
// named like one of Back-End's collections would have the daemon upsert
// its lease, checkpoint and key records among Back-End's documents: it is
// refused with exit 2 naming the variable, before any connection (the URI
// points at a server that never answers, where a connection is seen), for
// every command that connects. Offline commands
// (--dump) use neither collection and ignore both settings
// (TestOfflineIgnoresUnusedSettings).
func TestDaemonCollectionsNotBackEnds(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "")
	t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=5000")
	for _, variable := range []string{"MATERIALIZER_CHECKPOINT_COLLECTION", "MATERIALIZER_KEYS_COLLECTION"} {
		for _, coll := range append(backEndCollectionsFromSource, "User", "system.profile", "") {
			t.Run(variable+"="+coll, func(t *testing.T) {
				t.Setenv(variable, coll)
				srv := newSilentServer(t)
				t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://"+srv.addr+"/?serverSelectionTimeoutMS=5000")
				for _, args := range [][]string{{"run"}, {"rebuild"}, {"status"}, {"verify"}, {"seed"}, {"explain", "--user", "u", "--problem", "1"}} {
					r := runCLI(t, args...)
					if r.code != exitConfig {
						t.Fatalf("%v: want exit 2\n%v", args, r)
					}
					if !strings.Contains(r.stderr, variable) {
						t.Errorf("%v: the message does not name %s\n%v", args, variable, r)
					}
					if srv.wasDialed() {
						t.Fatalf("%v: it connected before refusing", args)
					}
				}
			})
		}
	}
	t.Run("same collection for both", func(t *testing.T) {
		t.Setenv("MATERIALIZER_CHECKPOINT_COLLECTION", "materializer_state")
		t.Setenv("MATERIALIZER_KEYS_COLLECTION", "materializer_state")
		r := runCLI(t, "status")
		if r.code != exitConfig || !strings.Contains(r.stderr, "MATERIALIZER_KEYS_COLLECTION") {
			t.Fatalf("want exit 2 naming MATERIALIZER_KEYS_COLLECTION\n%v", r)
		}
	})
	t.Run("own names accepted", func(t *testing.T) {
		t.Setenv("MATERIALIZER_CHECKPOINT_COLLECTION", "users_materializer_state")
		t.Setenv("MATERIALIZER_KEYS_COLLECTION", "submission_keys")
		if _, err := loadConfig(true); err != nil {
			t.Fatalf("own names refused: %v", err)
		}
	})
}

// TestMalformedURIIsConfigurationError: a URI the driver cannot parse is a
// configuration error (exit 2, naming the variable, no password), as the
// README promises, found before connecting; an SRV name that does not
// resolve is a failure to connect (exit 1), not a malformed URI.
func TestMalformedURIIsConfigurationError(t *testing.T) {
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "")
	cases := []struct {
		name    string
		uri     string
		secrets []string
	}{
		{"unescaped at sign", "mongodb://user:s3c@ret@127.0.0.1:1/", []string{"s3c@ret", "s3c"}},
		{"unescaped colon in password", "mongodb://user:s3c:ret@127.0.0.1:1/", []string{"s3c:ret"}},
		{"bad percent escape in password", "mongodb://user:s3c%zzret@127.0.0.1:1/", []string{"s3c%zzret", "zzret"}},
		{"option value not a number", "mongodb://user:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=soon", []string{"s3cret"}},
		{"unknown auth mechanism", "mongodb://user:s3cret@127.0.0.1:1/?authMechanism=BOGUS", []string{"s3cret"}},
		{"query without slash", "mongodb://user:s3cret@127.0.0.1:1?replicaSet=rs0", []string{"s3cret"}},
		{"port out of range", "mongodb://user:s3cret@127.0.0.1:99999/", []string{"s3cret"}},
		{"heartbeat under the driver's minimum", "mongodb://user:s3cret@127.0.0.1:1/?heartbeatFrequencyMS=100", []string{"s3cret"}},
		{"minPoolSize over maxPoolSize", "mongodb://user:s3cret@127.0.0.1:1/?minPoolSize=10&maxPoolSize=5", []string{"s3cret"}},
		{"direct connection to two hosts", "mongodb://user:s3cret@127.0.0.1:1,127.0.0.1:2/?directConnection=true", []string{"s3cret"}},
		{"secret option with a bad value", "mongodb://127.0.0.1:1/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN", []string{"AWS_SESSION_TOKEN"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MATERIALIZER_MONGODB_URI", c.uri)
			for _, args := range [][]string{{"run"}, {"rebuild"}, {"rebuild", "--dry-run"}, {"verify"}, {"status"}, {"seed"}} {
				r := runCLI(t, args...)
				if r.code != exitConfig {
					t.Fatalf("%v: want exit 2\n%v", args, r)
				}
				if !strings.Contains(r.stderr, "MATERIALIZER_MONGODB_URI") {
					t.Errorf("%v: the message does not name MATERIALIZER_MONGODB_URI\n%v", args, r)
				}
				for _, s := range c.secrets {
					if strings.Contains(r.output(), s) {
						t.Errorf("%v: output contains the secret %q\n%v", args, s, r)
					}
				}
			}
		})
	}
	t.Run("unresolvable SRV name", func(t *testing.T) {
		t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb+srv://cluster.example.invalid/?serverSelectionTimeoutMS=200")
		r := runCLI(t, "status")
		if r.code != exitFail {
			t.Fatalf("want exit 1 (cannot reach the server)\n%v", r)
		}
	})
}
