package mongodb

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/normal-oj/noj-materializer/watch"
)

func writeErrs(codes ...int) []mongo.BulkWriteError {
	out := make([]mongo.BulkWriteError, len(codes))
	for i, c := range codes {
		out[i] = mongo.BulkWriteError{WriteError: mongo.WriteError{Index: i, Code: c, Message: fmt.Sprintf("code %d", c)}}
	}
	return out
}

// TestRefusedWrites: only an allowlist of permanent
// per-write codes is skipped for good; step-down, shutdown, network and
// unknown codes, write concern errors and labelled errors are retried.
func TestRefusedWrites(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		permanent int // refused models, -1: retry
	}{
		{"nil", nil, -1},
		{"too large", mongo.BulkWriteException{WriteErrors: writeErrs(10334)}, 1},
		{"too large after update", mongo.BulkWriteException{WriteErrors: writeErrs(17419)}, 1},
		{"validator", mongo.BulkWriteException{WriteErrors: writeErrs(121, 121)}, 2},
		{"bad value, dollar, empty, dotted", mongo.BulkWriteException{WriteErrors: writeErrs(2, 52, 56, 57)}, 4},
		{"path not viable", fmt.Errorf("wrapped: %w", mongo.BulkWriteException{WriteErrors: writeErrs(28)}), 1},
		{"NotWritablePrimary per write (mongos)", mongo.BulkWriteException{WriteErrors: writeErrs(10107)}, -1},
		{"PrimarySteppedDown", mongo.BulkWriteException{WriteErrors: writeErrs(189)}, -1},
		{"InterruptedDueToReplStateChange", mongo.BulkWriteException{WriteErrors: writeErrs(11602)}, -1},
		{"ShutdownInProgress", mongo.BulkWriteException{WriteErrors: writeErrs(91)}, -1},
		{"InterruptedAtShutdown", mongo.BulkWriteException{WriteErrors: writeErrs(11600)}, -1},
		{"HostUnreachable", mongo.BulkWriteException{WriteErrors: writeErrs(6)}, -1},
		{"unknown code", mongo.BulkWriteException{WriteErrors: writeErrs(99999)}, -1},
		{"DuplicateKey of a racing upsert", mongo.BulkWriteException{WriteErrors: writeErrs(11000)}, -1},
		{"mixed permanent and step-down", mongo.BulkWriteException{WriteErrors: writeErrs(121, 10107)}, -1},
		{"write concern error", mongo.BulkWriteException{WriteErrors: writeErrs(121), WriteConcernError: &mongo.WriteConcernError{Code: 64, Name: "WriteConcernTimeout"}}, -1},
		{"retryable label", mongo.BulkWriteException{WriteErrors: writeErrs(121), Labels: []string{"RetryableWriteError"}}, -1},
		{"no write errors", mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 91}}, -1},
		{"command error", mongo.CommandError{Code: 10107, Name: "NotWritablePrimary"}, -1},
		{"plain", errors.New("connection reset"), -1},
	}
	for _, c := range cases {
		r, ok := refusedWrites(c.err)
		got := -1
		if ok {
			got = len(r)
		}
		if got != c.permanent {
			t.Errorf("%s: rejected %d (ok %v), want %d", c.name, got, ok, c.permanent)
		}
	}
}

// TestWriteSessionKeepsImplicitSemantics: the explicit session of a bulk
// write exists only to learn the reply's operationTime; it must not be
// causally consistent. The driver sends readConcern.afterClusterTime on
// the writes of a causally consistent session that has an operation time
// (x/mongo/driver/operation.go:1612-1619, DRIVERS-3274): a retry after a
// fail-over would then wait until the new primary's oplog passes the old
// primary's last applied time, which may include writes that roll back,
// holding the write until the periodic no-op or the write deadline.
func TestWriteSessionKeepsImplicitSemantics(t *testing.T) {
	d, md, sent := mockDB(t)
	old := bson.Timestamp{T: 1_800_000_100, I: 1}
	notPrimary := append(commandError(10107, "NotWritablePrimary", "not primary", "RetryableWriteError"), bson.E{Key: "operationTime", Value: old})
	md.AddResponses(notPrimary, bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: bson.Timestamp{T: 1_800_000_090, I: 5}}})
	if _, err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 2 {
		t.Fatalf("%d commands, want the update and its retry", len(cmds))
	}
	if rc, err := cmds[1].LookupErr("readConcern"); err == nil {
		t.Errorf("retried update carries readConcern %s: the write session is causally consistent", rc)
	}
}

// TestApplyOperationTime: Apply returns the latest operationTime of its
// bulk writes (the users', the entries'), which is also the write clock
// reads wait for; zero when a reply carries none, when some models were
// refused, or when the majority did not acknowledge the write.
func TestApplyOperationTime(t *testing.T) {
	t1, t2 := bson.Timestamp{T: 1_800_000_100, I: 3}, bson.Timestamp{T: 1_800_000_100, I: 9}
	ok := func(at *bson.Timestamp) bson.D {
		d := bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}}
		if at != nil {
			d = append(d, bson.E{Key: "operationTime", Value: *at})
		}
		return d
	}
	both := &watch.Writes{Users: []watch.UserWrite{{User: "alice"}},
		Entries: []watch.EntryWrite{{Homework: bson.ObjectID{11: 1}, User: "alice", ProblemKey: "7"}}}
	cases := []struct {
		name    string
		replies []bson.D
		want    bson.Timestamp
		err     bool
	}{
		{"the later of the two bulk writes", []bson.D{ok(&t2), ok(&t1)}, t2, false},
		{"a reply without operationTime", []bson.D{ok(&t1), ok(nil)}, bson.Timestamp{}, false},
		{"refused models", []bson.D{ok(&t1), {{Key: "ok", Value: 1}, {Key: "n", Value: 0}, {Key: "operationTime", Value: t2},
			{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 121}, {Key: "errmsg", Value: "validation"}}}}}},
			bson.Timestamp{}, true},
		{"a write concern error", []bson.D{ok(&t1), {{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "operationTime", Value: t2},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 64}, {Key: "codeName", Value: "WriteConcernTimeout"}, {Key: "errmsg", Value: "timeout"}}}}},
			bson.Timestamp{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, _ := mockDB(t)
			md.AddResponses(c.replies...)
			at, err := d.Apply(context.Background(), both)
			if (err != nil) != c.err {
				t.Fatalf("Apply: %v, want error %v", err, c.err)
			}
			if at != c.want {
				t.Errorf("operationTime %v, want %v", at, c.want)
			}
			if !c.err && !c.want.IsZero() && d.written.load() != c.want {
				t.Errorf("write clock %v, want %v", d.written.load(), c.want)
			}
		})
	}
}
