package mongodb

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/drivertest"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// sentCommand is one command the driver sent on the mock deployment and
// whether its context had a deadline.
type sentCommand struct {
	name        string
	cmd         bson.Raw
	hasDeadline bool
}

// mockClient is a client on the driver's mock deployment (as mockDB) that
// records every command with its context's deadline.
func mockClient(t *testing.T) (*mongo.Client, *drivertest.MockDeployment, func() []sentCommand) {
	t.Helper()
	md := drivertest.NewMockDeployment()
	var mu sync.Mutex
	var cmds []sentCommand
	opts := options.Client().SetMonitor(&event.CommandMonitor{Started: func(ctx context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		_, dl := ctx.Deadline()
		cmds = append(cmds, sentCommand{name: e.CommandName, cmd: append(bson.Raw(nil), e.Command...), hasDeadline: dl})
	}})
	if err := xoptions.SetInternalClientOptions(opts, "deployment", md); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client, md, func() []sentCommand {
		mu.Lock()
		defer mu.Unlock()
		out := cmds
		cmds = nil
		return out
	}
}

func commandError(code int32, name, msg string, labels ...string) bson.D {
	d := bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: code}, {Key: "codeName", Value: name}, {Key: "errmsg", Value: msg}}
	if len(labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: labels})
	}
	return d
}

func unauthorized(cmd string) bson.D {
	return commandError(13, "Unauthorized", "not authorized on normal-oj to execute command { "+cmd+": ... }")
}

// token is a resume token whose _data encodes cluster time t.i as the
// server does (0x82, then the timestamp big-endian).
func token(t, i uint32) bson.D {
	const hexdigits = "0123456789ABCDEF"
	b := []byte{0x82, byte(t >> 24), byte(t >> 16), byte(t >> 8), byte(t), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), 0x2B, 0x02, 0x2C, 0x01, 0x00, 0x04}
	s := make([]byte, 0, 2*len(b))
	for _, x := range b {
		s = append(s, hexdigits[x>>4], hexdigits[x&15])
	}
	return bson.D{{Key: "_data", Value: string(s)}}
}

// streamReply is the reply of a change stream's aggregate or getMore.
func streamReply(first bool, id int64, batch bson.A, pbrt bson.D) bson.D {
	key := "nextBatch"
	if first {
		key = "firstBatch"
	}
	return bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{
		{Key: "id", Value: id}, {Key: "ns", Value: "normal-oj.$cmd.aggregate"}, {Key: key, Value: batch},
		{Key: "postBatchResumeToken", Value: pbrt}}}}
}

// TestRecordKeysRefusedForGood (the adapter's part): a
// key-index bulk write the server refused for good (a validator on the
// key collection, 121) is watch.Refused and wraps watch.ErrWriteRejected,
// not an error the engine retries forever.
func TestRecordKeysRefusedForGood(t *testing.T) {
	d, md, _ := mockDB(t)
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 0}, {Key: "nModified", Value: 0},
		{Key: "writeErrors", Value: bson.A{bson.D{{Key: "index", Value: 0}, {Key: "code", Value: 121}, {Key: "errmsg", Value: "Document failed validation"}}}}})
	err := d.RecordKeys(context.Background(), map[bson.ObjectID][]materialize.Pair{bson.NewObjectID(): {{User: "alice", Problem: 1}}})
	if c := watch.ClassOf(err); c != watch.Refused {
		t.Errorf("RecordKeys refused by a validator: class %s (%v), want refused", c, err)
	}
	if !errors.Is(err, watch.ErrWriteRejected) {
		t.Errorf("RecordKeys refused by a validator: %v does not wrap ErrWriteRejected", err)
	}
}

