package mongodb

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/address"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/description"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/drivertest"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/mnet"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/wiremessage"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"

	"github.com/normal-oj/noj-materializer/materialize"
)

// skipWithoutMingo skips the tests that run mingo unless `make test-mql`
// asked for them.
func skipWithoutMingo(t *testing.T) {
	t.Helper()
	if os.Getenv("MATERIALIZER_TEST_MQL") == "" {
		t.Skip("set MATERIALIZER_TEST_MQL=1 to run with mingo (make test-mql: needs Node.js 20 and npm ci in tools/mql)")
	}
}

// mingoProc is tools/mql/harness.js --serve: one case in, one result out.
type mingoProc struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

func startMingo(t *testing.T) *mingoProc {
	t.Helper()
	harness, err := filepath.Abs(filepath.Join("..", "tools", "mql", "harness.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", harness, "--serve")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node %s --serve: %v", harness, err)
	}
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &mingoProc{in: in, out: sc}
}

// run runs c with mingo.
func (p *mingoProc) run(c mqlCase) (mqlResult, error) {
	line, err := bson.MarshalExtJSON(c.doc(), true, false)
	if err != nil {
		return mqlResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return mqlResult{}, err
	}
	if !p.out.Scan() {
		return mqlResult{}, fmt.Errorf("harness exited: %v", p.out.Err())
	}
	return parseMingoResult(p.out.Bytes())
}

// mingoServer answers the driver's commands (find, aggregate, update)
// over the collections it holds, each statement run by mingo: the
// adapter's DB methods, unchanged, with mingo in the server's place.
// Every update it applies is passed to onWrite with the documents before
// and after.
type mingoServer struct {
	t     *testing.T
	mingo *mingoProc
	// ours runs the statements with this package's evaluator instead
	// (MATERIALIZER_TEST_MQL_OURS=1: is a difference mingo's?).
	ours    bool
	mu      sync.Mutex
	colls   map[string][]bson.D
	clock   uint32
	onWrite func(coll string, before, after []bson.D)
	// beforeUpdate, when set, runs before each update statement (q its
	// filter, u its update), as a concurrent writer would.
	beforeUpdate func(coll string, q bson.D, u any)
	// answered counts the commands answered by name and collection
	// ("aggregate submission"), and the pipeline-form update statements
	// ("update homework (pipeline statements)").
	answered map[string]int
	// refuseRead answers Read's one aggregate (a $replaceWith at the top)
	// as a result over 16 MB would be, BSONObjectTooLarge, so Read
	// falls back to ReadSeparately: the DB methods of each part.
	refuseRead bool
	// failWrites is how many more update commands on a derived
	// collection (user, homework) fail, MaxTimeMSExpired, unapplied.
	failWrites int
}

// connectMingo returns a DB whose every command srv answers.
func connectMingo(t *testing.T, srv *mingoServer) *DB {
	t.Helper()
	opts := options.Client()
	if err := xoptions.SetInternalClientOptions(opts, "deployment", &mingoDeployment{srv: srv}); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return newDB(client, Config{}.withDefaults())
}

// run runs c with mingo, or with the evaluator when s.ours.
func (s *mingoServer) run(c mqlCase) (mqlResult, error) {
	if s.ours {
		return c.runOurs(), nil
	}
	return s.mingo.run(c)
}

