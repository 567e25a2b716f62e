package offline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// withDuplicateIDs adds, after the documents of docs, decodable copies
// under existing _ids: a homework with another studentStatus, a user with
// other stored fields, a problem listing other homeworks, a submission
// with another timestamp and score.
func withDuplicateIDs(r *rand.Rand, docs materialize.Docs) materialize.Docs {
	if n := len(docs.Homeworks); n > 0 {
		h := docs.Homeworks[r.IntN(n)]
		if _, err := materialize.DecodeHomework(h); err == nil {
			id := h.Lookup("_id").ObjectID()
			stale := mtest.D("score", int32(9), "problemStatus", int32(1), "submissionIds", bson.A{"y"})
			ss := mtest.D("u0", mtest.D("0", stale, "1", stale, "2", stale, "5", stale), "ghost0", mtest.D("1", stale))
			docs.Homeworks = append(docs.Homeworks, mtest.Raw("_id", id, "penalty", "score = score - 1", "studentStatus", ss))
			if r.IntN(2) == 0 { // the original again, after the copy
				docs.Homeworks = append(docs.Homeworks, h)
			}
		}
	}
	if n := len(docs.Users); n > 0 {
		u := docs.Users[r.IntN(n)]
		if name, err := materialize.DecodeUserID(u); err == nil {
			docs.Users = append(docs.Users, mtest.Raw("_id", name, "submission", int32(77), "extra", true))
		}
	}
	if n := len(docs.Problems); n > 0 {
		p := docs.Problems[r.IntN(n)]
		var hs bson.A
		for _, h := range docs.Homeworks {
			if r.IntN(2) == 0 {
				hs = append(hs, h.Lookup("_id"))
			}
		}
		docs.Problems = append(docs.Problems, mtest.Raw("_id", p.Lookup("_id"), "homeworks", hs))
	}
	if n := len(docs.Submissions); n > 0 {
		s := docs.Submissions[r.IntN(n)]
		if sub, err := materialize.DecodeSubmission(s); err == nil {
			docs.Submissions = append(docs.Submissions, mtest.Raw("_id", sub.ID, "user", sub.User, "problem", sub.Problem,
				"timestamp", bson.DateTime(sub.Timestamp+1), "status", int32(0), "score", int32(100)))
		}
	}
	return docs
}

// TestRunDuplicateIDsAsReference: on dumps holding several documents
// under one _id (which memstore cannot hold), the output's last document
// of each _id holds the values the independent reference derives (a later
// document replacing an earlier one), and every earlier one is copied
// unchanged.
func TestRunDuplicateIDsAsReference(t *testing.T) {
	for s := uint64(1); s <= 150; s++ {
		r := rand.New(rand.NewPCG(s, 2))
		docs := withDuplicateIDs(r, randomDump(r))
		t.Run(fmt.Sprintf("seed%d", s), func(t *testing.T) {
			root := t.TempDir()
			in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
			d := writeTestDump(t, in, docs)
			if _, err := Run(context.Background(), d, Options{Out: out}); err != nil {
				t.Fatal(err)
			}
			od, err := dump.Resolve(out, "normal-oj")
			if err != nil {
				t.Fatal(err)
			}
			last := func(coll string, input []bson.Raw) []bson.Raw {
				got, err := od.Read(coll)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(input) {
					t.Fatalf("%s: %d documents written, %d read", coll, len(got), len(input))
				}
				at := map[string]int{}
				for i, doc := range got {
					id, err := doc.LookupErr("_id")
					if err != nil {
						continue
					}
					k := string(rune(id.Type)) + string(id.Value)
					if j, ok := at[k]; ok && !bytes.Equal(got[j], input[j]) {
						t.Errorf("%s %v: an earlier duplicate was rewritten", coll, id)
					}
					at[k] = i
				}
				var keep []bson.Raw
				for i, doc := range got {
					if id, err := doc.LookupErr("_id"); err != nil || at[string(rune(id.Type))+string(id.Value)] == i {
						keep = append(keep, doc)
					}
				}
				return keep
			}
			want := reference.Derive(reference.DB{Users: docs.Users, Problems: docs.Problems, Homeworks: docs.Homeworks, Submissions: docs.Submissions})
			outDB := reference.DB{Users: last(materialize.CollUser, docs.Users), Problems: docs.Problems,
				Homeworks: last(materialize.CollHomework, docs.Homeworks), Submissions: docs.Submissions}
			if diffs := reference.Compare(want, outDB); len(diffs) > 0 {
				t.Fatalf("output differs from the reference:\n%q", diffs)
			}
		})
	}
}
