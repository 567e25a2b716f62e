package materialize_test

import (
	"errors"
	"math"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestDecodeSubmissionCorrupt: a submission whose bytes do not parse (an
// element running past the document's end) is a DecodeError about the
// whole document, not a panic and not a submission.
func TestDecodeSubmissionCorrupt(t *testing.T) {
	good := mtest.Raw("_id", bson.ObjectID{1}, "user", "u", "problem", int32(1), "timestamp", bson.DateTime(0))
	if _, err := materialize.DecodeSubmission(good); err != nil {
		t.Fatalf("setup: %v", err)
	}
	corrupt := append(bson.Raw(nil), good...)
	corrupt[len(corrupt)-2] = 0x7f // the last element's value now claims more bytes than remain
	corrupt = corrupt[:len(corrupt)-1]
	corrupt[0] = byte(len(corrupt)) // consistent total length, broken element
	for _, doc := range []bson.Raw{corrupt, good[:4], bson.Raw{5, 0, 0, 0}} {
		_, err := materialize.DecodeSubmission(doc)
		var de *materialize.DecodeError
		if !errors.As(err, &de) || !errors.Is(err, materialize.ErrMalformed) {
			t.Errorf("DecodeSubmission(% x): %v, want a DecodeError", []byte(doc), err)
			continue
		}
		if de.Field != "(document)" {
			t.Errorf("DecodeSubmission(% x): field %q, want the whole document", []byte(doc), de.Field)
		}
	}
}

// TestIntValue: int32, int64 and doubles holding a whole value in int64
// range are integers (-2^63 included, 2^63 not); fractions, NaN,
// infinities and other types are not.
func TestIntValue(t *testing.T) {
	cases := []struct {
		v    any
		want int64
		ok   bool
	}{
		{int32(-5), -5, true},
		{int64(math.MaxInt64), math.MaxInt64, true},
		{3.0, 3, true},
		{math.Copysign(0, -1), 0, true},
		{-9223372036854775808.0, math.MinInt64, true},
		{9223372036854775808.0, 0, false},
		{-9223372036854777856.0, 0, false}, // the next double below -2^63
		{2.5, 0, false},
		{math.NaN(), 0, false},
		{math.Inf(1), 0, false},
		{math.Inf(-1), 0, false},
		{"3", 0, false},
		{true, 0, false},
	}
	for _, c := range cases {
		typ, data, err := bson.MarshalValue(c.v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := materialize.IntValue(bson.RawValue{Type: typ, Value: data})
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("IntValue(%v %T) = %d, %v; want %d, %v", c.v, c.v, got, ok, c.want, c.ok)
		}
	}
}
