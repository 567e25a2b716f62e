package mongodb

import (
	"context"
	"errors"
	"net/url"
	"os"
	"regexp"
	"slices"
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

// leastPrivilege is the role of docs/install.md: collection → actions
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

// TestRoleDocumented checks that docs/install.md grants exactly the
// actions this package's least-privilege test runs with.
func TestRoleDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/install.md")
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
	uri := userWithRole(ctx, t, admin, "nojMaterializer", "noj-materializer", leastPrivilege)
	vs, err := mtest.ReadVectors("../materialize/testdata/derive.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	load(t, admin, vs[0].DB)

	db, err := Open(ctx, Config{URI: uri, Database: dbName, MaxAwait: 200 * time.Millisecond})
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
	// Read's one aggregate: find on each collection its $unionWith reads.
	if _, err := db.Read(ctx, readsOf(vs[0].DB)); err != nil {
		t.Fatalf("Read: %v", err)
	}
	eng := &watch.Engine{Store: db, Feed: db, Checkpoints: db, Config: watch.Config{Epoch: lease.Epoch, Owner: "least"}}
	if _, err := eng.RebuildAndCheckpoint(ctx); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if d := storedDrift(t, admin); len(d) > 0 {
		t.Fatalf("after the rebuild as the daemon, stored values differ from the derivation: %v", d)
	}
	// A judged submission of a user with a document and an entry (problem
	// 323 of homework hw0-0 in vector 0): the stream must write both the
	// user's counts and the entry, under the restricted role.
	if _, err := admin.db.Collection(materialize.CollSubmission).InsertOne(ctx, bson.D{{Key: "_id", Value: bson.NewObjectID()},
		{Key: "user", Value: "user00"}, {Key: "problem", Value: 323}, {Key: "languageType", Value: 1},
		{Key: "timestamp", Value: bson.NewDateTimeFromTime(time.Now())},
		{Key: "status", Value: 0}, {Key: "score", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	drift := storedDrift(t, admin)
	if !slices.ContainsFunc(drift, func(s string) bool { return strings.HasPrefix(s, "user user00:") }) ||
		!slices.ContainsFunc(drift, func(s string) bool { return strings.Contains(s, " entry user00.323:") }) {
		t.Fatalf("test setup: the new submission should change user00's counts and its entry for 323; drift: %v", drift)
	}
	if err := eng.Drain(ctx); err != nil {
		t.Fatalf("stream and write: %v", err)
	}
	// The writes made under the restricted role landed: read back as the
	// admin, the stored values equal the derivation again.
	if d := storedDrift(t, admin); len(d) > 0 {
		t.Errorf("the stream's writes as the daemon did not land: %d differences: %v", len(d), d)
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

// storedDrift returns the differences between the stored derived values
// of db's documents (read as the test's admin user) and a derivation of
// them; users without a document are left out (never written).
func storedDrift(t *testing.T, db *DB) []string {
	t.Helper()
	docs := readAll(t, db)
	want := materialize.Derive(docs)
	got, err := mtest.Stored(docs)
	if err != nil {
		t.Fatal(err)
	}
	for name := range want.Users {
		if _, ok := got.Users[name]; !ok {
			delete(want.Users, name)
		}
	}
	got.PenaltyErrors = want.PenaltyErrors
	return mtest.DiffResults(want, got)
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

// TestIntegrationReadOnlyRole: explain's read-only role (find on the four
// source collections, docs/explain.md) opens the database,
// Open's majority-read probe included, and makes explain's reads. It
// needs a server that enforces authorization, like
// TestIntegrationLeastPrivilege.
func TestIntegrationReadOnlyRole(t *testing.T) {
	admin := testDB(t)
	ctx := testCtx(t)
	if !authEnforced(ctx, t) {
		t.Skip("the test server does not enforce authorization: start mongod with --auth (and --keyFile for a replica set) and give MATERIALIZER_TEST_MONGODB_URI a user that may create roles")
	}
	dbName := admin.Database()
	readOnly := map[string][]string{}
	for _, coll := range []string{materialize.CollSubmission, materialize.CollProblem, materialize.CollHomework, materialize.CollUser} {
		readOnly[coll] = []string{"find"}
	}
	uri := userWithRole(ctx, t, admin, "nojExplain", "noj-explain", readOnly)
	db, err := Open(ctx, Config{URI: uri, Database: dbName, AllowStandalone: true})
	if err != nil {
		t.Fatalf("open with the read-only role: %v", err)
	}
	defer db.Close(context.Background())
	if _, _, err := db.Submissions(ctx, []string{"user00"}, nil); err != nil {
		t.Errorf("Submissions: %v", err)
	}
	if _, err := db.Users(ctx, []string{"user00"}); err != nil {
		t.Errorf("Users: %v", err)
	}
	if _, _, err := db.Problems(ctx, []int64{323}); err != nil {
		t.Errorf("Problems: %v", err)
	}
	if _, err := db.EntriesForProblems(ctx, []int64{323}); err != nil {
		t.Errorf("EntriesForProblems: %v", err)
	}
	if _, _, err := db.Homeworks(ctx, []bson.ObjectID{{1}}, []string{"user00"}); err != nil {
		t.Errorf("Homeworks: %v", err)
	}
	if _, err := db.Read(ctx, &watch.Reads{Pairs: []materialize.Pair{{User: "user00", Problem: 323}}, Users: []string{"user00"},
		Problems: []int64{323}, Homeworks: []bson.ObjectID{{1}}, HomeworkUsers: []string{"user00"}}); err != nil {
		t.Errorf("Read: %v", err)
	}
}

// userWithRole creates, in admin's database, a role holding privileges
// (collection name, "" for the whole database → actions) and a user
// holding only that role, dropped when t ends; it returns the test
// server's URI authenticated as that user.
func userWithRole(ctx context.Context, t *testing.T, admin *DB, role, user string, privileges map[string][]string) string {
	t.Helper()
	dbName := admin.Database()
	var privs bson.A
	for coll, acts := range privileges {
		privs = append(privs, bson.D{{Key: "resource", Value: bson.D{{Key: "db", Value: dbName}, {Key: "collection", Value: coll}}},
			{Key: "actions", Value: acts}})
	}
	for _, cmd := range []bson.D{
		{{Key: "createRole", Value: role}, {Key: "privileges", Value: privs}, {Key: "roles", Value: bson.A{}}},
		{{Key: "createUser", Value: user}, {Key: "pwd", Value: "s3cret-pw"},
			{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: role}, {Key: "db", Value: dbName}}}}},
	} {
		if err := admin.db.RunCommand(ctx, cmd).Err(); err != nil {
			t.Fatalf("%v: %v", cmd[0].Key, err)
		}
	}
	t.Cleanup(func() {
		_ = admin.db.RunCommand(context.Background(), bson.D{{Key: "dropUser", Value: user}}).Err()
		_ = admin.db.RunCommand(context.Background(), bson.D{{Key: "dropRole", Value: role}}).Err()
	})
	u, err := url.Parse(serverURI(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, "s3cret-pw")
	q := u.Query()
	q.Set("authSource", dbName)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestAuthenticationFailedNamesNoPrivilege: 18 AuthenticationFailed (a
// wrong user name or password, a rotated credential: the handshake of a
// new connection fails, and the driver returns the server's error as a
// mongo.CommandError, mongo/errors.go:89-104) is fatal like 13, but no
// privilege is missing: the message must say to check the credentials,
// not name actions to grant.
func TestAuthenticationFailedNamesNoPrivilege(t *testing.T) {
	d, md, _ := mockDB(t)
	md.AddResponses(commandError(18, "AuthenticationFailed", "Authentication failed."))
	_, err := d.Users(context.Background(), []string{"alice"})
	if c := watch.ClassOf(err); c != watch.Unauthorized {
		t.Fatalf("class %s (%v), want unauthorized", c, err)
	}
	if strings.Contains(err.Error(), "needs action") {
		t.Errorf("%v: names privileges to grant for an authentication failure", err)
	}
	if !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("%v: does not say the authentication failed", err)
	}
	// 13 still names the privilege.
	md.AddResponses(unauthorized("find"))
	_, err = d.Users(context.Background(), []string{"alice"})
	if !strings.Contains(err.Error(), `needs action(s) "find"`) {
		t.Errorf("%v: 13 Unauthorized does not name the privilege", err)
	}
}
