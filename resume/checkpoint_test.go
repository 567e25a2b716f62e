package resume_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/resume"
)

// token is a resume token as the server sends it: {_data: <hex string>}.
func token(t *testing.T) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: "8265E0000100000001"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at is a time as a BSON date keeps it: milliseconds, UTC.
func at(sec int64) time.Time { return time.UnixMilli(sec*1000 + 123).UTC() }

func TestCheckpointEmpty(t *testing.T) {
	ts := bson.Timestamp{T: 1_700_000_000, I: 2}
	for _, c := range []struct {
		name string
		cp   resume.Checkpoint
		want bool
	}{
		{"zero", resume.Checkpoint{}, true},
		{"a token", resume.Checkpoint{Token: token(t)}, false},
		{"a rebuild's start time, no token", resume.Checkpoint{StartAt: ts}, false},
		{"a start time at second 0, increment 1", resume.Checkpoint{StartAt: bson.Timestamp{I: 1}}, false},
		{"a token and a start time", resume.Checkpoint{Token: token(t), StartAt: ts}, false},
		{"an empty token that is not nil", resume.Checkpoint{Token: bson.Raw{}}, true},
		// The cluster time is for lag reporting only; the stream cannot
		// start from it.
		{"only lag, times and fencing", resume.Checkpoint{ClusterTime: ts, RebuiltAt: at(1), CaughtUpAt: at(2), SavedAt: at(3), Epoch: 4, Owner: "a#0123456789abcdef"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.cp.Empty(); got != c.want {
				t.Errorf("Empty() = %v, want %v", got, c.want)
			}
		})
	}
}

// field is one element of a stored document: its key and BSON type.
type field struct {
	key string
	typ bson.Type
}

func fieldsOf(t *testing.T, doc bson.Raw) []field {
	t.Helper()
	elems, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var fs []field
	for _, e := range elems {
		fs = append(fs, field{e.Key(), e.Value().Type})
	}
	return fs
}

// TestCheckpointBSON: each kind of checkpoint the daemon saves encodes to
// the documented stored shape (docs and mongodb/checkpoint.go: token,
// startAt, clusterTime, rebuiltAt, caughtUpAt, savedAt, epoch, owner), the
// fields a kind does not set left out, and decodes back to itself, still
// naming the same position.
func TestCheckpointBSON(t *testing.T) {
	ts := bson.Timestamp{T: 1_700_000_000, I: 2}
	for _, c := range []struct {
		name string
		cp   resume.Checkpoint
		want []field
	}{
		{"a rebuild's, no lease", resume.Checkpoint{StartAt: ts, ClusterTime: ts, RebuiltAt: at(1), SavedAt: at(1)}, []field{
			{"startAt", bson.TypeTimestamp}, {"clusterTime", bson.TypeTimestamp}, {"rebuiltAt", bson.TypeDateTime},
			{"savedAt", bson.TypeDateTime}, {"epoch", bson.TypeInt64},
		}},
		{"an event's token, fenced", resume.Checkpoint{Token: token(t), ClusterTime: ts, SavedAt: at(2), Epoch: 7, Owner: "a#0123456789abcdef"}, []field{
			{"token", bson.TypeEmbeddedDocument}, {"startAt", bson.TypeTimestamp}, {"clusterTime", bson.TypeTimestamp},
			{"savedAt", bson.TypeDateTime}, {"epoch", bson.TypeInt64}, {"owner", bson.TypeString},
		}},
		{"a quiet stream's, caught up", resume.Checkpoint{Token: token(t), StartAt: ts, ClusterTime: ts, RebuiltAt: at(1), CaughtUpAt: at(3), SavedAt: at(3), Epoch: 1, Owner: "b#fedcba9876543210"}, []field{
			{"token", bson.TypeEmbeddedDocument}, {"startAt", bson.TypeTimestamp}, {"clusterTime", bson.TypeTimestamp},
			{"rebuiltAt", bson.TypeDateTime}, {"caughtUpAt", bson.TypeDateTime}, {"savedAt", bson.TypeDateTime},
			{"epoch", bson.TypeInt64}, {"owner", bson.TypeString},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := bson.Marshal(c.cp)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if got := fieldsOf(t, b); !slices.Equal(got, c.want) {
				t.Errorf("stored fields %v, want %v", got, c.want)
			}
			var back resume.Checkpoint
			if err := bson.Unmarshal(b, &back); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(back, c.cp) {
				t.Errorf("decoded %+v, want %+v", back, c.cp)
			}
			if back.Empty() != c.cp.Empty() {
				t.Errorf("decoded Empty() = %v, saved %v", back.Empty(), c.cp.Empty())
			}
		})
	}
}
