package mongodb

import (
	"context"
	"errors"
	"testing"

	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
)

// TestTopologyStandalone: only run needs change streams, so a standalone
// mongod is accepted when the command allows it (verify, status, seed,
// rebuild) and refused otherwise; replica set members and mongos are
// accepted either way.
func TestTopologyStandalone(t *testing.T) {
	standalone := mtest.Raw("isWritablePrimary", true, "maxWireVersion", int32(21))
	cases := []struct {
		name           string
		hello          []byte
		allow          bool
		wantStandalone bool
		wantErr        bool
	}{
		{"standalone, run", standalone, false, false, true},
		{"standalone, verify", standalone, true, true, false},
		{"replica set, run", mtest.Raw("isWritablePrimary", true, "setName", "rs0"), false, false, false},
		{"replica set, verify", mtest.Raw("isWritablePrimary", true, "setName", "rs0"), true, false, false},
		{"mongos, verify", mtest.Raw("isWritablePrimary", true, "msg", "isdbgrid"), true, false, false},
	}
	for _, c := range cases {
		got, err := topology(c.hello, c.allow)
		if got != c.wantStandalone || (err != nil) != c.wantErr {
			t.Errorf("%s: topology = %v, %v; want standalone %v, error %v", c.name, got, err, c.wantStandalone, c.wantErr)
		}
	}
}

// TestStandaloneSavesNoCheckpoint: on a standalone mongod the adapter has
// no cluster time (zero, no error, so a scan can run) and refuses to save
// a checkpoint before any round trip (the client is nil here: a round
// trip would panic).
func TestStandaloneSavesNoCheckpoint(t *testing.T) {
	d := &DB{cfg: Config{}.withDefaults(), standalone: true}
	ts, err := d.ClusterTime(context.Background())
	if err != nil || !ts.IsZero() {
		t.Errorf("ClusterTime on a standalone = %v, %v; want zero, nil", ts, err)
	}
	err = d.SaveCheckpoint(context.Background(), resume.Checkpoint{Epoch: 1})
	if !errors.Is(err, ErrStandalone) {
		t.Errorf("SaveCheckpoint on a standalone = %v, want ErrStandalone", err)
	}
}
