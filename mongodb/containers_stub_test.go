//go:build !integration

package mongodb

import (
	"context"
	"errors"
	"time"
)

// errNoContainers: this test binary was built without -tags integration,
// so without testcontainers (containers_integration_test.go).
var errNoContainers = errors.New("built without -tags integration, so without testcontainers: make test-integration starts MongoDB with Docker")

func dockerHealthy(time.Duration) error { return errNoContainers }

func startContainer(context.Context) (string, func(), error) {
	return "", nil, errNoContainers
}
