// Package mongodb is the materializer's MongoDB adapter: it reads
// Back-End's source documents, writes the derived fields, keeps the
// submission key index, scans whole collections for a rebuild, tails the
// database's change stream and stores the fenced checkpoint and the lease.
//
// *DB implements watch.Store, watch.Feed, resume.Store and
// resume.LeaseStore on one database of a replica set (or a sharded
// cluster through mongos) running MongoDB 4.4 or newer.
//
// Every read is projected to the fields the derivation reads, and a
// homework's studentStatus is filtered server-side to the users asked for,
// so no read moves a whole large homework for one student. Writes are
// unordered bulk writes with majority write concern that only ever touch
// the derived fields of documents and entries that already exist.
package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// Defaults applied by Open to zero Config fields.
const (
	DefaultDatabase             = "normal-oj"
	DefaultCheckpointCollection = "materializer_checkpoints"
	DefaultKeysCollection       = "materializer_submission_keys"
	DefaultWriteTimeout         = 5 * time.Second
)

// Batch sizes of reads and writes. A read's filter holds at most
// queryTerms user names, pairs or ids, so a large batch of keys becomes a
// few queries of bounded size rather than one huge filter; a bulk write
// sends at most writeChunk models.
const (
	queryTerms = 500
	writeChunk = 1000
)

