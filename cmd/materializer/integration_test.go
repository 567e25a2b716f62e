package main

// End-to-end tests against a real MongoDB replica set. They use
// MATERIALIZER_TEST_MONGODB_URI when it is set, else start a replica set
// with testcontainers when a Docker engine answers, else skip (quickly)
// saying how to run them. `make test-integration` runs them (-run
// Integration). Every test works in a database of its own, dropped at
// cleanup.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/internal/bsontest"
	"github.com/normal-oj/noj-materializer/internal/testenv"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
)

const noMongoSkip = "no MongoDB replica set: set MATERIALIZER_TEST_MONGODB_URI=mongodb://127.0.0.1:27017/?directConnection=true (the demo's replica set: make up) " +
	"or run with a Docker engine; see README"

var (
	mongoOnce     sync.Once
	mongoURI      string // "" when none is available
	mongoWhy      string // why not
	stopContainer func() // terminates the container findMongo started (nil: none)
)

func TestMain(m *testing.M) {
	if code, ok := shimMain(); ok { // run as the procedure tests' docker
		os.Exit(code)
	}
	code := m.Run()
	if stopContainer != nil {
		stopContainer()
	}
	os.Exit(code)
}

// integrationURI returns the URI of a replica set for an integration test,
// or skips the test.
func integrationURI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test skipped in -short mode")
	}
	mongoOnce.Do(findMongo)
	if mongoURI == "" {
		testenv.NoServer(t, fmt.Sprintf("%s (%s)", noMongoSkip, mongoWhy))
	}
	return mongoURI
}

func findMongo() {
	if u := os.Getenv("MATERIALIZER_TEST_MONGODB_URI"); u != "" {
		mongoURI = u
		return
	}
	if err := dockerAnswers(2 * time.Second); err != nil {
		mongoWhy = "no Docker engine: " + err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	uri, stop, err := startMongoContainer(ctx, testenv.MongoImage(), true)
	stopContainer = stop // run by TestMain, even when the container failed to start
	if err != nil {
		mongoWhy = err.Error()
		return
	}
	// The member's host name is the container's address; connect to the
	// mapped port directly.
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	}
	mongoURI = uri + sep + "directConnection=true"
}

// itest is one integration test's database.
type itest struct {
	t      *testing.T
	uri    string
	name   string
	client *mongo.Client
	db     *mongo.Database
}

// newIntegration connects to the replica set, picks a fresh database and
// points the configuration at it (MATERIALIZER_* through t.Setenv, so
// in-process commands and subprocesses both see it).
func newIntegration(t *testing.T) *itest {
	t.Helper()
	uri := integrationURI(t)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "mat_it_" + hex.EncodeToString(b[:])
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatalf("connect to MATERIALIZER_TEST_MONGODB_URI: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := client.Ping(ctx, nil); err != nil {
		_ = client.Disconnect(context.Background())
		t.Fatalf("ping the test replica set: %v", err)
	}
	it := &itest{t: t, uri: uri, name: name, client: client, db: client.Database(name)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := it.db.Drop(ctx); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
		_ = client.Disconnect(ctx)
	})
	cleanConfigEnv(t)
	t.Setenv("MATERIALIZER_MONGODB_URI", uri)
	t.Setenv("MATERIALIZER_DATABASE", name)
	t.Setenv("MATERIALIZER_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("MATERIALIZER_BATCH_MAX_WAIT", "50ms")
	t.Setenv("MATERIALIZER_CHECKPOINT_INTERVAL", "1s")
	t.Setenv("MATERIALIZER_LEASE_TTL", "3s")
	t.Setenv("MATERIALIZER_WRITE_TIMEOUT", "1s")
	t.Setenv("MATERIALIZER_LOG_LEVEL", "info")
	return it
}

func (it *itest) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func (it *itest) coll(name string) *mongo.Collection { return it.db.Collection(name) }

// insert loads documents as Back-End stores them.
func (it *itest) insert(docs materialize.Docs) {
	it.t.Helper()
	ctx, cancel := it.ctx()
	defer cancel()
	for coll, ds := range dumpColls(docs, nil) {
		if len(ds) == 0 {
			continue
		}
		batch := make([]any, len(ds))
		for i, d := range ds {
			batch[i] = d
		}
		if _, err := it.coll(coll).InsertMany(ctx, batch); err != nil {
			it.t.Fatalf("insert %s: %v", coll, err)
		}
	}
}