// answer runs one command and returns its reply.
func (s *mingoServer) answer(cmd bson.D, seqs map[string][]bson.D) bson.D {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	// Before every generated change event (mqlEvent): no event is taken
	// for the echo of a write.
	at := bson.Timestamp{T: 1_700_000_000, I: s.clock}
	reply := func(kv ...bson.E) bson.D {
		return append(append(bson.D{{Key: "ok", Value: 1.0}}, kv...),
			bson.E{Key: "operationTime", Value: at},
			bson.E{Key: "$clusterTime", Value: bson.D{{Key: "clusterTime", Value: at}}})
	}
	fail := func(msg string) bson.D {
		s.t.Errorf("mingo server: %s", msg)
		return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: int32(8)}}
	}
	cursor := func(coll string, docs []bson.D) bson.D {
		batch := bson.A{}
		for _, d := range docs {
			batch = append(batch, d)
		}
		return reply(bson.E{Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)},
			{Key: "ns", Value: "normal-oj." + coll}, {Key: "firstBatch", Value: batch}}})
	}
	name, coll := cmd[0].Key, fmt.Sprint(cmd[0].Value)
	if s.answered == nil {
		s.answered = map[string]int{}
	}
	s.answered[name+" "+coll]++
	get := func(k string) any { return lookupD(cmd, k) }
	doc := func(k string) bson.D {
		d, _ := get(k).(bson.D)
		return d
	}
	switch name {
	case "find":
		filter := doc("filter")
		if filter == nil {
			filter = bson.D{}
		}
		res, err := s.run(mqlCase{name: "find " + coll, kind: "find", docs: s.colls[coll], filter: filter, proj: doc("projection"), sort: doc("sort")})
		if err != nil || res.err != "" {
			return fail(fmt.Sprintf("find %s %v: %v %s", coll, filter, err, res.err))
		}
		if n, ok := number(get("limit")); ok && n > 0 && int(n) < len(res.docs) {
			res.docs = res.docs[:int(n)]
		}
		return cursor(coll, res.docs)
	case "aggregate":
		stages, _ := get("pipeline").(bson.A)
		for _, st := range stages {
			if d, _ := st.(bson.D); s.refuseRead && len(d) > 0 && d[0].Key == "$replaceWith" {
				s.answered["aggregate "+coll+" (refused: too large)"]++
				return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "BSONObj size: 16793600 is invalid"},
					{Key: "code", Value: int32(codeBSONObjectTooLarge)}, {Key: "codeName", Value: "BSONObjectTooLarge"}}
			}
		}
		res, err := s.run(mqlCase{name: "aggregate " + coll, kind: "aggregate", docs: s.colls[coll], colls: s.colls, stages: stages})
		if err != nil || res.err != "" {
			return fail(fmt.Sprintf("aggregate %s %v: %v %s", coll, stages, err, res.err))
		}
		return cursor(coll, res.docs)
	case "update":
		if s.failWrites > 0 && (coll == materialize.CollUser || coll == materialize.CollHomework) {
			s.failWrites--
			s.answered["update "+coll+" (failed)"]++
			return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "operation exceeded time limit"},
				{Key: "code", Value: int32(codeMaxTimeMSExpired)}, {Key: "codeName", Value: "MaxTimeMSExpired"}}
		}
		var n, modified int
		var upserted bson.A
		var writeErrors bson.A
		for i, st := range seqs["updates"] {
			if multi, _ := lookupD(st, "multi").(bool); multi {
				return fail("multi update")
			}
			upsert, _ := lookupD(st, "upsert").(bool)
			if _, ok := lookupD(st, "u").(bson.A); ok {
				s.answered["update "+coll+" (pipeline statements)"]++
			}
			q, _ := lookupD(st, "q").(bson.D)
			if s.beforeUpdate != nil {
				s.beforeUpdate(coll, q, lookupD(st, "u"))
			}
			before := s.colls[coll]
			res, err := s.run(mqlCase{name: "update " + coll, kind: "update", docs: before, filter: q,
				update: lookupD(st, "u"), upsert: upsert, now: time.Unix(int64(at.T), 0)})
			switch {
			case err != nil:
				return fail(fmt.Sprintf("update %s: %v", coll, err))
			case res.err != "":
				writeErrors = append(writeErrors, bson.D{{Key: "index", Value: int32(i)}, {Key: "code", Value: int32(2)}, {Key: "errmsg", Value: res.err}})
				continue
			case res.dupKey:
				writeErrors = append(writeErrors, bson.D{{Key: "index", Value: int32(i)}, {Key: "code", Value: int32(11000)}, {Key: "errmsg", Value: "E11000 duplicate key error"}})
				continue
			}
			n += res.matched
			modified += res.matched
			if res.matched == 0 && len(res.docs) > len(before) {
				n++
				upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: lookupD(res.docs[len(res.docs)-1], "_id")}})
			}
			s.colls[coll] = res.docs
			if s.onWrite != nil {
				s.onWrite(coll, before, res.docs)
			}
		}
		out := reply(bson.E{Key: "n", Value: int32(n)}, bson.E{Key: "nModified", Value: int32(modified)})
		if len(upserted) > 0 {
			out = append(out, bson.E{Key: "upserted", Value: upserted})
		}
		if len(writeErrors) > 0 {
			out = append(out, bson.E{Key: "writeErrors", Value: writeErrors})
		}
		return out
	case "endSessions", "killCursors":
		return reply()
	}
	return fail("unexpected command " + name)
}

// mingoDeployment is a driver.Deployment of one connection to srv.
type mingoDeployment struct {
	srv     *mingoServer
	updates chan description.Topology
	once    sync.Once
}

var (
	_ driver.Deployment = &mingoDeployment{}
	_ driver.Server     = &mingoDeployment{}
	_ driver.Subscriber = &mingoDeployment{}
)