// Config configures Open.
type Config struct {
	// URI is the MongoDB connection string. It may hold credentials; they
	// never appear in errors (see Redact).
	URI string
	// Database is Back-End's database; "normal-oj" when empty.
	Database string
	// ChangeStreamBatchSize is the change stream's batch size (events per
	// getMore); 0 leaves the server's default.
	ChangeStreamBatchSize int32
	// MaxAwait is how long one Stream.Next waits on the server for an
	// event (the getMore's maxAwaitTimeMS); 0 leaves the server's default
	// (1 second).
	MaxAwait time.Duration
	// CheckpointCollection holds the lease and the checkpoint (one
	// document); "materializer_checkpoints" when empty.
	CheckpointCollection string
	// KeysCollection holds the submission key index;
	// "materializer_submission_keys" when empty.
	KeysCollection string
	// WriteTimeout bounds each bulk write and each checkpoint or lease
	// write; 5 seconds when zero.
	WriteTimeout time.Duration
	// AllowStandalone lets Open accept a standalone mongod, for the
	// commands that need no change stream (verify, status, seed, explain,
	// and a rebuild that saves no stream start). Without it Open refuses one.
	AllowStandalone bool
	// Writes says the command writes (run, rebuild, seed): Open then
	// refuses a server that is not a writable primary, such as a
	// secondary reached with directConnection=true.
	Writes bool
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.CheckpointCollection == "" {
		c.CheckpointCollection = DefaultCheckpointCollection
	}
	if c.KeysCollection == "" {
		c.KeysCollection = DefaultKeysCollection
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// DB is an open connection to Back-End's database. It is safe for
// concurrent use (the driver's client is); Close releases it.
type DB struct {
	cfg    Config
	client *mongo.Client
	db     *mongo.Database // majority write and read concern

	submissions *mongo.Collection
	homeworks   *mongo.Collection
	problems    *mongo.Collection
	users       *mongo.Collection
	keys        *mongo.Collection
	state       *mongo.Collection

	// standalone is true on a standalone mongod (Config.AllowStandalone):
	// no oplog, so no change stream and no cluster time.
	standalone bool
	// sharded is true through a mongos (hello's msg "isdbgrid"): the
	// cluster time of a rebuild's hand-off comes from a change stream.
	sharded bool

	// written is the operationTime of the last acknowledged write of
	// bulk (derived values, key index): reads under a batch read after it.
	written writeClock
	// handoff is the last hand-off time ClusterTime returned: the scans
	// read causally after it (afterHandoff).
	handoff writeClock
}

var (
	_ watch.Store       = (*DB)(nil)
	_ watch.Feed        = (*DB)(nil)
	_ resume.Store      = (*DB)(nil)
	_ resume.LeaseStore = (*DB)(nil)
)

// Open connects to cfg.URI and checks that the deployment can serve the
// materializer: it pings the primary, requires MongoDB 4.4 or newer
// (buildInfo) and a replica set member or mongos (hello), since change
// streams exist only there; with cfg.AllowStandalone a standalone mongod
// is accepted too (see Standalone). With cfg.Writes it also refuses a
// member that cannot take writes (directConnection=true to a secondary).
// Errors name the redacted URI, never hold its password, and are marked
// with their class (watch.ClassOf): a refused deployment is
// watch.NotPrimary or watch.Fatal.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg = cfg.withDefaults()
	// Reads go to the primary (clientOptions overrides the URI's read
	// preference): a lagging secondary could return a source older than
	// the event being processed, and the value derived from it would be
	// saved past that event. Not on a direct connection
	// (directConnection=true): the topology is Single, the driver sends
	// every command to that one server whatever the read preference
	// (internal/serverselector/server_selector.go:136-137) and marks reads
	// primaryPreferred (x/mongo/driver/operation.go:1923-1925), as the
	// server selection spec's "Topology type: Single" requires, so a
	// secondary answers them. The commands that write (cfg.Writes) refuse
	// such a member (checkWritable); a read-only one (cfg.Writes false)
	// reads what that secondary has, possibly behind the primary.
	client, err := mongo.Connect(clientOptions(cfg.URI))
	if err != nil {
		return nil, openError(cfg, classify(err), fmt.Errorf("connect: %w", err))
	}
	d, err := open(ctx, client, cfg)
	if err != nil {
		_ = client.Disconnect(context.WithoutCancel(ctx))
		return nil, err
	}
	return d, nil
}

// openError is err of Open, naming the redacted URI, scrubbed of its
// secrets and marked with class c.
func openError(cfg Config, c watch.Class, err error) error {
	return scrub(watch.WithClass(c, fmt.Errorf("%s: %w", Redact(cfg.URI), err)), uriSecrets(cfg.URI))
}

// open runs Open's checks on a connected client (cfg has its defaults).
func open(ctx context.Context, client *mongo.Client, cfg Config) (*DB, error) {
	failed := func(what string, err error) error {
		return openError(cfg, classify(err), fmt.Errorf("%s: %w", what, err))
	}
	if err := client.Ping(ctx, nil); err != nil {
		return nil, failed("ping", err)
	}
	admin := client.Database("admin")
	bi, err := admin.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Raw()
	if err != nil {
		return nil, failed("buildInfo", err)
	}
	version, _ := bi.Lookup("version").StringValueOK()
	if err := checkVersion(version); err != nil {
		return nil, openError(cfg, watch.Fatal, err)
	}
	hello, err := helloResponse(ctx, admin)
	if err != nil {
		return nil, openError(cfg, classify(err), err) // err says "hello: "
	}
	standalone, err := topology(hello, cfg.AllowStandalone)
	if err != nil {
		return nil, openError(cfg, watch.NotPrimary, err)
	}
	if cfg.Writes {
		if err := checkWritable(hello); err != nil {
			return nil, openError(cfg, watch.NotPrimary, err)
		}
	}

	d := newDB(client, cfg)
	d.standalone = standalone
	d.sharded = isMongos(hello)
	if err := d.checkMajorityReads(ctx); err != nil {
		return nil, openError(cfg, watch.ClassOf(err), err)
	}
	return d, nil
}

// isMongos reports whether a hello response comes from a mongos.
func isMongos(hello bson.Raw) bool {
	msg, ok := hello.Lookup("msg").StringValueOK()
	return ok && msg == "isdbgrid"
}

// checkWritable fails unless a hello (or isMaster) response comes from a
// member that takes writes: a primary, a mongos or a standalone. Open's
// commands go to the client's read preference, primary, so without
// directConnection the driver routes hello to the primary; with
// directConnection=true the topology is Single, the driver sends every
// command to that one server whatever the read preference, and marks it
// primaryPreferred so a secondary answers reads
// (x/mongo/driver/operation.go:1923-1925), and on a secondary every
// write, the lease's findAndModify first, would fail NotWritablePrimary
// forever.
func checkWritable(hello bson.Raw) error {
	for _, k := range []string{"isWritablePrimary", "ismaster"} {
		if w, ok := hello.Lookup(k).BooleanOK(); ok {
			if w {
				return nil
			}
			break
		}
	}
	set, _ := hello.Lookup("setName").StringValueOK()
	me, _ := hello.Lookup("me").StringValueOK()
	var hosts []string
	if arr, ok := hello.Lookup("hosts").ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, v := range vals {
			if h, ok := v.StringValueOK(); ok {
				hosts = append(hosts, h)
			}
		}
	}
	use := "the replica set's URI with replicaSet=<set name>"
	if set != "" && len(hosts) > 0 {
		use = fmt.Sprintf("the replica set's URI, mongodb://%s/?replicaSet=%s", strings.Join(hosts, ","), set)
	}
	return fmt.Errorf("the server %s is not the primary of replica set %q (a secondary reached with directConnection=true?): it takes no writes, and a direct connection never follows a fail-over; use %s (see docs/install.md#requirements)",
		me, set, use)
}

