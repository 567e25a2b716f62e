// Package testenv reads the variables that steer the integration tests, so
// that every package starts the same server image and treats a missing
// server the same way.
package testenv

import (
	"os"
	"testing"
)

// DefaultMongoImage is the image the integration tests start with Docker
// when MATERIALIZER_TEST_MONGODB_IMAGE is unset.
const DefaultMongoImage = "mongo:7"

// MongoImage returns the image of the replica set the integration tests
// start with testcontainers: MATERIALIZER_TEST_MONGODB_IMAGE (the CI
// workflow runs the tests once for each supported server version), else
// DefaultMongoImage.
func MongoImage() string {
	if img := os.Getenv("MATERIALIZER_TEST_MONGODB_IMAGE"); img != "" {
		return img
	}
	return DefaultMongoImage
}

// RequireMongo reports whether MATERIALIZER_TEST_REQUIRE_MONGODB=1: a run
// that must reach a server (CI with Docker) fails where it would skip.
func RequireMongo() bool { return os.Getenv("MATERIALIZER_TEST_REQUIRE_MONGODB") == "1" }

// NoServer skips t for want of a MongoDB server, or fails it when the run
// requires one: a workflow whose container did not start must not pass by
// skipping every test.
func NoServer(t testing.TB, why string) {
	t.Helper()
	if RequireMongo() {
		t.Fatalf("MATERIALIZER_TEST_REQUIRE_MONGODB=1 but %s", why)
		return
	}
	t.Skip(why)
}