// read returns every document of the four source collections.
func (it *itest) read() materialize.Docs {
	it.t.Helper()
	ctx, cancel := it.ctx()
	defer cancel()
	get := func(coll string) []bson.Raw {
		cur, err := it.coll(coll).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			it.t.Fatalf("read %s: %v", coll, err)
		}
		var out []bson.Raw
		if err := cur.All(ctx, &out); err != nil {
			it.t.Fatalf("read %s: %v", coll, err)
		}
		return out
	}
	return materialize.Docs{
		Users:       get(materialize.CollUser),
		Problems:    get(materialize.CollProblem),
		Homeworks:   get(materialize.CollHomework),
		Submissions: get(materialize.CollSubmission),
	}
}

// derivedDiff compares the stored derived values of docs with a fresh
// derivation of the same documents (users that have a document).
func derivedDiff(docs materialize.Docs) []string {
	want := materialize.Derive(docs)
	got, err := materializetest.Stored(docs)
	if err != nil {
		return []string{err.Error()}
	}
	for name := range want.Users {
		if _, ok := got.Users[name]; !ok {
			delete(want.Users, name) // no user document: never written
		}
	}
	got.PenaltyErrors = want.PenaltyErrors
	return materializetest.DiffResults(want, got)
}

// byID indexes documents by their _id's bytes.
func byID(docs []bson.Raw) map[string]bson.Raw {
	m := make(map[string]bson.Raw, len(docs))
	for _, d := range docs {
		v := d.Lookup("_id")
		m[string(rune(v.Type))+string(v.Value)] = d
	}
	return m
}

// integrationVectors is the subset of derive vectors the rebuild test
// loads: every tenth, and those with dotted usernames (all of them with
// MATERIALIZER_TEST_ALL_VECTORS=1).
func integrationVectors(t *testing.T) []materializetest.Vector {
	vs := readVectors(t)
	if os.Getenv("MATERIALIZER_TEST_ALL_VECTORS") == "1" {
		return vs
	}
	var out []materializetest.Vector
	dotted := 0
	for i, v := range vs {
		switch {
		case i%10 == 0:
			out = append(out, v)
		case hasDottedUser(v) && dotted < 8:
			out = append(out, v)
			dotted++
		}
	}
	return out
}

// TestIntegrationRebuildVectors: each vector's documents inserted with the
// driver, then `rebuild`: the stored derived values equal the vector's
// expect, the report's counts equal an independent comparison, every
// non-derived byte is unchanged, and `verify` then exits 0.
func TestIntegrationRebuildVectors(t *testing.T) {
	integrationURI(t)
	for _, v := range integrationVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			it := newIntegration(t)
			it.insert(v.DB)
			before := it.read()
			want := independentCounts(t, v.DB, v)

			r := runCLI(t, "rebuild")
			if r.code != exitOK {
				t.Fatalf("rebuild: want exit 0\n%v", r)
			}
			checkReport(t, "rebuild", r, v, want)
			it.checkPrintedStart(r)

			after := it.read()
			if d := materializetest.DiffStored(v, after); len(d) > 0 {
				t.Errorf("stored values differ from expect:\n%s", strings.Join(d, "\n"))
			}
			if u, e := independentDrift(t, after, v); u+e != 0 {
				t.Errorf("stored values differ from expect in %d users and %d entries", u, e)
			}
			checkSameDocsBut(t, "user", before.Users, after.Users, func(t testing.TB, d bson.Raw) bson.Raw {
				return bsontest.Without(t, d, userDerivedFields...)
			})
			checkSameDocsBut(t, "homework", before.Homeworks, after.Homeworks, bsontest.NullEntries)
			checkSameDocsBut(t, "problem", before.Problems, after.Problems, nil)
			checkSameDocsBut(t, "submission", before.Submissions, after.Submissions, nil)

			r = runCLI(t, "verify")
			if r.code != exitOK {
				t.Fatalf("verify after rebuild: want exit 0\n%v", r)
			}
			checkReport(t, "verify after rebuild", r, v, expectCounts{users: want.users, entries: want.entries})
		})
	}
}