// TestUnauthorizedNamesPrivilege: 13 Unauthorized
// from any of the adapter's reads and writes is watch.Unauthorized, and
// the message names the action and the resource the role lacks.
func TestUnauthorizedNamesPrivilege(t *testing.T) {
	ctx := context.Background()
	id := bson.NewObjectID()
	cases := []struct {
		name    string
		replies []bson.D
		call    func(d *DB) error
		want    []string // in the message
	}{
		{"Users", []bson.D{unauthorized("find")}, func(d *DB) error { _, err := d.Users(ctx, []string{"alice"}); return err },
			[]string{`"find"`, "normal-oj.user"}},
		{"Homeworks", []bson.D{unauthorized("aggregate")}, func(d *DB) error { _, _, err := d.Homeworks(ctx, []bson.ObjectID{id}, nil); return err },
			[]string{`"find"`, "normal-oj.homework"}},
		{"Apply", []bson.D{unauthorized("update")}, func(d *DB) error {
			_, err := d.Apply(ctx, &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}})
			return err
		}, []string{`"update"`, "normal-oj.user"}},
		{"RecordKeys", []bson.D{unauthorized("update")}, func(d *DB) error {
			return d.RecordKeys(ctx, map[bson.ObjectID][]materialize.Pair{id: {{User: "a", Problem: 1}}})
		}, []string{`"update", "insert"`, "normal-oj.materializer_submission_keys"}},
		{"LookupKeys", []bson.D{unauthorized("find")}, func(d *DB) error { _, err := d.LookupKeys(ctx, []bson.ObjectID{id}); return err },
			[]string{`"find"`, "normal-oj.materializer_submission_keys"}},
		{"LoadCheckpoint", []bson.D{unauthorized("find")}, func(d *DB) error { _, _, err := d.LoadCheckpoint(ctx); return err },
			[]string{`"find"`, "normal-oj.materializer_checkpoints"}},
		{"SaveCheckpoint", []bson.D{unauthorized("update")}, func(d *DB) error { return d.SaveCheckpoint(ctx, resume.Checkpoint{Epoch: 1}) },
			[]string{`"update", "insert"`, "normal-oj.materializer_checkpoints"}},
		{"Acquire", []bson.D{unauthorized("findAndModify")}, func(d *DB) error { _, _, err := d.Acquire(ctx, "me", time.Second); return err },
			[]string{`"find", "update", "insert"`, "normal-oj.materializer_checkpoints"}},
		{"Release", []bson.D{unauthorized("update")}, func(d *DB) error { return d.Release(ctx, "me", 1) },
			[]string{`"update"`, "normal-oj.materializer_checkpoints"}},
		{"Open stream", []bson.D{unauthorized("aggregate")}, func(d *DB) error { _, err := d.Open(ctx, watch.Position{}); return err },
			[]string{`"changeStream", "find"`, `database normal-oj (collection: "")`}},
		{"ClusterTime", []bson.D{unauthorized("find")}, func(d *DB) error { _, err := d.ClusterTime(ctx); return err },
			[]string{`"find"`, "normal-oj.materializer_checkpoints"}},
		{"EnsureIndexes", []bson.D{emptyCursor("normal-oj.submission"), emptyCursor("normal-oj.problem"), unauthorized("createIndexes")},
			func(d *DB) error { return d.EnsureIndexes(ctx, nil) }, []string{`"createIndex"`, "normal-oj.submission"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, _ := mockDB(t)
			md.AddResponses(c.replies...)
			err := c.call(d)
			if cl := watch.ClassOf(err); cl != watch.Unauthorized {
				t.Fatalf("class %s (%v), want unauthorized", cl, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: does not name %s", err, w)
				}
			}
		})
	}
}

// TestStreamErrorsNotFatal (the adapter's part): a
// getMore failing with KeyNotFound (211) or QueryPlanKilled (175), which
// the driver does not resume on 4.4+ (no ResumableChangeStreamError
// label), is transient; one labelled SystemOverloadedError is
// overloaded. Before, they were left unclassified and ended the process.
func TestStreamErrorsNotFatal(t *testing.T) {
	cases := []struct {
		name  string
		reply bson.D
		want  watch.Class
	}{
		{"KeyNotFound", commandError(211, "KeyNotFound", "No keys found for HMAC that is valid for time"), watch.Transient},
		{"QueryPlanKilled", commandError(175, "QueryPlanKilled", "PlanExecutor error during aggregation :: caused by :: collection dropped"), watch.Transient},
		{"SystemOverloadedError", commandError(462, "IngressRequestRateLimitExceeded", "rate limited", "SystemOverloadedError", "RetryableError"), watch.Overloaded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, _ := mockDB(t)
			md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)))
			// The driver may retry an overload error itself: enough copies.
			md.AddResponses(c.reply, c.reply, c.reply, c.reply, c.reply, c.reply)
			st, err := d.Open(context.Background(), watch.Position{})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = mockNext(st)
			if cl := watch.ClassOf(err); cl != c.want {
				t.Errorf("Next: class %s (%v), want %s", cl, err, c.want)
			}
		})
	}
}