func (d *mingoDeployment) SelectServer(context.Context, description.ServerSelector) (driver.Server, error) {
	return d, nil
}
func (d *mingoDeployment) GetServerSelectionTimeout() time.Duration { return 0 }
func (d *mingoDeployment) Kind() description.TopologyKind           { return description.TopologyKindSingle }
func (d *mingoDeployment) Connection(context.Context) (*mnet.Connection, error) {
	return mnet.NewConnection(&mingoConn{srv: d.srv}), nil
}
func (d *mingoDeployment) RTTMonitor() driver.RTTMonitor { return zeroRTT{} }
func (d *mingoDeployment) Connect() error                { return nil }
func (d *mingoDeployment) Disconnect(context.Context) error {
	d.once.Do(func() {
		if d.updates != nil {
			close(d.updates)
		}
	})
	return nil
}
func (d *mingoDeployment) Subscribe() (*driver.Subscription, error) {
	if d.updates == nil {
		minutes := int64(30)
		d.updates = make(chan description.Topology, 1)
		d.updates <- description.Topology{SessionTimeoutMinutes: &minutes}
	}
	return &driver.Subscription{Updates: d.updates}, nil
}
func (d *mingoDeployment) Unsubscribe(*driver.Subscription) error { return nil }

type zeroRTT struct{}

func (zeroRTT) EWMA() time.Duration { return 0 }
func (zeroRTT) Min() time.Duration  { return 0 }
func (zeroRTT) Stats() string       { return "" }

// mingoConn decodes each OP_MSG the driver writes, has srv answer it and
// returns the reply on the next Read.
type mingoConn struct {
	srv   *mingoServer
	reply []byte
}

func (c *mingoConn) Write(_ context.Context, wm []byte) error {
	_, reqID, _, op, rem, ok := wiremessage.ReadHeader(wm)
	if !ok || op != wiremessage.OpMsg {
		return fmt.Errorf("mingo server: not an OP_MSG (%v)", op)
	}
	if _, rem, ok = wiremessage.ReadMsgFlags(rem); !ok {
		return fmt.Errorf("mingo server: no flags")
	}
	var body bsoncore.Document
	seqs := map[string][]bson.D{}
	for len(rem) > 4 {
		var st wiremessage.SectionType
		if st, rem, ok = wiremessage.ReadMsgSectionType(rem); !ok {
			return fmt.Errorf("mingo server: bad section")
		}
		switch st {
		case wiremessage.SingleDocument:
			if body, rem, ok = wiremessage.ReadMsgSectionSingleDocument(rem); !ok {
				return fmt.Errorf("mingo server: bad body")
			}
		case wiremessage.DocumentSequence:
			var id string
			var docs []bsoncore.Document
			if id, docs, rem, ok = wiremessage.ReadMsgSectionDocumentSequence(rem); !ok {
				return fmt.Errorf("mingo server: bad document sequence")
			}
			for _, d := range docs {
				seqs[id] = append(seqs[id], docOf(bson.Raw(d)))
			}
		}
	}
	cmd := docOf(bson.Raw(body))
	for _, k := range []string{"updates"} {
		if a, ok := lookupD(cmd, k).(bson.A); ok {
			for _, x := range a {
				seqs[k] = append(seqs[k], x.(bson.D))
			}
		}
	}
	b, err := bson.Marshal(c.srv.answer(cmd, seqs))
	if err != nil {
		return err
	}
	var dst []byte
	var i int32
	i, dst = wiremessage.AppendHeaderStart(dst, wiremessage.NextRequestID(), reqID, wiremessage.OpMsg)
	dst = wiremessage.AppendMsgFlags(dst, 0)
	dst = wiremessage.AppendMsgSectionType(dst, wiremessage.SingleDocument)
	dst = append(dst, b...)
	c.reply = bsoncore.UpdateLength(dst, i, int32(len(dst[i:])))
	return nil
}

func (c *mingoConn) Read(context.Context) ([]byte, error) {
	r := c.reply
	c.reply = nil
	if r == nil {
		return nil, fmt.Errorf("mingo server: no reply pending")
	}
	return r, nil
}

func (c *mingoConn) Close() error                    { return nil }
func (c *mingoConn) Description() description.Server { return drivertest.MockDescription }
func (c *mingoConn) ID() string                      { return "<mingo>" }
func (c *mingoConn) ServerConnectionID() *int64      { n := int64(1); return &n }
func (c *mingoConn) DriverConnectionID() int64       { return 0 }
func (c *mingoConn) Address() address.Address        { return "127.0.0.1:27017" }
func (c *mingoConn) Stale() bool                     { return false }
func (c *mingoConn) OIDCTokenGenID() uint64          { return 0 }
func (c *mingoConn) SetOIDCTokenGenID(uint64)        {}