// checkPrintedStart checks that rebuild printed the stream start its
// saved checkpoint holds (30 s before the cluster time read before the
// scan), read here from the state document.
func (it *itest) checkPrintedStart(r cliResult) {
	it.t.Helper()
	ctx, cancel := it.ctx()
	defer cancel()
	raw, err := it.coll("materializer_checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: "checkpoint"}}).Raw()
	if err != nil {
		it.t.Fatalf("read the saved checkpoint: %v", err)
	}
	t, i, ok := raw.Lookup("checkpoint", "startAt").TimestampOK()
	if !ok || t == 0 {
		it.t.Fatalf("rebuild saved no stream start: %s", raw)
	}
	if want := fmt.Sprintf("streams from cluster time %d.%d ", t, i); !strings.Contains(r.stdout, want) {
		it.t.Errorf("rebuild does not print the saved start %q\n%v", want, r)
	}
}

// checkSameDocsBut checks that two reads of a collection hold the same
// documents, byte for byte once strip (when set) removed derived values.
func checkSameDocsBut(t *testing.T, coll string, before, after []bson.Raw, strip func(testing.TB, bson.Raw) bson.Raw) {
	t.Helper()
	if len(before) != len(after) {
		t.Errorf("%s: %d documents before, %d after", coll, len(before), len(after))
		return
	}
	a := byID(after)
	for _, b := range before {
		x, ok := a[string(rune(b.Lookup("_id").Type))+string(b.Lookup("_id").Value)]
		if !ok {
			t.Errorf("%s %s: gone", coll, b.Lookup("_id"))
			continue
		}
		bb, xx := b, x
		if strip != nil {
			bb, xx = strip(t, b), strip(t, x)
		}
		if string(bb) != string(xx) {
			t.Errorf("%s %s: non-derived bytes changed\nbefore: %s\n after: %s", coll, b.Lookup("_id"), bb, xx)
		}
	}
}

// TestIntegrationVerifyTamper: on a clean database `verify` exits 0; after
// one user's `submission` and one entry are tampered with it exits 1 and
// names both; `rebuild` repairs them and `verify` exits 0 again.
func TestIntegrationVerifyTamper(t *testing.T) {
	integrationURI(t)
	// A vector with an entry of a user whose name can be a $set path.
	var v materializetest.Vector
	var user, entryUser, pk string
	var hw bson.ObjectID
	for _, c := range readVectors(t) {
		user, entryUser = "", ""
		for _, u := range c.ExpectUsers {
			if n := u.Lookup("_id").StringValue(); !strings.ContainsAny(n, ".$") {
				user = n
				break
			}
		}
		for _, h := range c.ExpectHWs {
			for _, e := range bsontest.Entries(t, h) {
				if !strings.ContainsAny(e.User, ".$") {
					entryUser, pk, hw = e.User, e.Problem, h.Lookup("_id").ObjectID()
					break
				}
			}
			if entryUser != "" {
				break
			}
		}
		if user != "" && entryUser != "" {
			v = c
			break
		}
	}
	if v.Name == "" {
		t.Fatal("no vector with a plain username and an entry")
	}
	it := newIntegration(t)
	clean := applyExpected(t, v)
	it.insert(clean)
	counts := independentCounts(t, clean, v)

	r := runCLI(t, "verify")
	if r.code != exitOK {
		t.Fatalf("verify of clean data: want exit 0\n%v", r)
	}
	checkReport(t, "verify of clean data", r, v, counts)

	ctx, cancel := it.ctx()
	defer cancel()
	if _, err := it.coll("user").UpdateOne(ctx, bson.D{{Key: "_id", Value: user}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "submission", Value: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	path := "studentStatus." + entryUser + "." + pk
	if _, err := it.coll("homework").UpdateOne(ctx, bson.D{{Key: "_id", Value: hw}},
		bson.D{{Key: "$set", Value: bson.D{{Key: path + ".score", Value: 12345}}}}); err != nil {
		t.Fatal(err)
	}

	r = runCLI(t, "verify")
	if r.code != exitFail {
		t.Fatalf("verify of tampered data: want exit 1\n%v", r)
	}
	counts.driftedUsers, counts.driftedEntries = 1, 1
	checkReport(t, "verify of tampered data", r, v, counts)
	for _, s := range []string{"user " + user + " ", hw.Hex(), path, "12345"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("verify does not name %q\n%v", s, r)
		}
	}

	r = runCLI(t, "rebuild")
	if r.code != exitOK {
		t.Fatalf("rebuild: want exit 0\n%v", r)
	}
	r = runCLI(t, "verify")
	if r.code != exitOK {
		t.Fatalf("verify after rebuild: want exit 0\n%v", r)
	}
	if u, e := independentDrift(t, it.read(), v); u+e != 0 {
		t.Errorf("after rebuild %d users and %d entries differ from expect", u, e)
	}
}

// ---- the daemon as a subprocess ----

// buildBinary builds the materializer into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "materializer")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer is a goroutine-safe buffer for a subprocess's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// daemon is a running `materializer run`.
type daemon struct {
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan struct{}
	waitErr error
}

// startDaemon starts `run` with the test's environment.
func startDaemon(t *testing.T, bin string) *daemon {
	t.Helper()
	d := &daemon{out: &syncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(bin, "run")
	d.cmd.Env = os.Environ()
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("daemon %d output (tail):\n%s", d.cmd.Process.Pid, tail(d.out.String(), 4000))
		}
	})
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// kill sends SIGKILL and waits for the process to end.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.done
}

