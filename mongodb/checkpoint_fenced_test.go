package mongodb

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/resume"
)

// TestSaveCheckpointFencedWhenNothingMatches: a save at an epoch whose
// filter matches no state document (another instance took the lease
// over, with the next epoch) is resume.ErrFenced, not a save: the engine
// then stands by instead of writing on under a lease it lost. A match is
// a save, whether or not the document changed.
func TestSaveCheckpointFencedWhenNothingMatches(t *testing.T) {
	cases := []struct {
		name   string
		reply  bson.D
		fenced bool
	}{
		{"no document matched", bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 0}, {Key: "nModified", Value: 0}}, true},
		{"matched and changed", bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}}, false},
		{"matched, unchanged", bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 0}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token, err := bson.Marshal(bson.D{{Key: "_data", Value: "82"}})
			if err != nil {
				t.Fatal(err)
			}
			d, md, _ := mockDB(t)
			md.AddResponses(c.reply)
			err = d.SaveCheckpoint(context.Background(), resume.Checkpoint{Epoch: 3, Owner: "a#1", Token: token})
			if got := errors.Is(err, resume.ErrFenced); got != c.fenced {
				t.Errorf("SaveCheckpoint: %v, want fenced %v", err, c.fenced)
			}
			if !c.fenced && err != nil {
				t.Errorf("SaveCheckpoint: %v", err)
			}
		})
	}
}
