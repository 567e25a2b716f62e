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

// TestDecodeEventDerivedValues: an update of a user or homework carries
// derivedValues as Values; a malformed derivedValues is an error, with no
// Values and the rest of the event decoded (it is processed, never
// skipped as an echo).
func TestDecodeEventDerivedValues(t *testing.T) {
	ev := func(coll string, values any) bson.Raw {
		d := bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: "826"}}}, {Key: "operationType", Value: "update"},
			{Key: "clusterTime", Value: bson.Timestamp{T: 1_700_000_123, I: 7}},
			{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: coll}}},
			{Key: "documentKey", Value: bson.D{{Key: "_id", Value: "alice"}}},
			{Key: "changedFields", Value: bson.A{"submission"}}}
		if values != nil {
			d = append(d, bson.E{Key: "derivedValues", Value: values})
		}
		raw, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	kv := func(k any, v ...any) bson.D {
		d := bson.D{{Key: "k", Value: k}}
		if len(v) > 0 {
			d = append(d, bson.E{Key: "v", Value: v[0]})
		}
		return d
	}
	good, err := watch.DecodeEvent(ev("user", bson.A{kv("submission", int32(3))}))
	if err != nil {
		t.Fatal(err)
	}
	if len(good.Values) != 1 || good.Values[0].Path != "submission" || good.Values[0].Value.Int32() != 3 {
		t.Errorf("values %+v, want submission=3", good.Values)
	}
	if none, err := watch.DecodeEvent(ev("user", nil)); err != nil || none.Values != nil {
		t.Errorf("no derivedValues: %+v, %v; want no values, no error", none.Values, err)
	}
	for _, c := range []struct {
		name   string
		values any
	}{
		{"not an array", bson.D{{Key: "0", Value: kv("submission", int32(3))}}},
		{"an element not a document", bson.A{kv("submission", int32(3)), "x"}},
		{"k not a string", bson.A{kv("submission", int32(3)), kv(int32(1), int32(0))}},
		{"no v", bson.A{kv("submission", int32(3)), kv("AC_submission")}},
		{"a path twice", bson.A{kv("submission", int32(3)), kv("submission", int32(0))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := watch.DecodeEvent(ev("user", c.values))
			if err == nil {
				t.Error("no error")
			}
			if got.Values != nil {
				t.Errorf("values %+v, want none", got.Values)
			}
			if got.Change.Op != materialize.OpUpdate || got.Change.UserID != "alice" || len(got.Change.Fields) != 1 {
				t.Errorf("change %+v, want the update decoded", got.Change)
			}
		})
	}
}