// stop sends SIGTERM and returns the exit status.
func (d *daemon) stop(t *testing.T) int {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not stop within 30s of SIGTERM\n%s", tail(d.out.String(), 4000))
	}
	var ee *exec.ExitError
	switch {
	case d.waitErr == nil:
		return 0
	case errors.As(d.waitErr, &ee):
		return ee.ExitCode()
	default:
		t.Fatal(d.waitErr)
		return -1
	}
}

// waitQuiet waits until the stored derived values equal a derivation of
// the current source documents, and still do a second later.
func (it *itest) waitQuiet(d *daemon) materialize.Docs {
	it.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last []string
	for time.Now().Before(deadline) {
		select {
		case <-d.done:
			it.t.Fatalf("run exited (%v) before converging\n%s", d.waitErr, tail(d.out.String(), 4000))
		default:
		}
		docs := it.read()
		if last = derivedDiff(docs); len(last) == 0 {
			time.Sleep(time.Second)
			docs = it.read()
			if last = derivedDiff(docs); len(last) == 0 {
				return docs
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	it.t.Fatalf("stored values did not converge to the derivation within 90s; %d differences:\n%s",
		len(last), strings.Join(last[:min(len(last), 20)], "\n"))
	return materialize.Docs{}
}

// seedOnline fills the test's database with demo data through `seed`.
func (it *itest) seedOnline(users, problems, homeworks, submissions int) {
	it.t.Helper()
	r := runCLI(it.t, "seed", "--users", strconv.Itoa(users), "--problems", strconv.Itoa(problems),
		"--homeworks", strconv.Itoa(homeworks), "--submissions", strconv.Itoa(submissions), "--seed", "3")
	if r.code != exitOK {
		it.t.Fatalf("seed: want exit 0\n%v", r)
	}
}

// backend issues writes shaped like Back-End's.
type backend struct {
	it   *itest
	rng  *mrand.Rand
	sess *mongo.Session
	n    int
}

func newBackend(it *itest) *backend {
	sess, err := it.client.StartSession()
	if err != nil {
		it.t.Fatal(err)
	}
	it.t.Cleanup(func() { sess.EndSession(context.Background()) })
	return &backend{it: it, rng: mrand.New(mrand.NewPCG(11, 12)), sess: sess}
}

// opCtx runs in the backend's session, so OperationTime is the last
// write's cluster time.
func (b *backend) opCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := b.it.ctx()
	return mongo.NewSessionContext(ctx, b.sess), cancel
}

func (b *backend) lastOpTime() bson.Timestamp {
	if ot := b.sess.OperationTime(); ot != nil {
		return *ot
	}
	b.it.t.Fatal("no operation time")
	return bson.Timestamp{}
}

func (b *backend) must(err error) {
	b.it.t.Helper()
	if err != nil {
		b.it.t.Fatal(err)
	}
}

// homeworkInfo is what the script needs of a homework.
type homeworkInfo struct {
	id       bson.ObjectID
	end      time.Time
	problems []int32
	users    []string
}

func (b *backend) homeworks() []homeworkInfo {
	b.it.t.Helper()
	var out []homeworkInfo
	for _, h := range b.it.read().Homeworks {
		hi := homeworkInfo{id: h.Lookup("_id").ObjectID()}
		if end, ok := h.Lookup("duration", "end").DateTimeOK(); ok {
			hi.end = time.UnixMilli(end).UTC()
		} else {
			hi.end = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		}
		if ss, ok := h.Lookup("studentStatus").DocumentOK(); ok {
			us, _ := ss.Elements()
			for _, u := range us {
				hi.users = append(hi.users, u.Key())
				if len(hi.problems) == 0 {
					if probs, ok := u.Value().DocumentOK(); ok {
						ps, _ := probs.Elements()
						for _, p := range ps {
							n, err := strconv.Atoi(p.Key())
							if err == nil {
								hi.problems = append(hi.problems, int32(n))
							}
						}
					}
				}
			}
		}
		if len(hi.problems) > 0 && len(hi.users) > 0 {
			out = append(out, hi)
		}
	}
	if len(out) == 0 {
		b.it.t.Fatal("the seeded data has no homework with entries")
	}
	return out
}

// submit inserts a created submission (status -2) for user and problem,
// stamped around the homework's deadline, and returns its _id.
func (b *backend) submit(user string, problem int32, end time.Time) bson.ObjectID {
	b.it.t.Helper()
	b.n++
	ts := end.Add(time.Duration(b.rng.IntN(5*24)-2*24) * time.Hour).Add(time.Duration(b.n) * time.Millisecond)
	id := bson.NewObjectIDFromTimestamp(ts)
	ctx, cancel := b.opCtx()
	defer cancel()
	_, err := b.it.coll("submission").InsertOne(ctx, bson.D{
		{Key: "_id", Value: id}, {Key: "problem", Value: problem}, {Key: "user", Value: user},
		{Key: "languageType", Value: int32(b.rng.IntN(3))}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(ts)},
		{Key: "status", Value: int32(-2)}, {Key: "score", Value: int32(-1)}, {Key: "tasks", Value: bson.A{}},
		{Key: "runTime", Value: int32(0)}, {Key: "memoryUsage", Value: int32(0)}, {Key: "codeMinioPath", Value: nil},
		{Key: "lastSend", Value: bson.NewDateTimeFromTime(ts)}, {Key: "ip_addr", Value: "127.0.0.1"},
	})
	b.must(err)
	return id
}

// set applies one $set to a document.
func (b *backend) set(coll string, id any, fields bson.D) {
	b.it.t.Helper()
	ctx, cancel := b.opCtx()
	defer cancel()
	res, err := b.it.coll(coll).UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: fields}})
	b.must(err)
	if res.MatchedCount != 1 {
		b.it.t.Fatalf("$set on %s %v matched %d documents", coll, id, res.MatchedCount)
	}
}

