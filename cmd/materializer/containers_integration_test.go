//go:build integration

package main

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
)

// startMongoContainer starts image (testenv.MongoImage(), mongo:4.2), as the single
// member of replica set rs0 when replicaSet is set, and returns its connection string and a
// function that terminates it (non-nil whenever a container was created,
// even when err is not nil).
func startMongoContainer(ctx context.Context, image string, replicaSet bool) (uri string, stop func(), err error) {
	// The test commands give the fault tests their failCommand fail points.
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmdArgs("--setParameter", "enableTestCommands=1"),
	}
	if replicaSet {
		opts = append(opts, tcmongo.WithReplicaSet("rs0"))
	}
	c, err := func() (c *tcmongo.MongoDBContainer, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("testcontainers panicked: %v", r)
			}
		}()
		return tcmongo.Run(ctx, image, opts...)
	}()
	if c != nil {
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := testcontainers.TerminateContainer(c, testcontainers.StopContext(ctx)); err != nil {
				fmt.Fprintf(os.Stderr, "terminate the MongoDB container: %v\n", err)
			}
		}
	}
	if err != nil {
		return "", stop, fmt.Errorf("start a MongoDB container (%s): %w", image, err)
	}
	uri, err = c.ConnectionString(ctx)
	if err != nil {
		return "", stop, fmt.Errorf("container connection string: %w", err)
	}
	return uri, stop, nil
}

// dockerAnswers reports whether a Docker engine answers within timeout.
// testcontainers may block or panic without one; both are contained.
func dockerAnswers(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("testcontainers panicked: %v", r)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		p, err := testcontainers.NewDockerProvider()
		if err != nil {
			done <- err
			return
		}
		done <- p.Health(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("the Docker engine did not answer within %s", timeout)
	}
}
