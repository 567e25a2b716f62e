package materialize_test

import (
	"errors"
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
