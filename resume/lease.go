package resume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Lease is the single-active-instance lock: Owner holds it until Expires
// (by the store's clock: the server's, never an instance's); Epoch
// increases by one at every acquisition and is the fencing token every
// checkpoint save carries.
type Lease struct {
	Owner   string    `bson:"owner"`
	Epoch   int64     `bson:"epoch"`
	Expires time.Time `bson:"expires"`
}

// LeaseStore acquires and renews the lease with conditional updates.
// Expiry is decided by the store's own clock (MongoDB: $$NOW), so
// instances with skewed clocks cannot both believe they hold it.
type LeaseStore interface {
	// Acquire takes the lease for owner when there is none or it has
	// expired by the store's clock: a new epoch, expiring ttl after the
	// store's now. ok is false when another holder's lease is unexpired;
	// that lease is returned.
	Acquire(ctx context.Context, owner string, ttl time.Duration) (l Lease, ok bool, err error)
	// Renew extends the lease to ttl after the store's now, keeping its
	// epoch, only if owner still holds it at epoch; otherwise ok is false
	// and the current lease is returned.
	Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (l Lease, ok bool, err error)
	// Release gives the lease up if owner still holds it at epoch.
	Release(ctx context.Context, owner string, epoch int64) error
	// Current returns the lease as stored; ok is false when none exists.
	Current(ctx context.Context) (l Lease, ok bool, err error)
}

// UniqueOwner returns the lease owner id of one process: instance (the
// configured instance id, possibly shared by several processes through
// one env file or replicas: 2) followed by "#" and 16 random hex digits
// drawn at the call, so that two processes never share an identity and
// never both renew one lease.
func UniqueOwner(instance string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return instance + "#" + hex.EncodeToString(b[:])
}
