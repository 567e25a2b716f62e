package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"mongodb://localhost:27017/?replicaSet=rs0", "mongodb://localhost:27017/?replicaSet=rs0"},
		{"mongodb://user:s3cret@h1:27017,h2:27017/normal-oj?replicaSet=rs0", "mongodb://user:xxxxx@h1:27017,h2:27017/normal-oj?replicaSet=rs0"},
		{"mongodb+srv://user:p%40ss%2Fw@cluster0.example.net/", "mongodb+srv://user:xxxxx@cluster0.example.net/"},
		{"mongodb://user@h/?authMechanism=MONGODB-X509", "mongodb://user@h/?authMechanism=MONGODB-X509"},
		// unescaped '@' and '/' in the password (invalid, but must not leak)
		{"mongodb://user:p@ss/word@h:1/db", "mongodb://user:xxxxx@h:1/db"},
		{"mongodb://u:pw@h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok&appName=x",
			"mongodb://u:xxxxx@h/?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx&appName=x"},
		{"mongodb://h/?tlsCertificateKeyFilePassword=kfp", "mongodb://h/?tlsCertificateKeyFilePassword=xxxxx"},
		{"user:pw@h", "user:xxxxx@h"},
		{"", ""},
	}
	for _, c := range cases {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestScrubKeepsChain(t *testing.T) {
	uri := "mongodb://u:p%40ss@h/?authMechanismProperties=AWS_SESSION_TOKEN:tok"
	secrets := uriSecrets(uri)
	base := mongo.CommandError{Code: 18, Message: "auth failed for p@ss with p%40ss and AWS_SESSION_TOKEN:tok"}
	err := scrub(fmt.Errorf("%s: %w", Redact(uri), base), secrets)
	msg := err.Error()
	for _, s := range []string{"p@ss", "p%40ss", "AWS_SESSION_TOKEN:tok"} {
		if strings.Contains(msg, s) {
			t.Errorf("error %q leaks %q", msg, s)
		}
	}
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 18 {
		t.Errorf("errors.As lost the CommandError: %v", err)
	}
	if e := errors.New("plain"); scrub(e, secrets) != e {
		t.Error("scrub rewrapped an error without secrets")
	}
}

func TestParseVersion(t *testing.T) {
	cases := []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"7.0.12", 7, 0, true},
		{"4.4.0-rc3", 4, 4, true},
		{"4.2", 4, 2, true},
		{"8.0.0-alpha-1234-gabcdef", 8, 0, true},
		{"", 0, 0, false},
		{"4", 0, 0, false},
		{"x.4.1", 0, 0, false},
		{"4.y", 0, 0, false},
	}
	for _, c := range cases {
		major, minor, err := parseVersion(c.in)
		if (err == nil) != c.ok || major != c.major || minor != c.minor {
			t.Errorf("parseVersion(%q) = %d, %d, %v; want %d, %d, ok=%v", c.in, major, minor, err, c.major, c.minor, c.ok)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"4.4.0", "4.4.29", "5.0.0", "6.0.1", "7.0.12", "8.0.4", "10.0.0", "4.10.0"} {
		if err := checkVersion(v); err != nil {
			t.Errorf("checkVersion(%q) = %v, want nil", v, err)
		}
	}
	for _, v := range []string{"4.2.24", "4.0.28", "3.6.23", "2.6.0"} {
		err := checkVersion(v)
		want := "MongoDB 4.4 or newer is required (mongo-driver v2.10 and change streams with postBatchResumeToken); server is " + v
		if err == nil || err.Error() != want {
			t.Errorf("checkVersion(%q) = %v, want %q", v, err, want)
		}
	}
	if err := checkVersion("garbage"); err == nil || !strings.Contains(err.Error(), "MongoDB 4.4 or newer is required") {
		t.Errorf("checkVersion(garbage) = %v", err)
	}
}