// pending marks a submission's code uploaded (status -1).
func (b *backend) pending(id bson.ObjectID) {
	b.set("submission", id, bson.D{{Key: "status", Value: int32(-1)}, {Key: "lastSend", Value: bson.NewDateTimeFromTime(time.Now())}})
}

// judge writes a judging result.
func (b *backend) judge(id bson.ObjectID) {
	st := []int32{0, 0, 1, 2, 3, 5, 7}[b.rng.IntN(7)]
	score := int32(100)
	if st != 0 {
		score = int32(b.rng.IntN(10) * 10)
	}
	b.set("submission", id, bson.D{{Key: "status", Value: st}, {Key: "score", Value: score},
		{Key: "runTime", Value: int32(b.rng.IntN(1000))}, {Key: "memoryUsage", Value: int32(b.rng.IntN(65536))},
		{Key: "tasks", Value: bson.A{bson.D{{Key: "status", Value: st}, {Key: "score", Value: score}}}}})
}

// pick returns a user and problem with an entry in homework h.
func (b *backend) pick(h homeworkInfo) (string, int32) {
	return h.users[b.rng.IntN(len(h.users))], h.problems[b.rng.IntN(len(h.problems))]
}

// TestIntegrationRunCrashRestart: `run` on a seeded database under a
// scripted sequence of Back-End writes (submissions created, uploaded,
// judged, rejudged and deleted; a homework's penalty, deadline and
// students changed; problem.homeworks reordered), SIGKILLed mid-stream
// twice and restarted: once quiet, the stored derived values equal a
// derivation of the documents, and SIGTERM then exits 0.
func TestIntegrationRunCrashRestart(t *testing.T) {
	it := newIntegration(t)
	bin := buildBinary(t)
	it.seedOnline(8, 5, 3, 80)
	be := newBackend(it)
	hws := be.homeworks()

	d := startDaemon(t, bin)
	it.waitQuiet(d)

	// Phase A, daemon running: create, upload and judge; SIGKILL right
	// after, with events still in flight.
	var subs []bson.ObjectID
	for i := 0; i < 12; i++ {
		h := hws[i%len(hws)]
		u, p := be.pick(h)
		subs = append(subs, be.submit(u, p, h.end))
	}
	for _, id := range subs {
		be.pending(id)
	}
	for _, id := range subs[:7] {
		be.judge(id)
	}
	d.kill(t)

	// Phase B, daemon down: the rest is judged, two are rejudged, one is
	// deleted, a penalty changes, a problem's homeworks are reordered.
	for _, id := range subs[7:] {
		be.judge(id)
	}
	for _, id := range []bson.ObjectID{subs[1], subs[8]} {
		be.pending(id)
		be.judge(id)
	}
	{
		ctx, cancel := be.opCtx()
		_, err := it.coll("submission").DeleteOne(ctx, bson.D{{Key: "_id", Value: subs[2]}})
		cancel()
		be.must(err)
	}
	be.set("homework", hws[0].id, bson.D{{Key: "penalty", Value: "score = score // 2 if overtime < 2 else 0"}})
	reorderProblemHomeworks(t, be, hws)

	d = startDaemon(t, bin)
	it.waitQuiet(d)

	// Phase C, daemon running: a new (dotted) student joins a homework,
	// submits and is judged; a deadline moves; more judging; SIGKILL again
	// in the middle of the burst.
	addStudent(t, be, hws[len(hws)-1], "new.student")
	for i := 0; i < 3; i++ {
		h := hws[len(hws)-1]
		id := be.submit("new.student", h.problems[i%len(h.problems)], h.end)
		be.pending(id)
		be.judge(id)
	}
	be.set("homework", hws[len(hws)-1].id, bson.D{{Key: "duration.end", Value: bson.NewDateTimeFromTime(hws[len(hws)-1].end.Add(-36 * time.Hour))}})
	for i := 0; i < 10; i++ {
		h := hws[i%len(hws)]
		u, p := be.pick(h)
		id := be.submit(u, p, h.end)
		be.pending(id)
		be.judge(id)
		if i == 4 {
			d.kill(t)
			d = startDaemon(t, bin)
		}
	}
	docs := it.waitQuiet(d)
	if diff := derivedDiff(docs); len(diff) > 0 {
		t.Fatalf("stored values differ from the derivation:\n%s", strings.Join(diff, "\n"))
	}
	if r := runCLI(t, "verify"); r.code != exitOK {
		t.Errorf("verify after convergence: want exit 0\n%v", r)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("run after SIGTERM: exit %d, want 0", code)
	}
}

