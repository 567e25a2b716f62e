package watch_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestDecodeEventFields: the cluster time, the operation, the namespace,
// the document key and, for inserts and replaces only, the (user,
// problem) of the projected fullDocument.
func TestDecodeEventFields(t *testing.T) {
	id := bson.ObjectID{11: 5}
	ev := func(op string, full bool) bson.Raw {
		d := bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "826"}}}, {Key: "operationType", Value: op},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1_700_000_123, I: 7}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: "submission"}}},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}}}
		if full {
			d = append(d, bson.E{Key: "fullDocument", Value: bson.D{{Key: "user", Value: "alice"}, {Key: "problem", Value: int64(7)}}})
		}
		b, err := bson.Marshal(d)
		must(err)
		return b
	}
	for _, c := range []struct {
		op      string
		full    bool
		hasPair bool
	}{
		{"insert", true, true}, {"replace", true, true}, {"update", true, false}, {"delete", false, false},
	} {
		got, err := watch.DecodeEvent(ev(c.op, c.full))
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		if got.ClusterTime != (bson.Timestamp{T: 1_700_000_123, I: 7}) {
			t.Errorf("%s: cluster time %v", c.op, got.ClusterTime)
		}
		if string(got.Change.Op) != c.op || got.Change.Collection != "submission" || got.Change.SubmissionID != id {
			t.Errorf("%s: change %+v", c.op, got.Change)
		}
		if got.Change.HasPair != c.hasPair || (c.hasPair && got.Change.Pair != (materialize.Pair{User: "alice", Problem: 7})) {
			t.Errorf("%s: pair %+v (has %v), want has %v", c.op, got.Change.Pair, got.Change.HasPair, c.hasPair)
		}
	}
}