func TestCheckTopology(t *testing.T) {
	if err := checkTopology(mtest.Raw("isWritablePrimary", true, "setName", "rs0")); err != nil {
		t.Errorf("replica set member: %v", err)
	}
	if err := checkTopology(mtest.Raw("isWritablePrimary", true, "msg", "isdbgrid")); err != nil {
		t.Errorf("mongos: %v", err)
	}
	err := checkTopology(mtest.Raw("isWritablePrimary", true, "maxWireVersion", 21))
	if err == nil || !strings.Contains(err.Error(), "change streams need a replica set; see docs/install.md to convert a standalone") {
		t.Errorf("standalone: %v", err)
	}
	// Read-only tools (verify, status, seed, explain) accept a standalone.
	if standalone, err := topology(mtest.Raw("isWritablePrimary", true, "maxWireVersion", 21), true); err != nil || !standalone {
		t.Errorf("standalone with AllowStandalone: %v, %v", standalone, err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{URI: "mongodb://h"}.withDefaults()
	if c.Database != "normal-oj" || c.CheckpointCollection != "materializer_checkpoints" ||
		c.KeysCollection != "materializer_submission_keys" || c.WriteTimeout != 5*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	c = Config{Database: "d", CheckpointCollection: "c", KeysCollection: "k", WriteTimeout: time.Second}.withDefaults()
	if c.Database != "d" || c.CheckpointCollection != "c" || c.KeysCollection != "k" || c.WriteTimeout != time.Second {
		t.Errorf("explicit values changed: %+v", c)
	}
}

// timeoutNetErr is a net.Error that timed out.
type timeoutNetErr struct{}

func (timeoutNetErr) Error() string   { return "i/o timeout" }
func (timeoutNetErr) Timeout() bool   { return true }
func (timeoutNetErr) Temporary() bool { return true }

var _ net.Error = timeoutNetErr{}

// TestClassify: every error class the adapter's one classification
// function decides, over constructed driver errors (the fault policy).
func TestClassify(t *testing.T) {
	overloaded := mongo.CommandError{Code: 462, Name: "IngressRequestRateLimitExceeded", Labels: []string{"SystemOverloadedError", "RetryableError"}}
	cases := []struct {
		name string
		err  error
		want watch.Class
	}{
		{"ChangeStreamHistoryLost", mongo.CommandError{Code: 286, Name: "ChangeStreamHistoryLost", Message: "Resume of change stream was not possible, as the resume point may no longer be in the oplog."}, watch.HistoryLost},
		{"280 history lost", mongo.CommandError{Code: 280, Name: "ChangeStreamFatalError", Message: "resume of change stream was not possible, as the resume point may no longer be in the oplog."}, watch.HistoryLost},
		{"280 other", mongo.CommandError{Code: 280, Name: "ChangeStreamFatalError", Message: "cannot resume stream: the stream was invalidated"}, watch.Fatal},
		{"286 wrapped", fmt.Errorf("x: %w", mongo.CommandError{Code: 286}), watch.HistoryLost},
		{"network label", mongo.CommandError{Labels: []string{"NetworkError"}, Wrapped: errors.New("connection reset")}, watch.Transient},
		{"resumable label", mongo.CommandError{Code: 1234, Labels: []string{"ResumableChangeStreamError"}}, watch.Transient},
		{"retryable write label", mongo.CommandError{Code: 1234, Labels: []string{"RetryableWriteError"}}, watch.Transient},
		{"RetryableError label", mongo.CommandError{Code: 1234, Labels: []string{"RetryableError"}}, watch.Transient},
		{"SystemOverloadedError label", overloaded, watch.Overloaded},
		{"SystemOverloadedError wrapped", fmt.Errorf("find: %w", overloaded), watch.Overloaded},
		{"KeyNotFound", mongo.CommandError{Code: 211, Name: "KeyNotFound", Message: "No keys found for HMAC that is valid for time"}, watch.Transient},
		{"QueryPlanKilled", mongo.CommandError{Code: 175, Name: "QueryPlanKilled", Message: "query plan killed :: caused by :: collection dropped"}, watch.Transient},
		{"NotWritablePrimary", mongo.CommandError{Code: 10107, Name: "NotWritablePrimary"}, watch.Transient},
		{"PrimarySteppedDown", mongo.CommandError{Code: 189}, watch.Transient},
		{"InterruptedDueToReplStateChange", mongo.CommandError{Code: 11602}, watch.Transient},
		{"ShutdownInProgress", mongo.CommandError{Code: 91}, watch.Transient},
		{"CursorNotFound", mongo.CommandError{Code: 43}, watch.Transient},
		{"CappedPositionLost", mongo.CommandError{Code: 136}, watch.Transient},
		{"deadline", fmt.Errorf("server selection error: %w", context.DeadlineExceeded), watch.Transient},
		{"net timeout", fmt.Errorf("read: %w", timeoutNetErr{}), watch.Transient},
		{"canceled", context.Canceled, watch.Cancelled},
		{"canceled with a network label", mongo.CommandError{Labels: []string{"NetworkError"}, Wrapped: context.Canceled}, watch.Cancelled},
		{"Unauthorized", mongo.CommandError{Code: 13, Name: "Unauthorized"}, watch.Unauthorized},
		{"Unauthorized as a write error", mongo.BulkWriteException{WriteErrors: writeErrs(13)}, watch.Unauthorized},
		{"AuthenticationFailed", mongo.CommandError{Code: 18, Name: "AuthenticationFailed"}, watch.Unauthorized},
		{"InvalidResumeToken", mongo.CommandError{Code: 260, Name: "InvalidResumeToken"}, watch.ResumeImpossible},
		{"BSONObjectTooLarge", mongo.CommandError{Code: 10334, Name: "BSONObjectTooLarge", Message: "BSONObj size: 17000000 (0x1036640) is invalid. Size must be between 0 and 16793600(16MB)"}, watch.ResumeImpossible},
		{"CursorKilled", mongo.CommandError{Code: 237, Name: "CursorKilled"}, watch.Overloaded},
		{"Interrupted", mongo.CommandError{Code: 11601, Name: "Interrupted", Message: "operation was interrupted"}, watch.Overloaded},
		{"ReadConcernMajorityNotAvailableYet", mongo.CommandError{Code: 134}, watch.Transient},
		{"ReadConcernMajorityNotEnabled", mongo.CommandError{Code: 148}, watch.Fatal},
		{"client disconnected", fmt.Errorf("find: %w", mongo.ErrClientDisconnected), watch.Fatal},
		{"refused bulk write", mongo.BulkWriteException{WriteErrors: writeErrs(121)}, watch.Refused},
		{"refused single write", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 10334, Message: "too large"}}}, watch.Refused},
		{"ErrWriteRejected", fmt.Errorf("x: %w", watch.ErrWriteRejected), watch.Refused},
		{"bulk write with a write concern error", mongo.BulkWriteException{WriteErrors: writeErrs(121), WriteConcernError: &mongo.WriteConcernError{Code: 64}}, watch.Transient},
		{"bulk write, unknown code", mongo.BulkWriteException{WriteErrors: writeErrs(99999)}, watch.Transient},
		{"bulk write, DuplicateKey of a racing upsert", mongo.BulkWriteException{WriteErrors: writeErrs(11000)}, watch.Transient},
		{"marked already", watch.WithClass(watch.NotPrimary, errors.New("x")), watch.NotPrimary},
		{"legacy sentinel", fmt.Errorf("x: %w", watch.ErrHistoryLost), watch.HistoryLost},
		{"unknown code", mongo.CommandError{Code: 424242}, watch.Unclassified},
		{"plain", errors.New("boom"), watch.Unclassified},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("%s: classify(%v) = %s, want %s", c.name, c.err, got, c.want)
		}
		err := fail("normal-oj", need{}, "op", c.err)
		if got := watch.ClassOf(err); got != c.want && c.want != watch.Unclassified {
			t.Errorf("%s: ClassOf(fail(...)) = %s, want %s", c.name, got, c.want)
		}
		if want, ok := c.err.(mongo.CommandError); ok {
			// CommandError is not comparable (it holds slices): check by As.
			var got mongo.CommandError
			if !errors.As(err, &got) || got.Code != want.Code {
				t.Errorf("%s: original error lost from the chain: %v", c.name, err)
			}
		}
		if !strings.HasPrefix(err.Error(), "op: ") {
			t.Errorf("%s: no context: %v", c.name, err)
		}
	}
	if fail("normal-oj", need{}, "op", nil) != nil || classify(nil) != watch.Unclassified {
		t.Error("nil error classified")
	}
}

