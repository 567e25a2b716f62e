package materialize

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// referenceElement is what scanFields did before nextElement: the driver's
// ReadElement, KeyBytesErr and ValueErr.
func referenceElement(rem []byte) (bson.Type, []byte, []byte, []byte, bool) {
	el, rest, ok := bsoncore.ReadElement(rem)
	if !ok {
		return 0, nil, nil, rem, false
	}
	key, err := el.KeyBytesErr()
	if err != nil {
		return 0, nil, nil, rem, false
	}
	v, err := el.ValueErr()
	if err != nil {
		return 0, nil, nil, rem, false
	}
	return bson.Type(v.Type), key, v.Data, rest, true
}

// TestNextElementMatchesDriver: on valid elements of every type and on
// random mutations of them, nextElement accepts and splits exactly as the
// driver does.
func TestNextElementMatchesDriver(t *testing.T) {
	doc, err := bson.Marshal(bson.D{
		{Key: "d", Value: 1.5}, {Key: "s", Value: "str"}, {Key: "o", Value: bson.D{{Key: "x", Value: int32(1)}}},
		{Key: "a", Value: bson.A{"x", int64(2)}}, {Key: "b", Value: bson.Binary{Subtype: 0, Data: []byte{1, 2}}},
		{Key: "u", Value: bson.Undefined{}}, {Key: "id", Value: bson.ObjectID{1}}, {Key: "t", Value: true},
		{Key: "dt", Value: bson.DateTime(5)}, {Key: "n", Value: nil}, {Key: "re", Value: bson.Regex{Pattern: "a", Options: "i"}},
		{Key: "dbp", Value: bson.DBPointer{DB: "db", Pointer: bson.ObjectID{2}}}, {Key: "js", Value: bson.JavaScript("f()")},
		{Key: "sym", Value: bson.Symbol("s")}, {Key: "cws", Value: bson.CodeWithScope{Code: "c", Scope: bson.D{}}},
		{Key: "i", Value: int32(7)}, {Key: "ts", Value: bson.Timestamp{T: 1, I: 2}}, {Key: "l", Value: int64(9)},
		{Key: "dec", Value: bson.NewDecimal128(1, 2)}, {Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := doc[4 : len(doc)-1]
	r := rand.New(rand.NewPCG(1, 2))
	check := func(in []byte) {
		t.Helper()
		gt, gk, gv, grest, gok := nextElement(in)
		wt, wk, wv, wrest, wok := referenceElement(in)
		if gok != wok || gt != wt || !bytes.Equal(gk, wk) || !bytes.Equal(gv, wv) || len(grest) != len(wrest) {
			t.Fatalf("input %x:\n got %v %q %x rest %d\nwant %v %q %x rest %d", in, gok, gk, gv, len(grest), wok, wk, wv, len(wrest))
		}
	}
	n := 0
	for rem := body; len(rem) > 0; n++ {
		check(rem)
		_, _, _, rem, _ = nextElement(rem)
	}
	if n != 21 {
		t.Fatalf("walked %d elements, want 21", n)
	}
	for range 20000 {
		b := bytes.Clone(body[r.IntN(len(body)):])
		for range 1 + r.IntN(3) {
			if len(b) > 0 {
				b[r.IntN(len(b))] = byte(r.IntN(256))
			}
		}
		b = b[:r.IntN(len(b)+1)]
		check(b)
	}
}

// BenchmarkDecodeSubmission decodes a submission as the demo generator
// (and the Back-End) stores it.
func BenchmarkDecodeSubmission(b *testing.B) {
	doc, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.ObjectID{1, 2, 3}}, {Key: "problem", Value: int32(17)}, {Key: "user", Value: "student01234"},
		{Key: "languageType", Value: int32(1)}, {Key: "timestamp", Value: bson.DateTime(1_700_000_000_000)},
		{Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}, {Key: "tasks", Value: bson.A{}},
		{Key: "runTime", Value: int32(12)}, {Key: "memoryUsage", Value: int32(1024)}, {Key: "codeMinioPath", Value: nil},
		{Key: "lastSend", Value: bson.DateTime(1_700_000_000_000)}, {Key: "ip_addr", Value: "127.0.0.1"},
	})
	if err != nil {
		b.Fatal(err)
	}
	name := "student01234"
	intern := func([]byte) string { return name }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSubmissionInterned(doc, intern); err != nil {
			b.Fatal(err)
		}
	}
}
