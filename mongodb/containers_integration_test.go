//go:build integration

package mongodb

// The testcontainers side of the integration tests, built only with
// -tags integration (make test-integration does): testcontainers-go and
// the Docker client it brings are about a hundred packages that a plain
// `go test` need not compile. Without the tag, containers_stub_test.go
// stands in and the integration tests still run against
// MATERIALIZER_TEST_MONGODB_URI, or skip.

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmongo "github.com/testcontainers/testcontainers-go/modules/mongodb"

	"github.com/normal-oj/noj-materializer/internal/testenv"
)

// startContainer starts testenv.MongoImage() (mongo:7 unless
// MATERIALIZER_TEST_MONGODB_IMAGE says otherwise) as a single-node replica
// set, with the test commands (failCommand fail points) enabled, and returns
// its connection string and a function that terminates it (non-nil
// whenever a container was created, even when err is not nil).
func startContainer(ctx context.Context) (uri string, stop func(), err error) {
	c, err := tcmongo.Run(ctx, testenv.MongoImage(), tcmongo.WithReplicaSet("rs0"),
		testcontainers.WithCmdArgs("--setParameter", "enableTestCommands=1"))
	if c != nil {
		stop = func() {
			if err := testcontainers.TerminateContainer(c); err != nil {
				fmt.Fprintln(os.Stderr, "terminate mongodb container:", err)
			}
		}
	}
	if err != nil {
		return "", stop, err
	}
	uri, err = c.ConnectionString(ctx)
	return uri, stop, err
}

// dockerHealthy reports within timeout whether a Docker engine answers.
// The probe runs in a goroutine so a hanging socket cannot hang the test.
func dockerHealthy(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		p, err := testcontainers.NewDockerProvider()
		if err != nil {
			done <- err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		done <- p.Health(ctx) // closes the provider
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("docker did not answer within %v", timeout)
	}
}