func TestClusterTimeOf(t *testing.T) {
	ts := func(t, i uint32) bson.Timestamp { return bson.Timestamp{T: t, I: i} }
	resp := mtest.Raw("ok", 1.0,
		"$clusterTime", mtest.D("clusterTime", ts(100, 5), "signature", mtest.D("hash", []byte{0}, "keyId", int64(0))),
		"operationTime", ts(100, 3))
	got, err := clusterTimeOf(resp)
	if err != nil || got != ts(100, 3) {
		t.Errorf("both present: %v, %v; want the earlier, operationTime", got, err)
	}
	got, err = clusterTimeOf(mtest.Raw("ok", 1.0, "$clusterTime", mtest.D("clusterTime", ts(7, 1))))
	if err != nil || got != ts(7, 1) {
		t.Errorf("only $clusterTime: %v, %v", got, err)
	}
	got, err = clusterTimeOf(mtest.Raw("ok", 1.0, "operationTime", ts(9, 2)))
	if err != nil || got != ts(9, 2) {
		t.Errorf("only operationTime: %v, %v", got, err)
	}
	if _, err := clusterTimeOf(mtest.Raw("ok", 1.0)); err == nil {
		t.Error("standalone response: no error")
	}
}

func TestStreamOptions(t *testing.T) {
	apply := func(b *options.ChangeStreamOptionsBuilder) options.ChangeStreamOptions {
		var o options.ChangeStreamOptions
		for _, f := range b.List() {
			if err := f(&o); err != nil {
				t.Fatal(err)
			}
		}
		return o
	}
	token := mtest.Raw("_data", "8263A1")
	o := apply(streamOptions(Config{MaxAwait: 2 * time.Second, ChangeStreamBatchSize: 100},
		watch.Position{Token: token, StartAt: bson.Timestamp{T: 5, I: 1}}))
	if o.StartAfter == nil || o.ResumeAfter != nil || o.StartAtOperationTime != nil {
		t.Errorf("token: startAfter %v resumeAfter %v startAt %v", o.StartAfter, o.ResumeAfter, o.StartAtOperationTime)
	}
	if o.MaxAwaitTime == nil || *o.MaxAwaitTime != 2*time.Second || o.BatchSize == nil || *o.BatchSize != 100 {
		t.Errorf("await/batch: %v %v", o.MaxAwaitTime, o.BatchSize)
	}
	if o.FullDocument == nil || *o.FullDocument != options.Default {
		t.Errorf("fullDocument: %v, want default (no updateLookup)", o.FullDocument)
	}
	o = apply(streamOptions(Config{}, watch.Position{StartAt: bson.Timestamp{T: 5, I: 1}}))
	if o.StartAtOperationTime == nil || *o.StartAtOperationTime != (bson.Timestamp{T: 5, I: 1}) || o.StartAfter != nil {
		t.Errorf("startAt: %v %v", o.StartAtOperationTime, o.StartAfter)
	}
	if o.MaxAwaitTime != nil || o.BatchSize != nil {
		t.Errorf("zero config set await/batch: %v %v", o.MaxAwaitTime, o.BatchSize)
	}
	o = apply(streamOptions(Config{}, watch.Position{}))
	if o.StartAtOperationTime != nil || o.StartAfter != nil || o.ResumeAfter != nil {
		t.Error("empty position set a start")
	}
}