// mockNext calls st.Next until it returns an event or an error (the
// driver's first TryNext returns the initial aggregate's empty batch
// without a getMore), at most three times.
func mockNext(st watch.Stream) (watch.Event, bool, error) {
	for range 3 {
		ev, ok, err := st.Next(context.Background())
		if ok || err != nil {
			return ev, ok, err
		}
	}
	return watch.Event{}, false, nil
}

// TestStreamClosedByServer: after an invalidate event the server closes
// the cursor (id 0 in the getMore reply); the adapter's own Stream, on the
// driver's change stream, returns the event and then a transient error
// (reopen after the invalidate's token), never a quiet stream forever.
func TestStreamClosedByServer(t *testing.T) {
	d, md, sent := mockDB(t)
	inv := bson.D{{Key: "_id", Value: token(1_800_000_000, 5)}, {Key: "operationType", Value: "invalidate"},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1_800_000_000, I: 5}}}
	md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)),
		streamReply(false, 0, bson.A{inv}, token(1_800_000_000, 5)))
	st, err := d.Open(context.Background(), watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	ev, ok, err := mockNext(st)
	if err != nil || !ok || ev.Change.Op != materialize.OpInvalidate {
		t.Fatalf("first Next = %+v, %v, %v; want the invalidate event", ev.Change, ok, err)
	}
	_, ok, err = st.Next(context.Background())
	if ok || watch.ClassOf(err) != watch.Transient {
		t.Errorf("Next after the server closed the cursor = %v, %v (class %s); want a transient error", ok, err, watch.ClassOf(err))
	}
	if err := st.Close(context.Background()); err != nil {
		t.Errorf("Close of a closed cursor: %v", err)
	}
	for _, c := range sent() {
		if _, err := c.LookupErr("killCursors"); err == nil {
			t.Errorf("killCursors sent for a cursor the server closed: %s", c)
		}
	}
}

// TestCloseHonoursDeadline (the adapter's part): the
// killCursors of a change stream's Close, and of a read's cursor, run
// under a deadline even when the caller's context has none, so an
// unreachable server cannot hold shutdown and the lease release.
func TestCloseHonoursDeadline(t *testing.T) {
	client, md, sent := mockClient(t)
	d := newDB(client, Config{}.withDefaults())
	md.AddResponses(streamReply(true, 42, bson.A{}, token(1_800_000_000, 1)),
		bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}})
	st, err := d.Open(context.Background(), watch.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(context.WithoutCancel(context.Background())); err != nil {
		t.Fatal(err)
	}
	// A find whose cursor stays open (id 7) when fn fails.
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "id", Value: int64(7)}, {Key: "ns", Value: "normal-oj.user"},
		{Key: "firstBatch", Value: bson.A{bson.D{{Key: "_id", Value: "alice"}}}}}}},
		bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(7)}}})
	stop := errors.New("stop")
	if err := d.find(context.Background(), d.users, bson.D{}, nil, func(bson.Raw) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("find: %v", err)
	}
	kills := 0
	for _, c := range sent() {
		if c.name != "killCursors" {
			continue
		}
		kills++
		if !c.hasDeadline {
			t.Errorf("killCursors %s sent without a deadline", c.cmd)
		}
	}
	if kills != 2 {
		t.Errorf("%d killCursors, want 2 (the stream's, the find's)", kills)
	}
}

// TestReadsCausallyAfterOwnWrites: a read under a
// batch carries afterClusterTime of the later of the batch's last event
// and the operationTime of the daemon's own last acknowledged write, so a
// read after a fail-over cannot come from a snapshot before that write.
func TestReadsCausallyAfterOwnWrites(t *testing.T) {
	d, md, sent := mockDB(t)
	ev := bson.Timestamp{T: 1_800_000_000, I: 7}
	wrote := bson.Timestamp{T: 1_800_000_010, I: 2}
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: wrote}})
	if _, err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	sent()
	md.AddResponses(emptyCursor("normal-oj.user"))
	if _, err := d.Users(watch.WithReadAfter(context.Background(), ev), []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("%d commands, want 1", len(cmds))
	}
	after := cmds[0].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != wrote {
		t.Errorf("afterClusterTime %v, want the daemon's own write's operationTime %v (the event's is %v)", after, wrote, ev)
	}
	// An event later than the write: the event's time.
	later := bson.Timestamp{T: 1_800_000_020, I: 1}
	md.AddResponses(emptyCursor("normal-oj.user"))
	if _, err := d.Users(watch.WithReadAfter(context.Background(), later), []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	after = sent()[0].Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != later {
		t.Errorf("afterClusterTime %v, want the later event's %v", after, later)
	}
}

