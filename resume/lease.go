package resume

import (
	"context"
	"time"
)

// Lease is the single-active-instance lock: Owner holds it until Expires;
// Epoch increases by one at every change of owner and is the fencing token
// every checkpoint save carries.
type Lease struct {
	Owner   string    `bson:"owner"`
	Epoch   int64     `bson:"epoch"`
	Expires time.Time `bson:"expires"`
}

// LeaseStore acquires and renews the lease with conditional updates.
type LeaseStore interface {
	// Acquire takes the lease for owner when it is free or expired at now
	// (a new epoch), or renews it when owner already holds it (same
	// epoch); ok is false when another owner holds an unexpired lease,
	// which is then returned.
	Acquire(ctx context.Context, owner string, ttl time.Duration, now time.Time) (l Lease, ok bool, err error)
	// Release gives the lease up if owner still holds it at epoch.
	Release(ctx context.Context, owner string, epoch int64) error
	// Current returns the lease as stored; ok is false when none exists.
	Current(ctx context.Context) (l Lease, ok bool, err error)
}
