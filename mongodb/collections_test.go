package mongodb

import (
	"errors"
	"testing"
)

// TestCheckCollections: the daemon's own collections may be none of
// Back-End's (without case), no system.* one, not empty, and not the same
// one twice; the error says which of the two is refused.
func TestCheckCollections(t *testing.T) {
	for _, c := range []struct {
		checkpoint, keys string
		keysRefused      bool
		same             bool
	}{
		{"", DefaultKeysCollection, false, false},
		{"system.profile", DefaultKeysCollection, false, false},
		{"User", DefaultKeysCollection, false, false},
		{DefaultCheckpointCollection, "fs.chunks", true, false},
		{DefaultCheckpointCollection, "", true, false},
		{"materializer_state", "Materializer_State", true, true},
	} {
		err := CheckCollections(c.checkpoint, c.keys)
		var ce *CollectionError
		if !errors.As(err, &ce) || ce.Keys != c.keysRefused || ce.Same != c.same {
			t.Errorf("CheckCollections(%q, %q) = %#v, want keys %v, same %v", c.checkpoint, c.keys, err, c.keysRefused, c.same)
		}
	}
	if err := CheckCollections(DefaultCheckpointCollection, DefaultKeysCollection); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}