// openReplies are the replies to open's checks: ping, buildInfo, hello,
// the majority probe.
func openReplies(hello bson.D) []bson.D {
	return []bson.D{
		{{Key: "ok", Value: 1}},
		{{Key: "ok", Value: 1}, {Key: "version", Value: "7.0.12"}},
		append(bson.D{{Key: "ok", Value: 1}}, hello...),
		emptyCursor("normal-oj.user"),
	}
}

// TestClusterTimeThroughMongos: through a mongos
// (hello says msg "isdbgrid") the hand-off time is the cluster time of the
// postBatchResumeToken of a change stream on the database (the merged
// stream's high-water mark over every shard), not the operationTime of a
// majority find, which is one shard's commit point.
func TestClusterTimeThroughMongos(t *testing.T) {
	client, md, sent := mockClient(t)
	md.AddResponses(openReplies(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"}, {Key: "maxWireVersion", Value: int32(21)}})...)
	d, err := open(context.Background(), client, Config{Writes: true}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	sent()
	mark := bson.Timestamp{T: 1_800_000_000, I: 4}
	reply := streamReply(true, 42, bson.A{}, token(mark.T, mark.I))
	// A mongos's reply also carries operationTime: one shard's, later here.
	reply = append(reply, bson.E{Key: "operationTime", Value: bson.Timestamp{T: 1_800_000_009, I: 1}})
	md.AddResponses(reply, bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}})
	got, err := d.ClusterTime(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got != mark {
		t.Errorf("ClusterTime through mongos = %v, want the postBatchResumeToken's %v", got, mark)
	}
	cmds := sent()
	if len(cmds) == 0 || cmds[0].name != "aggregate" {
		var names []string
		for _, c := range cmds {
			names = append(names, c.name)
		}
		t.Fatalf("sent %q, want an aggregate with $changeStream first", names)
	}
	if _, err := cmds[0].cmd.LookupErr("pipeline", "0", "$changeStream"); err != nil {
		t.Errorf("first command %s has no $changeStream stage", cmds[0].cmd)
	}
	if bs, ok := cmds[0].cmd.Lookup("cursor", "batchSize").AsInt64OK(); !ok || bs != 0 {
		t.Errorf("aggregate %s: want cursor.batchSize 0 (an empty first batch carries the postBatchResumeToken)", cmds[0].cmd)
	}
	// The scan that follows reads causally after the hand-off time, so a
	// lagging shard answers only once it has committed every write up to it.
	md.AddResponses(emptyCursor("normal-oj.user"))
	if _, _, err := d.AllUsers(context.Background()); err != nil {
		t.Fatal(err)
	}
	cmds = sent()
	after := cmds[len(cmds)-1].cmd.Lookup("readConcern", "afterClusterTime")
	if tt, ti, _ := after.TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != mark {
		t.Errorf("scan after the hand-off: afterClusterTime %v, want %v", after, mark)
	}
}

func TestTokenTime(t *testing.T) {
	raw, _ := bson.Marshal(token(1_700_000_123, 9))
	got, err := tokenTime(raw)
	if err != nil || got != (bson.Timestamp{T: 1_700_000_123, I: 9}) {
		t.Errorf("tokenTime = %v, %v", got, err)
	}
	// A real token of a 4.4 server (an insert event at 6345ECF0:1).
	real, _ := bson.Marshal(bson.D{{Key: "_data", Value: "826345ECF0000000012B022C0100296E5A1004"}})
	if got, err := tokenTime(real); err != nil || got != (bson.Timestamp{T: 0x6345ECF0, I: 1}) {
		t.Errorf("tokenTime(4.4 token) = %v, %v", got, err)
	}
	for _, bad := range []bson.D{{{Key: "_data", Value: "zz"}}, {{Key: "_data", Value: "0A01"}}, {{Key: "x", Value: 1}}} {
		raw, _ := bson.Marshal(bad)
		if _, err := tokenTime(raw); err == nil {
			t.Errorf("tokenTime(%v): no error", bad)
		}
	}
}

// TestOpenRefusesSecondaryForWrites: a command
// that writes refuses a server that is not a writable primary (a
// secondary reached with directConnection=true answers hello with
// isWritablePrimary false), naming the replica set URI to use; a
// read-only command accepts it.
func TestOpenRefusesSecondaryForWrites(t *testing.T) {
	secondary := bson.D{{Key: "isWritablePrimary", Value: false}, {Key: "secondary", Value: true}, {Key: "setName", Value: "rs0"},
		{Key: "hosts", Value: bson.A{"db1:27017", "db2:27017", "db3:27017"}}, {Key: "me", Value: "db2:27017"}, {Key: "maxWireVersion", Value: int32(21)}}
	client, md, _ := mockClient(t)
	md.AddResponses(openReplies(secondary)...)
	_, err := open(context.Background(), client, Config{Writes: true}.withDefaults())
	if watch.ClassOf(err) != watch.NotPrimary {
		t.Fatalf("open of a secondary for writes: %v (class %s), want not_primary", err, watch.ClassOf(err))
	}
	if !strings.Contains(err.Error(), "mongodb://db1:27017,db2:27017,db3:27017/?replicaSet=rs0") {
		t.Errorf("%v: does not name the replica set URI to use", err)
	}
	client, md, _ = mockClient(t)
	md.AddResponses(openReplies(secondary)...)
	if _, err := open(context.Background(), client, Config{}.withDefaults()); err != nil {
		t.Errorf("open of a secondary for a read-only command: %v", err)
	}
	client, md, _ = mockClient(t)
	md.AddResponses(openReplies(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs0"}, {Key: "maxWireVersion", Value: int32(21)}})...)
	if _, err := open(context.Background(), client, Config{Writes: true}.withDefaults()); err != nil {
		t.Errorf("open of the primary for writes: %v", err)
	}
}

// TestEnsureIndexesCommitQuorumMajority: each
// createIndexes is sent with commitQuorum "majority" (the default,
// votingMembers, waits forever for a data-bearing voting member that is
// down), and none on a standalone (which refuses the field).
func TestEnsureIndexesCommitQuorumMajority(t *testing.T) {
	for _, standalone := range []bool{false, true} {
		client, md, sent := mockClient(t)
		d := newDB(client, Config{}.withDefaults())
		d.standalone = standalone
		md.AddResponses(emptyCursor("normal-oj.submission"), emptyCursor("normal-oj.problem"))
		for range indexes {
			md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "createdCollectionAutomatically", Value: false},
				{Key: "numIndexesBefore", Value: 1}, {Key: "numIndexesAfter", Value: 2}})
		}
		if err := d.EnsureIndexes(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		creates := 0
		for _, c := range sent() {
			if c.name != "createIndexes" {
				continue
			}
			creates++
			q, err := c.cmd.LookupErr("commitQuorum")
			switch {
			case standalone && err == nil:
				t.Errorf("standalone: createIndexes %s has a commitQuorum", c.cmd)
			case !standalone:
				if s, _ := q.StringValueOK(); s != "majority" {
					t.Errorf("createIndexes %s: want commitQuorum \"majority\"", c.cmd)
				}
			}
		}
		if creates != len(indexes) {
			t.Errorf("%d createIndexes, want %d", creates, len(indexes))
		}
	}
}

// TestEnsureIndexesReportsWaiting: a build that has not returned is
// reported every report interval with how long it has waited, then no
// more once it returned.
func TestEnsureIndexesReportsWaiting(t *testing.T) {
	reported := make(chan struct{})
	// The builds return once one was reported waiting (a minute at most).
	f := &fakeIndexes{specs: map[string][]bson.Raw{}, block: true, release: reported}
	var mu sync.Mutex
	var waits []time.Duration
	var once sync.Once
	err := ensureIndexes(context.Background(), f, func(ix IndexBuild) {
		mu.Lock()
		defer mu.Unlock()
		if ix.Waiting > 0 {
			waits = append(waits, ix.Waiting)
			once.Do(func() { close(reported) })
		}
	}, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(waits)
	mu.Unlock()
	if n == 0 {
		t.Fatal("a build blocked for a minute was never reported as waiting")
	}
	// No report can follow once no reporter is left running.
	for deadline := time.Now().Add(time.Minute); reporters() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reporters still running a minute after the builds returned", reporters())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != n {
		t.Errorf("reports continued after the builds returned: %d then %d", n, len(waits))
	}
}

// reporters counts the goroutines of reportWaiting running.
func reporters() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "mongodb.reportWaiting.func")
		}
		buf = make([]byte, 2*len(buf))
	}
}