// reorderProblemHomeworks reverses the homeworks list of a problem listed
// by two homeworks, or lists a problem in a second homework first.
func reorderProblemHomeworks(t *testing.T, be *backend, hws []homeworkInfo) {
	t.Helper()
	for _, p := range be.it.read().Problems {
		arr, ok := p.Lookup("homeworks").ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		if len(vals) < 2 {
			continue
		}
		rev := bson.A{}
		for i := len(vals) - 1; i >= 0; i-- {
			rev = append(rev, vals[i])
		}
		be.set("problem", p.Lookup("_id"), bson.D{{Key: "homeworks", Value: rev}})
		return
	}
	// No problem is listed twice: list hws[0]'s first problem in hws[1]
	// too, ahead of hws[0] (Back-End's homework update writes both sides).
	if len(hws) < 2 {
		t.Log("one homework only: no reorder")
		return
	}
	p := hws[0].problems[0]
	be.set("problem", p, bson.D{{Key: "homeworks", Value: bson.A{hws[1].id, hws[0].id}}})
}

// addStudent adds a user document and an entry per problem of homework h
// for it, as Back-End's user creation and homework update do (the
// homework is replaced whole: the username holds a '.').
func addStudent(t *testing.T, be *backend, h homeworkInfo, name string) {
	t.Helper()
	ctx, cancel := be.opCtx()
	defer cancel()
	_, err := be.it.coll("user").InsertOne(ctx, bson.D{
		{Key: "_id", Value: name}, {Key: "userId", Value: "ffffffffffffffffffffffff"}, {Key: "email", Value: name + "@example.edu"},
		{Key: "active", Value: true}, {Key: "role", Value: int32(2)}, {Key: "courses", Value: bson.A{}},
		{Key: "AC_problem_ids", Value: bson.A{}}, {Key: "AC_submission", Value: int32(0)}, {Key: "submission", Value: int32(0)},
	})
	be.must(err)
	var doc bson.D
	be.must(be.it.coll("homework").FindOne(ctx, bson.D{{Key: "_id", Value: h.id}}).Decode(&doc))
	for i, e := range doc {
		if e.Key != "studentStatus" {
			continue
		}
		ss, ok := e.Value.(bson.D)
		if !ok {
			t.Fatalf("studentStatus decoded as %T", e.Value)
		}
		entries := bson.D{}
		for _, p := range h.problems {
			entries = append(entries, bson.E{Key: strconv.Itoa(int(p)), Value: bson.D{
				{Key: "score", Value: int32(0)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}}}})
		}
		doc[i].Value = append(ss, bson.E{Key: name, Value: entries})
	}
	res, err := be.it.coll("homework").ReplaceOne(ctx, bson.D{{Key: "_id", Value: h.id}}, doc)
	be.must(err)
	if res.MatchedCount != 1 {
		t.Fatalf("replace homework %s matched %d", h.id.Hex(), res.MatchedCount)
	}
}

