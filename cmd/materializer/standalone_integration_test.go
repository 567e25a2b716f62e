package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/internal/testenv"
)

// standaloneURI returns the URI of a standalone mongod for t: the one
// named by MATERIALIZER_TEST_MONGODB_STANDALONE_URI, or one started with
// testcontainers (testenv.MongoImage() without --replSet) when a Docker engine answers;
// otherwise it skips t.
func standaloneURI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test skipped in -short mode")
	}
	if u := os.Getenv("MATERIALIZER_TEST_MONGODB_STANDALONE_URI"); u != "" {
		return u
	}
	if err := dockerAnswers(2 * time.Second); err != nil {
		t.Skipf("no standalone mongod: set MATERIALIZER_TEST_MONGODB_STANDALONE_URI=mongodb://127.0.0.1:27018/ (mongod without --replSet) or run with a Docker engine (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	uri, stop, err := startMongoContainer(ctx, testenv.MongoImage(), false)
	if stop != nil {
		t.Cleanup(stop)
	}
	if err != nil {
		t.Fatalf("standalone mongod: %v", err)
	}
	return uri
}

// TestIntegrationStandalone: on a standalone mongod (a backup restored
// onto one), the commands that need no change stream work: seed inserts,
// verify finds the seed's stale values (exit 1), status says there is no
// stream, rebuild writes the values and says it saved no stream start,
// verify then exits 0; run alone refuses the server, saying why.
func TestIntegrationStandalone(t *testing.T) {
	uri := standaloneURI(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "mat_it_standalone_" + hex.EncodeToString(b[:])
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Database(name).Drop(ctx)
		_ = client.Disconnect(ctx)
	})
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_MONGODB_URI", uri)
	t.Setenv("MATERIALIZER_DATABASE", name)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("MATERIALIZER_LEASE_TTL", "3s")
	t.Setenv("MATERIALIZER_WRITE_TIMEOUT", "1s")

	if r := runCLI(t, "seed", "--users", "10", "--problems", "5", "--homeworks", "3", "--submissions", "300"); r.code != exitOK {
		t.Fatalf("seed on a standalone: want exit 0\n%v", r)
	}
	if r := runCLI(t, "verify"); r.code != exitFail || !strings.Contains(r.stdout, "drifted") {
		t.Fatalf("verify of seeded data on a standalone: want exit 1 with drift\n%v", r)
	}
	r := runCLI(t, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "standalone mongod") || !strings.Contains(r.stdout, "checkpoint: none") {
		t.Errorf("status on a standalone: want exit 0, naming the standalone and no checkpoint\n%v", r)
	}
	r = runCLI(t, "rebuild")
	if r.code != exitOK || !strings.Contains(r.stdout, "checkpoint: none saved: the server is a standalone mongod") {
		t.Fatalf("rebuild on a standalone: want exit 0, saying no stream start was saved\n%v", r)
	}
	if r := runCLI(t, "verify"); r.code != exitOK {
		t.Errorf("verify after rebuild on a standalone: want exit 0\n%v", r)
	}
	if r := runCLI(t, "status"); !strings.Contains(r.stdout, "checkpoint: none") {
		t.Errorf("a checkpoint was saved on a standalone\n%v", r)
	}
	r = runCLI(t, "run")
	if r.code != exitFail || !strings.Contains(r.output(), "standalone mongod: change streams need a replica set") {
		t.Errorf("run on a standalone: want exit 1 naming the reason\n%v", r)
	}
}
