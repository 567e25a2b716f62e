package watch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/watch"
)

func idleJob(context.Context, *watch.Engine) error { return nil }

// TestStandbyClockAheadCannotTakeOver: a standby
// whose clock runs an hour ahead used to take a lease the holder still
// held (expiry was judged by the caller's clock); now the store's clock
// (MongoDB's $$NOW) alone decides, and the holder's lease is live.
func TestStandbyClockAheadCannotTakeOver(t *testing.T) {
	st := memstore.New()
	if _, ok, err := st.Acquire(context.Background(), "holder", time.Minute); !ok || err != nil {
		t.Fatal("holder acquire", err)
	}
	b := &watch.Leader{Leases: st, Owner: "standby", TTL: time.Minute, Log: zerolog.Nop(),
		Now:       func() time.Time { return time.Now().Add(time.Hour) },
		NewEngine: func(int64) *watch.Engine { return &watch.Engine{} }}
	err := b.Do(context.Background(), idleJob)
	if !errors.Is(err, watch.ErrLeaseHeld) {
		t.Errorf("standby with a clock 1h ahead: Do = %v, want ErrLeaseHeld (the holder's lease is live by the server's clock)", err)
	}
}

// TestSameInstanceIDTwoProcesses: two processes
// configured with the same MATERIALIZER_INSTANCE_ID (a shared env file,
// replicas: 2) used to both "renew" one lease and both write; each Leader
// now holds the lease under its own random identity, so the second stands
// by.
func TestSameInstanceIDTwoProcesses(t *testing.T) {
	st := memstore.New()
	mk := func() *watch.Leader {
		return &watch.Leader{Leases: st, Owner: "materializer-0", TTL: time.Minute, Log: zerolog.Nop(),
			NewEngine: func(int64) *watch.Engine { return &watch.Engine{} }}
	}
	first, second := mk(), mk()
	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- first.Do(context.Background(), func(context.Context, *watch.Engine) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	err := second.Do(context.Background(), idleJob)
	close(release)
	if e := <-done; e != nil {
		t.Fatal(e)
	}
	if !errors.Is(err, watch.ErrLeaseHeld) {
		t.Errorf("second process with the same MATERIALIZER_INSTANCE_ID: Do = %v, want ErrLeaseHeld", err)
	}
}