// checkMajorityReads runs one majority read. Every read of the adapter
// has readConcern majority (newDB); a MongoDB 4.4 replica set started
// with enableMajorityReadConcern=false (MongoDB's advice for a
// primary-secondary-arbiter set before 5.0) refuses such reads with
// ReadConcernMajorityNotEnabled (148) while its change streams still work
// (SERVER-37935), so without this check the daemon would open its stream
// and then retry its first read forever.
//
// The probe reads the user collection, not the checkpoint collection:
// Open runs it for every command, and explain runs with a read-only role
// granting find on the four source collections only
// (docs/install.md), which would answer a find of the checkpoint
// collection with Unauthorized (13). RunCommand sends the command as
// written, adding no read concern of its own (driver
// mongo/database.go:198-216 builds the operation without ReadConcern;
// x/mongo/driver/operation.go:1594 addReadConcern adds nothing for a nil
// one), so the majority level is in the command.
func (d *DB) checkMajorityReads(ctx context.Context) error {
	err := d.db.RunCommand(ctx, majorityProbeCommand(d.users.Name())).Err()
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == codeReadConcernMajorityNotEnabled {
		return watch.WithClass(watch.Fatal, fmt.Errorf("the server refuses majority reads (enableMajorityReadConcern=false), which every read of the materializer uses; enable it (see docs/install.md#requirements): %w", err))
	}
	if err != nil {
		return fail(d.cfg.Database, needs(d.users.Name(), "find"), "majority read of "+d.users.Name(), err)
	}
	return nil
}

// majorityProbeCommand is a majority find of coll matching no document
// of the user collection (its _id is the username, a string, never an
// ObjectId) through the _id index: it reads no document and scans none.
func majorityProbeCommand(coll string) bson.D {
	return bson.D{
		{Key: "find", Value: coll},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: bson.ObjectID{}}}},
		{Key: "projection", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "limit", Value: int64(1)},
		{Key: "singleBatch", Value: true},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}},
	}
}

// newDB returns the DB of cfg (defaults applied) on client: majority write
// concern everywhere, and majority read concern on every collection,
// since every read decides a write (or a checkpoint) and a value read
// from a write that is later rolled back would never be corrected (the
// rollback emits no change event). Reads go to the client's read
// preference, which Open sets to primary; on a direct connection to a
// secondary they go to it (see Open).
func newDB(client *mongo.Client, cfg Config) *DB {
	db := client.Database(cfg.Database, options.Database().
		SetWriteConcern(writeconcern.Majority()).
		SetReadConcern(readconcern.Majority()))
	return &DB{
		cfg:         cfg,
		client:      client,
		db:          db,
		submissions: db.Collection(materialize.CollSubmission),
		homeworks:   db.Collection(materialize.CollHomework),
		problems:    db.Collection(materialize.CollProblem),
		users:       db.Collection(materialize.CollUser),
		keys:        db.Collection(cfg.KeysCollection),
		state:       db.Collection(cfg.CheckpointCollection),
	}
}

// Close disconnects the client, waiting for in-use connections until ctx
// ends.
func (d *DB) Close(ctx context.Context) error {
	if err := d.client.Disconnect(ctx); err != nil {
		return fail(d.cfg.Database, need{}, "mongodb: disconnect", err)
	}
	return nil
}

// Database returns the name of the database d reads and writes.
func (d *DB) Database() string { return d.cfg.Database }

// helloResponse runs hello, falling back to isMaster on servers that
// predate hello (4.4.0 and 4.4.1 answer CommandNotFound).
func helloResponse(ctx context.Context, admin *mongo.Database) (bson.Raw, error) {
	raw, err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Raw()
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == codeCommandNotFound {
		raw, err = admin.RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Raw()
	}
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	return raw, nil
}

// minMajor.minMinor is the oldest server the adapter supports.
const minMajor, minMinor = 4, 4

// checkVersion fails unless version (buildInfo's "version", such as
// "7.0.12" or "4.4.0-rc3") is 4.4 or newer.
func checkVersion(version string) error {
	major, minor, err := parseVersion(version)
	if err != nil {
		return fmt.Errorf("MongoDB 4.4 or newer is required (mongo-driver v2.10 and change streams with postBatchResumeToken); cannot read server version %q: %w", version, err)
	}
	if major < minMajor || major == minMajor && minor < minMinor {
		return fmt.Errorf("MongoDB 4.4 or newer is required (mongo-driver v2.10 and change streams with postBatchResumeToken); server is %s", version)
	}
	return nil
}

// parseVersion reads the major and minor numbers of a server version
// string "major.minor[.patch][-suffix]".
func parseVersion(v string) (major, minor int, err error) {
	core, _, _ := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("want major.minor[.patch]")
	}
	if major, err = strconv.Atoi(parts[0]); err != nil || major < 0 {
		return 0, 0, fmt.Errorf("major version %q is not a number", parts[0])
	}
	if minor, err = strconv.Atoi(parts[1]); err != nil || minor < 0 {
		return 0, 0, fmt.Errorf("minor version %q is not a number", parts[1])
	}
	return major, minor, nil
}

