package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// upgradeDocs is the section mongodb.ConnectHint names for a server older
// than 4.4.
const upgradeDocs = "docs/install.md#upgrading-42--44-and-further"

// TestIntegrationOldServerHint: against MongoDB 4.2
// (MATERIALIZER_TEST_MONGODB_42_URI, or a mongo:4.2 container when a
// Docker engine answers) a command fails with the driver's wire-version
// error and a hint naming the upgrade section; run's is a JSON log line.
func TestIntegrationOldServerHint(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test skipped in -short mode")
	}
	uri := os.Getenv("MATERIALIZER_TEST_MONGODB_42_URI")
	if uri == "" {
		if err := dockerAnswers(2 * time.Second); err != nil {
			t.Skipf("no MongoDB 4.2: set MATERIALIZER_TEST_MONGODB_42_URI=mongodb://127.0.0.1:27042/ or run with a Docker engine (%v)", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		u, stop, err := startMongoContainer(ctx, "mongo:4.2", false)
		if stop != nil {
			t.Cleanup(stop)
		}
		if err != nil {
			t.Fatalf("mongo:4.2: %v", err)
		}
		uri = u
	}
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("MATERIALIZER_MONGODB_URI", uri)
	r := runCLI(t, "status")
	if r.code != exitFail || !strings.Contains(r.stderr, "wire version") || !strings.Contains(r.stderr, "\nhint: ") || !strings.Contains(r.stderr, upgradeDocs) {
		t.Errorf("status on 4.2: want exit 1, the driver's error and a hint naming %s\n%v", upgradeDocs, r)
	}
	r = runCLI(t, "run")
	if r.code != exitFail || !strings.Contains(r.stderr, `"hint":"the server at`) || !strings.Contains(r.stderr, upgradeDocs) {
		t.Errorf("run on 4.2: want exit 1 and a JSON log line with the hint\n%v", r)
	}
}

// TestIntegrationRunRefusesDirectSecondary: run and
// rebuild refuse a secondary reached with directConnection=true, naming
// the replica set URI; rebuild --dry-run (read-only) does not.
func TestIntegrationRunRefusesDirectSecondary(t *testing.T) {
	uri := os.Getenv("MATERIALIZER_TEST_MONGODB_SECONDARY_URI")
	if uri == "" {
		t.Skip("set MATERIALIZER_TEST_MONGODB_SECONDARY_URI to a URI reaching one secondary with directConnection=true, e.g. mongodb://127.0.0.1:27018/?directConnection=true")
	}
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("MATERIALIZER_MONGODB_URI", uri)
	for _, args := range [][]string{{"run"}, {"rebuild"}} {
		r := runCLI(t, args...)
		if r.code != exitFail || !strings.Contains(r.output(), "is not the primary") || !strings.Contains(r.output(), "replicaSet=") {
			t.Errorf("%v on a direct secondary: want exit 1 naming the replica set URI\n%v", args, r)
		}
	}
	if r := runCLI(t, "rebuild", "--dry-run"); strings.Contains(r.output(), "is not the primary") {
		t.Errorf("rebuild --dry-run refused a secondary\n%v", r)
	}
}
