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
	if err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
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