var (
	reCheckpointStart = regexp.MustCompile(`(?m)^checkpoint: start at cluster time (\d+)\.(\d+)`)
	reCheckpointEvent = regexp.MustCompile(`(?m)^last event cluster time: (\d+)\.(\d+)`)
)

func parseTimestamp(t *testing.T, m []string) bson.Timestamp {
	t.Helper()
	sec, err1 := strconv.ParseUint(m[1], 10, 32)
	inc, err2 := strconv.ParseUint(m[2], 10, 32)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad timestamp %q", m[0])
	}
	return bson.Timestamp{T: uint32(sec), I: uint32(inc)}
}

// TestIntegrationSIGTERM: SIGTERM in the middle of a burst of writes makes
// `run` exit 0, and the checkpoint it leaves (read with `status`) covers
// only processed events: every write at or before the checkpoint's cluster
// time has its derived values stored. Each write of the burst touches a
// user and pair of its own, so its effect can be checked alone. A restart
// then catches up with the rest.
func TestIntegrationSIGTERM(t *testing.T) {
	it := newIntegration(t)
	bin := buildBinary(t)
	it.seedOnline(30, 4, 3, 40)
	be := newBackend(it)
	hws := be.homeworks()

	d := startDaemon(t, bin)
	it.waitQuiet(d)

	type write struct {
		user    string
		problem int32
		at      bson.Timestamp
	}
	var burst []write
	used := map[string]bool{}
	for i := 0; len(burst) < 20 && i < 200; i++ {
		h := hws[i%len(hws)]
		u, p := be.pick(h)
		if used[u] {
			continue
		}
		used[u] = true
		id := be.submit(u, p, h.end)
		be.judge(id)
		burst = append(burst, write{user: u, problem: p, at: be.lastOpTime()})
	}
	// Wait until a checkpoint covers the first write of the burst, so the
	// coverage check below has at least one write to check (otherwise a
	// SIGTERM before any save would make it check nothing).
	it.waitCheckpointCovers(d, burst[0].at)
	if code := d.stop(t); code != 0 {
		t.Fatalf("run after SIGTERM: exit %d, want 0\n%s", code, tail(d.out.String(), 4000))
	}

	r := runCLI(t, "status")
	if r.code != exitOK {
		t.Fatalf("status: want exit 0\n%v", r)
	}
	// A checkpoint that starts at a cluster time (after a rebuild) covers
	// the events before it; a resume token covers at least the events up
	// to the last event cluster time it was saved with.
	var covers func(at bson.Timestamp) bool
	switch {
	case reCheckpointStart.MatchString(r.stdout):
		c := parseTimestamp(t, reCheckpointStart.FindStringSubmatch(r.stdout))
		covers = func(at bson.Timestamp) bool { return at.Before(c) } // the stream restarts at c inclusive
	case strings.Contains(r.stdout, "checkpoint: resume token") && reCheckpointEvent.MatchString(r.stdout):
		c := parseTimestamp(t, reCheckpointEvent.FindStringSubmatch(r.stdout))
		covers = func(at bson.Timestamp) bool { return !c.Before(at) } // at <= c
	default:
		t.Fatalf("status shows no checkpoint position\n%v", r)
	}

	docs := it.read()
	want := materialize.Derive(docs)
	got, err := materializetest.Stored(docs)
	if err != nil {
		t.Fatal(err)
	}
	covered := 0
	for _, w := range burst {
		if !covers(w.at) {
			continue
		}
		covered++
		if g, ok := got.Users[w.user]; !ok || !g.Equal(want.Users[w.user]) {
			t.Errorf("write at %d.%d is covered by the checkpoint, but user %s holds %+v, derived %+v",
				w.at.T, w.at.I, w.user, g, want.Users[w.user])
		}
		pk := strconv.Itoa(int(w.problem))
		for h, users := range want.Entries {
			e, ok := users[w.user][pk]
			if !ok {
				continue
			}
			if g := got.Entries[h][w.user][pk]; !g.Equal(e) {
				t.Errorf("write at %d.%d is covered by the checkpoint, but homework %s entry %s.%s holds %+v, derived %+v",
					w.at.T, w.at.I, h.Hex(), w.user, pk, g, e)
			}
		}
	}
	t.Logf("%d of %d writes covered by the checkpoint saved at SIGTERM", covered, len(burst))
	if covered == 0 {
		t.Errorf("the checkpoint left at SIGTERM covers none of the burst, though one covering its first write was saved before")
	}

	d = startDaemon(t, bin)
	it.waitQuiet(d)
	if code := d.stop(t); code != 0 {
		t.Errorf("run after SIGTERM: exit %d, want 0", code)
	}
}