// TestOpenErrorRedacted opens an unreachable server (nothing listens on
// port 1) with credentials: the error names the redacted URI and holds no
// password.
func TestOpenErrorRedacted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	uri := "mongodb://materializer:Sup3rSecret@127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"
	db, err := Open(ctx, Config{URI: uri})
	if err == nil {
		_ = db.Close(ctx)
		t.Fatal("Open of an unreachable server succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "Sup3rSecret") {
		t.Errorf("error leaks the password: %s", msg)
	}
	if !strings.Contains(msg, "materializer:xxxxx@127.0.0.1:1") || !strings.Contains(msg, "ping") {
		t.Errorf("error lacks context: %s", msg)
	}
	if _, err := Open(ctx, Config{URI: "mongodb://u:Sup3rSecret@h/?authMechanism=NOPE"}); err == nil || strings.Contains(err.Error(), "Sup3rSecret") {
		t.Errorf("bad URI: %v", err)
	}
}

// TestClusterTimeMissingIsTransient: a replica set member can answer
// without operationTime and $clusterTime for a while after it starts
// (with --keyFile, until its signing keys exist: SERVER-43086), as a
// compose file that starts MongoDB and the daemon together meets on the
// first rebuild. That is worth a retry, not the exit that marking it
// fatal causes (and the restart loop after it). A standalone has no
// cluster time at all and never gets here (Standalone).
func TestClusterTimeMissingIsTransient(t *testing.T) {
	d, md, _ := mockDB(t)
	md.AddResponses(emptyCursor("normal-oj.materializer_checkpoints"))
	_, err := d.ClusterTime(context.Background())
	if c := watch.ClassOf(err); c != watch.Transient {
		t.Errorf("ClusterTime with no operationTime in the reply: class %s (%v), want transient", c, err)
	}
}

// TestOpenUninitiatedReplicaSet: a mongod started with --replSet whose set
// was never initiated (the likeliest mistake when converting Normal-OJ's
// standalone) answers hello with isreplicaset true and no setName. Reached
// with directConnection=true (the demo's URI) it must not be called a
// standalone, for any command: the fix is rs.initiate(), not a conversion.
func TestOpenUninitiatedReplicaSet(t *testing.T) {
	ghost := bson.D{{Key: "isWritablePrimary", Value: false}, {Key: "secondary", Value: false}, {Key: "isreplicaset", Value: true},
		{Key: "info", Value: "Does not have a valid replica set config"}, {Key: "maxWireVersion", Value: int32(21)}}
	for _, cfg := range []Config{{Writes: true}, {}, {AllowStandalone: true, Writes: true}, {AllowStandalone: true}} {
		client, md, _ := mockClient(t)
		md.AddResponses(openReplies(ghost)...)
		_, err := open(context.Background(), client, cfg.withDefaults())
		if err == nil {
			t.Errorf("%+v: open of an uninitiated replica set member succeeded", cfg)
			continue
		}
		if !strings.Contains(err.Error(), "rs.initiate()") || strings.Contains(err.Error(), "is a standalone") {
			t.Errorf("%+v: %v: want rs.initiate() named, not a standalone", cfg, err)
		}
		if c := watch.ClassOf(err); c != watch.NotPrimary {
			t.Errorf("%+v: class %s, want not_primary", cfg, c)
		}
	}
}
