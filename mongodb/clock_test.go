package mongodb

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/watch"
)

// TestWriteClockAfterWriteConcernError: the write clock advances to the
// operationTime of a reply only when the majority acknowledged the write.
// A reply carrying a writeConcernError (the update applied on the primary,
// not known to be majority-committed) leaves it where it was: a rollback
// would take that write away, and the next batch's majority reads, sent
// with afterClusterTime at that time, would wait on a new primary for
// nothing. Write errors alone (models refused, the rest majority
// acknowledged) do advance it, and so does a write the driver retried
// after a retryable write concern error.
func TestWriteClockAfterWriteConcernError(t *testing.T) {
	t0 := bson.Timestamp{T: 1_800_000_100, I: 1}
	t1 := bson.Timestamp{T: 1_800_000_200, I: 1}
	t2 := bson.Timestamp{T: 1_800_000_200, I: 7}
	refused := bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 121}, {Key: "errmsg", Value: "Document failed validation"}}}
	wce := func(code int32, name string, labels ...string) bson.D {
		d := bson.D{{Key: "code", Value: code}, {Key: "codeName", Value: name}, {Key: "errmsg", Value: "waiting for replication"}}
		if len(labels) > 0 {
			d = append(d, bson.E{Key: "errorLabels", Value: labels})
		}
		return d
	}
	reply := func(at bson.Timestamp, extra ...bson.E) bson.D {
		return append(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: at}}, extra...)
	}
	cases := []struct {
		name    string
		replies []bson.D
		want    bson.Timestamp
	}{
		{"acknowledged", []bson.D{reply(t1)}, t1},
		{"write concern timeout", []bson.D{reply(t1, bson.E{Key: "writeConcernError", Value: wce(64, "WriteConcernTimeout")})}, t0},
		{"write concern unsatisfiable", []bson.D{reply(t1, bson.E{Key: "writeConcernError", Value: wce(100, "UnsatisfiableWriteConcern")})}, t0},
		{"write errors and a write concern error", []bson.D{reply(t1, bson.E{Key: "writeErrors", Value: refused},
			bson.E{Key: "writeConcernError", Value: wce(64, "WriteConcernTimeout")})}, t0},
		{"write errors only", []bson.D{reply(t1, bson.E{Key: "writeErrors", Value: refused})}, t1},
		{"retried after a retryable write concern error", []bson.D{
			reply(t1, bson.E{Key: "writeConcernError", Value: wce(91, "ShutdownInProgress", "RetryableWriteError")}),
			reply(t2)}, t2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, _ := mockDB(t)
			md.AddResponses(reply(t0))
			w := &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}
			if _, err := d.Apply(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			md.AddResponses(c.replies...)
			_, _ = d.Apply(context.Background(), w) // its error is the writer's tests' concern
			if got := d.written.load(); got != c.want {
				t.Errorf("write clock %v, want %v", got, c.want)
			}
		})
	}
}