// waitCheckpointCovers waits up to 60 s until the saved checkpoint's last
// event cluster time is at or after at.
func (it *itest) waitCheckpointCovers(d *daemon, at bson.Timestamp) {
	it.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := it.ctx()
		raw, err := it.coll("materializer_checkpoints").FindOne(ctx, bson.D{{Key: "_id", Value: "checkpoint"}}).Raw()
		cancel()
		if err == nil {
			if t, i, ok := raw.Lookup("checkpoint", "clusterTime").TimestampOK(); ok && !(bson.Timestamp{T: t, I: i}).Before(at) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	it.t.Fatalf("no checkpoint covering %d.%d within 60s\n%s", at.T, at.I, tail(d.out.String(), 4000))
}

// TestIntegrationSkipsFast documents the skip: without a replica set the
// integration tests skip with a message naming how to run them.
func TestIntegrationSkipsFast(t *testing.T) {
	start := time.Now()
	uri := func() (uri string) {
		defer func() { _ = recover() }()
		mongoOnce.Do(findMongo)
		return mongoURI
	}()
	if uri != "" {
		t.Skip("a replica set is available")
	}
	// The Docker probe's 2 s bound, not testcontainers' wait: a bound far
	// from the first holds on a loaded machine.
	if took := time.Since(start); took > 30*time.Second && strings.HasPrefix(mongoWhy, "no Docker engine") {
		t.Errorf("finding no replica set took %s", took)
	}
	if !strings.Contains(noMongoSkip, "MATERIALIZER_TEST_MONGODB_URI") || mongoWhy == "" {
		t.Errorf("skip reason %q: %q", noMongoSkip, mongoWhy)
	}
	t.Logf("integration tests skip: %s (%s)", noMongoSkip, mongoWhy)
}

// TestIntegrationSeedRefusesData: `seed` into a database that already has
// submissions fails and inserts nothing; with --if-empty it exits 0,
// inserting nothing either.
func TestIntegrationSeedRefusesData(t *testing.T) {
	it := newIntegration(t)
	it.seedOnline(3, 2, 1, 10)
	before := it.read()
	if len(before.Submissions) != 10 || len(before.Users) != 3 {
		t.Fatalf("seed inserted %d submissions and %d users, want 10 and 3", len(before.Submissions), len(before.Users))
	}
	r := runCLI(t, "seed", "--users", "2", "--submissions", "5", "--seed", "9")
	if r.code != exitFail {
		t.Errorf("seed into a database with submissions: want exit 1\n%v", r)
	}
	r = runCLI(t, "seed", "--users", "2", "--submissions", "5", "--seed", "9", "--if-empty")
	if r.code != exitOK {
		t.Errorf("seed --if-empty into a database with submissions: want exit 0\n%v", r)
	}
	after := it.read()
	if len(after.Submissions) != len(before.Submissions) || len(after.Users) != len(before.Users) ||
		len(after.Homeworks) != len(before.Homeworks) || len(after.Problems) != len(before.Problems) {
		t.Errorf("a refused seed changed the database")
	}
}
