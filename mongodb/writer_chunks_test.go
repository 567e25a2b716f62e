package mongodb

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestApplyOperationTimeAcrossChunks: a bulk write split into chunks of
// writeChunk models returns an operationTime only when every chunk's
// reply carries one. A chunk without one may have landed after the
// others: the later time of the known chunks would understate it, and the
// echo records and the write clock would claim a time that does not
// cover every write.
func TestApplyOperationTimeAcrossChunks(t *testing.T) {
	t1, t2 := bson.Timestamp{T: 1_800_000_100, I: 3}, bson.Timestamp{T: 1_800_000_100, I: 9}
	reply := func(n int, at *bson.Timestamp) bson.D {
		d := bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: n}, {Key: "nModified", Value: n}}
		if at != nil {
			d = append(d, bson.E{Key: "operationTime", Value: *at})
		}
		return d
	}
	w := &watch.Writes{}
	for i := range writeChunk + 1 {
		w.Users = append(w.Users, watch.UserWrite{User: fmt.Sprintf("u%d", i)})
	}
	cases := []struct {
		name    string
		replies []bson.D
		want    bson.Timestamp
	}{
		{"both chunks known: the later", []bson.D{reply(writeChunk, &t1), reply(1, &t2)}, t2},
		{"the second chunk unknown", []bson.D{reply(writeChunk, &t1), reply(1, nil)}, bson.Timestamp{}},
		{"the first chunk unknown", []bson.D{reply(writeChunk, nil), reply(1, &t2)}, bson.Timestamp{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, cmds := mockDB(t)
			md.AddResponses(c.replies...)
			at, err := d.Apply(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(cmds()); n != 2 {
				t.Fatalf("%d commands, want 2 (chunks of %d)", n, writeChunk)
			}
			if at != c.want {
				t.Errorf("operationTime %v, want %v", at, c.want)
			}
		})
	}
}
