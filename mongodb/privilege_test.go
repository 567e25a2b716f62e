package mongodb

import (
	"context"
	"errors"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// leastPrivilege is the role of docs/operations.md: collection → actions
// ("" is the database resource). TestRoleDocumented keeps the two in step.
var leastPrivilege = map[string][]string{
	"":                             {"changeStream", "find"},
	"submission":                   {"find", "listIndexes", "createIndex"},
	"problem":                      {"find", "listIndexes", "createIndex"},
	"homework":                     {"find", "update"},
	"user":                         {"find", "update"},
	"materializer_checkpoints":     {"find", "insert", "update", "remove", "listIndexes", "createIndex", "createCollection"},
	"materializer_submission_keys": {"find", "insert", "update", "remove", "listIndexes", "createIndex", "createCollection"},
}

// TestRoleDocumented checks that docs/operations.md grants exactly the
// actions this package's least-privilege test runs with.
func TestRoleDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`collection: "([^"]*)" \},\s*actions: \[([^\]]*)\]`)
	got := map[string][]string{}
	for _, m := range re.FindAllStringSubmatch(string(doc), -1) {
		var acts []string
		for _, a := range strings.Split(m[2], ",") {
			acts = append(acts, strings.Trim(strings.TrimSpace(a), `"`))
		}
		got[m[1]] = acts
	}
	if len(got) != len(leastPrivilege) {
		t.Fatalf("docs grant %d resources, the test role %d: %v", len(got), len(leastPrivilege), got)
	}
	for coll, want := range leastPrivilege {
		if strings.Join(got[coll], ",") != strings.Join(want, ",") {
			t.Errorf("collection %q: docs grant %v, test role %v", coll, got[coll], want)
		}
	}
}

// TestIntegrationLeastPrivilege runs the daemon's whole repertoire (index
// creation, rebuild, stream, writes, key index, lease, fenced checkpoint) as
// a user holding only the documented role. It needs a server that enforces
// authorization (mongod --auth with a keyFile for a replica set) and a
// MATERIALIZER_TEST_MONGODB_URI whose user may create roles and users.
func TestIntegrationLeastPrivilege(t *testing.T) {
	admin := testDB(t)
	ctx := testCtx(t)
	if !authEnforced(ctx, t) {
		t.Skip("the test server does not enforce authorization: start mongod with --auth (and --keyFile for a replica set) and give MATERIALIZER_TEST_MONGODB_URI a user that may create roles")
	}
	dbName := admin.Database()
	var privs bson.A
	for coll, acts := range leastPrivilege {
		privs = append(privs, bson.D{{Key: "resource", Value: bson.D{{Key: "db", Value: dbName}, {Key: "collection", Value: coll}}},
			{Key: "actions", Value: acts}})
	}
	run := func(cmd bson.D) {
		if err := admin.db.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd[0].Key, err)
		}
	}
	run(bson.D{{Key: "createRole", Value: "nojMaterializer"}, {Key: "privileges", Value: privs}, {Key: "roles", Value: bson.A{}}})
	run(bson.D{{Key: "createUser", Value: "noj-materializer"}, {Key: "pwd", Value: "s3cret-pw"},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "nojMaterializer"}, {Key: "db", Value: dbName}}}}})
	t.Cleanup(func() {
		_ = admin.db.RunCommand(context.Background(), bson.D{{Key: "dropUser", Value: "noj-materializer"}}).Err()
		_ = admin.db.RunCommand(context.Background(), bson.D{{Key: "dropRole", Value: "nojMaterializer"}}).Err()
	})
	vs, err := mtest.ReadVectors("../materialize/testdata/derive.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	load(t, admin, vs[0].DB)

	u, err := url.Parse(serverURI(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("noj-materializer", "s3cret-pw")
	q := u.Query()
	q.Set("authSource", dbName)
	u.RawQuery = q.Encode()
	db, err := Open(ctx, Config{URI: u.String(), Database: dbName, MaxAwait: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("open as the least-privilege user: %v", err)
	}
	defer db.Close(context.Background())
	if err := db.EnsureIndexes(ctx, nil); err != nil {
		t.Fatalf("EnsureIndexes: %v", err)
	}
	lease, ok, err := db.Acquire(ctx, "least", 10*time.Second)
	if err != nil || !ok {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	eng := &watch.Engine{Store: db, Feed: db, Checkpoints: db, Config: watch.Config{Epoch: lease.Epoch, Owner: "least"}}
	if _, err := eng.RebuildAndCheckpoint(ctx); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if _, err := admin.db.Collection(materialize.CollSubmission).InsertOne(ctx, bson.D{{Key: "_id", Value: bson.NewObjectID()},
		{Key: "user", Value: "user00"}, {Key: "problem", Value: 1}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(time.Now())},
		{Key: "status", Value: 0}, {Key: "score", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatalf("stream and write: %v", err)
	}
	if err := db.SaveCheckpoint(ctx, resume.Checkpoint{StartAt: bson.Timestamp{T: 1}, Epoch: lease.Epoch}); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	// Nothing more: inserting a user, or deleting one, is refused.
	_, err = db.users.InsertOne(ctx, bson.D{{Key: "_id", Value: "intruder"}})
	var ce mongo.ServerError
	if err == nil || !errors.As(err, &ce) || !ce.HasErrorCode(13) {
		t.Fatalf("insert into user as the daemon = %v, want Unauthorized", err)
	}
}

// authEnforced reports whether an unauthenticated client is refused.
func authEnforced(ctx context.Context, t *testing.T) bool {
	u, err := url.Parse(serverURI(t))
	if err != nil {
		return false
	}
	u.User = nil
	c, err := mongo.Connect(options.Client().ApplyURI(u.String()))
	if err != nil {
		return false
	}
	defer c.Disconnect(context.Background())
	_, err = c.Database("admin").ListCollectionNames(ctx, bson.D{})
	var ce mongo.ServerError
	return errors.As(err, &ce) && ce.HasErrorCode(13)
}
