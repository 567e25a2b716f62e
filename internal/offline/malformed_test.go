package offline

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestRunMalformedUserDocument: a homework whose studentStatus.<user>
// document is malformed inside (Raw.Validate does not look into nested
// documents, the decoder skips what it cannot read) and which has another
// entry that drifted. Writing the corrected copy must return an error
// naming the homework (as before PatchAt) rather than panic or loop forever in
// PatchAt.
func TestRunMalformedUserDocument(t *testing.T) {
	for _, c := range []struct {
		name string
		bo   []byte
	}{
		{"length 4", []byte{4, 0, 0, 0}},
		{"unreadable element", []byte{7, 0, 0, 0, byte(bson.TypeInt32), 'x', 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			stale, err := bson.Marshal(mtest.D("score", int32(5), "problemStatus", nil, "submissionIds", bson.A{"x"}))
			if err != nil {
				t.Fatal(err)
			}
			al := bsoncore.NewDocumentBuilder().AppendDocument("1", stale).Build()
			ssIdx, ss := bsoncore.AppendDocumentStart(nil)
			ss = bsoncore.AppendDocumentElement(ss, "al", al)
			ss = append(append(append(ss, byte(bson.TypeEmbeddedDocument)), "bo"...), 0)
			ss = append(ss, c.bo...)
			ss, _ = bsoncore.AppendDocumentEnd(ss, ssIdx)
			idx, hw := bsoncore.AppendDocumentStart(nil)
			hw = bsoncore.AppendObjectIDElement(hw, "_id", bson.ObjectID{1})
			hw = bsoncore.AppendDocumentElement(hw, materialize.FieldStudentStatus, ss)
			hw, _ = bsoncore.AppendDocumentEnd(hw, idx)

			root := t.TempDir()
			in := filepath.Join(root, "in")
			if err := dump.Write(in, map[string][]bson.Raw{materialize.CollUser: {mtest.Raw("_id", "al")},
				materialize.CollProblem:  {mtest.Raw("_id", int32(1), "homeworks", bson.A{bson.ObjectID{1}})},
				materialize.CollHomework: {hw}, materialize.CollSubmission: nil}); err != nil {
				t.Fatal(err)
			}
			d, err := dump.Resolve(in, "normal-oj")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				defer func() {
					if r := recover(); r != nil {
						done <- fmt.Errorf("panic: %v", r)
					}
				}()
				rep, err := Run(context.Background(), d, Options{Out: filepath.Join(root, "out")})
				if err == nil && rep.DriftedEntries != 1 {
					err = fmt.Errorf("drifted entries %d, want 1", rep.DriftedEntries)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil && len(err.Error()) > 6 && err.Error()[:6] == "panic:" {
					t.Fatal(err)
				}
				if err == nil {
					t.Fatal("Run: no error (the previous offline path reported the malformed document)")
				}
				t.Logf("Run: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("Run did not return within a minute")
			}
		})
	}
}