// checkTopology fails unless a hello (or isMaster) response comes from a
// replica set member (setName) or a mongos (msg "isdbgrid").
func checkTopology(hello bson.Raw) error {
	if err := checkInitiated(hello); err != nil {
		return err
	}
	if name, ok := hello.Lookup("setName").StringValueOK(); ok && name != "" {
		return nil
	}
	if msg, ok := hello.Lookup("msg").StringValueOK(); ok && msg == "isdbgrid" {
		return nil
	}
	return errors.New("server is a standalone mongod: change streams need a replica set; see docs/install.md to convert a standalone")
}

// checkInitiated fails for a mongod started with --replSet whose replica
// set was never initiated: its hello says isreplicaset true and has no
// setName (the driver calls it an RSGhost). It is no standalone, and no
// command can use it until rs.initiate().
func checkInitiated(hello bson.Raw) error {
	ghost, _ := hello.Lookup("isreplicaset").BooleanOK()
	if name, _ := hello.Lookup("setName").StringValueOK(); !ghost || name != "" {
		return nil
	}
	info, _ := hello.Lookup("info").StringValueOK()
	return fmt.Errorf("the server runs with --replSet but its replica set is not initiated (%q): run rs.initiate() (see docs/install.md#converting-the-standalone-to-a-one-node-replica-set)", info)
}

// topology reads a hello (or isMaster) response: standalone is true for a
// standalone mongod, which is an error unless allowStandalone. A member
// of a replica set not initiated yet is an error either way.
func topology(hello bson.Raw, allowStandalone bool) (standalone bool, err error) {
	if err := checkInitiated(hello); err != nil {
		return false, err
	}
	if err := checkTopology(hello); err != nil {
		if allowStandalone {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// ErrStandalone is returned by SaveCheckpoint on a standalone mongod.
var ErrStandalone = errors.New("the server is a standalone mongod: no oplog, so no change stream and no checkpoint to resume from")

// Standalone reports whether d is connected to a standalone mongod (only
// with Config.AllowStandalone): it has no oplog, so Open of a change
// stream fails, ClusterTime is zero, and a checkpoint saved there could
// not be resumed from.
func (d *DB) Standalone() bool { return d.standalone }

// Redact returns uri with its password and secret options replaced by
// "xxxxx", for logs and errors: "mongodb://u:pw@h/?authMechanismProperties=
// AWS_SESSION_TOKEN:t" becomes "mongodb://u:xxxxx@h/?authMechanismProperties=
// xxxxx". It works on malformed URIs too (it does not parse them with the
// driver); when it cannot tell where the credentials end it redacts more
// rather than less.
func Redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		scheme, rest = "", uri
	}
	if at := userinfoEnd(rest); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		if hasPass {
			rest = user + ":xxxxx" + rest[at:]
		}
	}
	if base, query, ok := strings.Cut(rest, "?"); ok {
		opts := strings.Split(query, "&")
		for i, o := range opts {
			k, _, hasValue := strings.Cut(o, "=")
			if hasValue && secretOption(k) {
				opts[i] = k + "=xxxxx"
			}
		}
		rest = base + "?" + strings.Join(opts, "&")
	}
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}

// userinfoEnd returns the index of the '@' ending the userinfo of the part
// of a URI after "scheme://", or -1. A valid URI percent-encodes '@', '/'
// and '?' in credentials, so the userinfo ends at the last '@' before the
// options; a malformed one may not, and then the last '@' anywhere is used
// (over-redacting the hosts rather than leaking a password).
func userinfoEnd(rest string) int {
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		if at := strings.LastIndexByte(rest[:q], '@'); at >= 0 {
			return at
		}
	}
	return strings.LastIndexByte(rest, '@')
}

// secretOption reports whether a URI option's value may be a secret.
func secretOption(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "token", "authmechanismproperties"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// uriSecrets returns the password of uri, raw and percent-decoded, and the
// values of its secret options: strings that must not appear in an error.
func uriSecrets(uri string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if dec, err := url.QueryUnescape(s); err == nil && dec != s && dec != "" {
			out = append(out, dec)
		}
	}
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		rest = uri
	}
	if at := userinfoEnd(rest); at >= 0 {
		if _, pass, ok := strings.Cut(rest[:at], ":"); ok {
			add(pass)
		}
	}
	if _, query, ok := strings.Cut(rest, "?"); ok {
		for _, o := range strings.Split(query, "&") {
			if k, v, ok := strings.Cut(o, "="); ok && secretOption(k) {
				add(v)
			}
		}
	}
	return out
}

// scrubbedError is an error whose message has secrets removed; errors.Is
// and errors.As still see the original chain.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub returns err with every secret in its message replaced by "xxxxx".
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// writeCtx bounds one write round trip by Config.WriteTimeout.
func (d *DB) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.cfg.WriteTimeout)
}
