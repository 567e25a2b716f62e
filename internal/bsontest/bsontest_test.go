package bsontest_test

import (
	"bytes"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/bsontest"
)

// TestDocElementSameAsMarshal: Doc of Elements encodes what bson.Marshal
// does for the same fields.
func TestDocElementSameAsMarshal(t *testing.T) {
	_, s, _ := bson.MarshalValue("x")
	got := bsontest.Doc(bsontest.Element(bson.TypeString, "a", s), bsontest.Element(bson.TypeNull, "b", nil))
	want := bsontest.Marshal(t, bson.D{{Key: "a", Value: "x"}, {Key: "b", Value: nil}})
	if !bytes.Equal(got, want) {
		t.Fatalf("Doc %x, Marshal %x", []byte(got), []byte(want))
	}
}

// TestEntriesAndRewrites: Entries walks studentStatus in document order
// skipping a user that is not a document; NullEntries nulls every entry
// and keeps everything else; Without drops the named fields only.
func TestEntriesAndRewrites(t *testing.T) {
	e := bson.D{{Key: "score", Value: int32(1)}}
	h := bsontest.Marshal(t, bson.D{{Key: "_id", Value: 1}, {Key: "studentStatus", Value: bson.D{
		{Key: "b", Value: bson.D{{Key: "2", Value: e}, {Key: "1", Value: e}}},
		{Key: "ghost", Value: "not a document"},
		{Key: "a", Value: bson.D{{Key: "1", Value: e}}},
	}}, {Key: "penalty", Value: "score"}})
	var got [][2]string
	for _, en := range bsontest.Entries(t, h) {
		got = append(got, [2]string{en.User, en.Problem})
		if en.Value.Document().Lookup("score").Int32() != 1 {
			t.Errorf("entry %s.%s: value %s", en.User, en.Problem, en.Value)
		}
	}
	if want := [][2]string{{"b", "2"}, {"b", "1"}, {"a", "1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Entries %v, want %v", got, want)
	}
	null := bsontest.Marshal(t, bson.D{{Key: "_id", Value: 1}, {Key: "studentStatus", Value: bson.D{
		{Key: "b", Value: bson.D{{Key: "2", Value: nil}, {Key: "1", Value: nil}}},
		{Key: "ghost", Value: "not a document"},
		{Key: "a", Value: bson.D{{Key: "1", Value: nil}}},
	}}, {Key: "penalty", Value: "score"}})
	if n := bsontest.NullEntries(t, h); !bytes.Equal(n, null) {
		t.Errorf("NullEntries %s, want %s", n, null)
	}
	if w, want := bsontest.Without(t, h, "studentStatus", "absent"), bsontest.Marshal(t, bson.D{{Key: "_id", Value: 1}, {Key: "penalty", Value: "score"}}); !bytes.Equal(w, want) {
		t.Errorf("Without %s, want %s", w, want)
	}
	if en := bsontest.Entries(t, bsontest.Marshal(t, bson.D{{Key: "studentStatus", Value: "x"}})); en != nil {
		t.Errorf("Entries of a studentStatus that is not a document: %v", en)
	}
}
