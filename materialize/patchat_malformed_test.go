package materialize_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/normal-oj/noj-materializer/materialize"
)

// malformedHomework returns a homework {_id, studentStatus: {alice: {"1":
// start entry}, bob: <bob>}} whose bob value is the raw embedded-document
// bytes given (not checked: Raw.Validate does not look inside nested
// documents), and the offset of alice's entry element.
func malformedHomework(t *testing.T, bob []byte) (bson.Raw, int) {
	t.Helper()
	entry := materialize.StartEntry().AppendBSON(nil)
	alice := bsoncore.NewDocumentBuilder().AppendDocument("1", entry).Build()
	ssIdx, ss := bsoncore.AppendDocumentStart(nil)
	ss = bsoncore.AppendDocumentElement(ss, "alice", alice)
	ss = append(ss, byte(bson.TypeEmbeddedDocument))
	ss = append(ss, "bob"...)
	ss = append(ss, 0)
	ss = append(ss, bob...)
	ss, _ = bsoncore.AppendDocumentEnd(ss, ssIdx)
	id := bson.ObjectID{1}
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendObjectIDElement(doc, "_id", id)
	doc = bsoncore.AppendDocumentElement(doc, materialize.FieldStudentStatus, ss)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	if err := bson.Raw(doc).Validate(); err != nil {
		t.Fatalf("the test document must pass Raw.Validate: %v", err)
	}
	// _id element: 1+4+12 = 17 bytes after the length; then the
	// studentStatus element: type, key, NUL, length; then alice's
	// element: type, "alice", NUL, length; then the entry element.
	elem := 4 + 17 + 1 + len(materialize.FieldStudentStatus) + 1 + 4 + 1 + len("alice") + 1 + 4
	if doc[elem] != byte(bson.TypeEmbeddedDocument) || doc[elem+1] != '1' {
		t.Fatalf("offset %d is not alice's entry", elem)
	}
	return doc, elem
}

// TestPatchAtMalformedNested: PatchAt on a homework whose
// studentStatus.<user> document is malformed inside (Raw.Validate and
// BulkHomeworkDecoder accept it; PatchEntries reports "bad document length" /
// "bad element") returns an error, as PatchEntries does, instead of panicking
// or looping forever.
func TestPatchAtMalformedNested(t *testing.T) {
	for _, c := range []struct {
		name string
		bob  []byte
	}{
		// A declared length of 4: no terminator.
		{"length 4", []byte{4, 0, 0, 0}},
		// An element without a NUL-terminated key before the terminator.
		{"unreadable element", []byte{7, 0, 0, 0, byte(bson.TypeInt32), 'x', 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, elem := malformedHomework(t, c.bob)
			// The offline path decodes such a homework (BulkHomeworkDecoder) and
			// indexes alice's entry.
			if _, err := (materialize.BulkHomeworkDecoder{}).Decode(doc); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if _, err := materialize.PatchEntries(nil, doc, func(user, pk []byte) (materialize.Entry, bool) {
				return materialize.Entry{Score: 1, SubmissionIDs: []string{}}, true
			}); err == nil {
				t.Errorf("PatchEntries: no error")
			}
			done := make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- panicError{r}
					}
				}()
				v := materialize.Entry{Score: 1, SubmissionIDs: []string{}}.AppendBSON(nil)
				_, err := materialize.PatchAt(nil, doc, []materialize.ValueAt{{Elem: elem, Value: v}})
				done <- err
			}()
			select {
			case err := <-done:
				if p, ok := err.(panicError); ok {
					t.Fatalf("PatchAt panicked: %v", p.v)
				}
				if err == nil {
					t.Errorf("PatchAt: no error, PatchEntries reports one")
				}
			case <-time.After(time.Minute):
				t.Fatal("PatchAt did not return within a minute (loops on the unreadable element)")
			}
		})
	}
}

type panicError struct{ v any }

func (p panicError) Error() string { return "panic" }
