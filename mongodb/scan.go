package mongodb

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// ScanSubmissions implements watch.Scanner: every submission in (user,
// problem, timestamp, _id) order, streamed through one cursor so memory
// stays bounded. The find names no index: the planner takes one whose
// prefix is the sort (the covering index, coverIndexName, wins over an
// older {user, problem, timestamp, _id} by reading no document), or,
// with neither, sorts, spilling to disk (allowDiskUse). A hint could
// name an index listIndexes lists but the planner cannot use (still
// building, or hidden), and the find would fail (BadValue). Undecodable
// submissions go to bad; an error from fn stops the scan and is
// returned.
func (d *DB) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	ctx, end, err := causalCtx(d.afterHandoff(ctx), d.submissions, d.written.load())
	if err != nil {
		return fail(d.cfg.Database, needs(d.submissions.Name(), "find"), "scan submissions", err)
	}
	defer end()
	opts := options.Find().SetProjection(submissionProjection).SetSort(scanSort).SetAllowDiskUse(true)
	cur, err := d.submissions.Find(ctx, bson.D{}, opts)
	if err != nil {
		return fail(d.cfg.Database, needs(d.submissions.Name(), "find"), "scan submissions", err)
	}
	var fnErr error
	err = each(ctx, cur, func(raw bson.Raw) error {
		s, err := materialize.DecodeSubmission(raw)
		if err != nil {
			bad(decodeError(materialize.CollSubmission, raw, err))
			return nil
		}
		if err := fn(s); err != nil {
			fnErr = err
			return err
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fail(d.cfg.Database, needs(d.submissions.Name(), "find"), "scan submissions", err)
	}
	return nil
}

// AllProblems implements watch.Scanner: every problem (_id, homeworks);
// undecodable ones in bad.
func (d *DB) AllProblems(ctx context.Context) ([]*materialize.Problem, []*materialize.DecodeError, error) {
	var out []*materialize.Problem
	var bad []*materialize.DecodeError
	err := d.find(d.afterHandoff(ctx), d.problems, bson.D{}, options.Find().SetProjection(problemProjection), func(raw bson.Raw) error {
		p, err := materialize.DecodeProblem(raw)
		if err != nil {
			bad = append(bad, decodeError(materialize.CollProblem, raw, err))
			return nil
		}
		out = append(out, &p)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read all problems: %w", err)
	}
	return out, bad, nil
}

// AllHomeworks implements watch.Scanner: every homework with every entry's
// stored value (only _id, duration, penalty and studentStatus are read);
// undecodable ones in bad.
func (d *DB) AllHomeworks(ctx context.Context) ([]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	var out []*watch.HomeworkDoc
	var bad []*materialize.DecodeError
	err := d.readHomeworks(d.afterHandoff(ctx), nil, nil,
		func(h *watch.HomeworkDoc) { out = append(out, h) },
		func(e *materialize.DecodeError) { bad = append(bad, e) })
	if err != nil {
		return nil, nil, fmt.Errorf("read all homeworks: %w", err)
	}
	return out, bad, nil
}

// AllUsers implements watch.Scanner: every user's stored derived fields;
// users whose _id is not a string in bad.
func (d *DB) AllUsers(ctx context.Context) (map[string]watch.StoredUser, []*materialize.DecodeError, error) {
	out := make(map[string]watch.StoredUser)
	var bad []*materialize.DecodeError
	err := d.find(d.afterHandoff(ctx), d.users, bson.D{}, options.Find().SetProjection(userProjection), func(raw bson.Raw) error {
		name, err := materialize.DecodeUserID(raw)
		if err != nil {
			bad = append(bad, decodeError(materialize.CollUser, raw, err))
			return nil
		}
		st, ok := materialize.DecodeUserStats(raw)
		out[name] = watch.StoredUser{Stats: st, OK: ok}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read all users: %w", err)
	}
	return out, bad, nil
}

// ClusterTime implements watch.Scanner: it runs a find with readConcern
// majority on the primary (one document of the checkpoint collection at
// most) and returns the earlier of the response's operationTime and
// $clusterTime.clusterTime. The operationTime of a majority read is the
// majority commit point; that of a command without read concern (ping)
// is the primary's last applied optime, which can be ahead of it by the
// replication lag, and the scan's majority reads would then see none of
// the writes in between while a stream started there would skip them.
// Every write up to the returned time is majority-committed, so visible
// to a scan started after the call; every later one is re-delivered by a
// change stream started at it (startAtOperationTime, inclusive).
//
// Through a mongos that majority read reaches the one shard owning the
// checkpoint collection, and its operationTime is that shard's commit
// point: a write on a lagging shard before it could be neither seen by
// the scan nor streamed. There ClusterTime is streamClusterTime instead.
//
// On a standalone mongod (Standalone) there is no cluster time: it returns
// the zero Timestamp and no error, so verify and a rebuild that saves no
// stream start can run there.
func (d *DB) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	if d.standalone {
		return bson.Timestamp{}, nil
	}
	if d.sharded {
		ts, err := d.streamClusterTime(ctx)
		if err == nil {
			d.handoff.advance(ts)
		}
		return ts, err
	}
	raw, err := d.db.RunCommand(ctx, clusterTimeCommand(d.state.Name())).Raw()
	if err != nil {
		return bson.Timestamp{}, fail(d.cfg.Database, needs(d.state.Name(), "find"), "cluster time: find "+d.state.Name(), err)
	}
	ts, err := clusterTimeOf(raw)
	if err != nil {
		// Open made sure this is a replica set member: one answers
		// without a cluster time only for a while after it starts (with
		// --keyFile, until its signing keys exist, SERVER-43086).
		return bson.Timestamp{}, watch.WithClass(watch.Transient, fmt.Errorf("cluster time: %w", err))
	}
	d.handoff.advance(ts)
	return ts, nil
}

// afterHandoff returns ctx for a scan's read: causally after the last
// hand-off time ClusterTime returned (watch.WithReadAfter, which
// causalCtx turns into afterClusterTime), unless ctx already reads after
// a later time. Through a mongos a shard's majority read then waits until its
// committed snapshot includes that time, so the scan sees every write of
// every shard at or before the hand-off, whichever shard lags. On a
// replica set ClusterTime is the answering primary's majority commit
// point, which a read on that primary passes at once; after a fail-over
// in between, the new primary's commit point can trail it until the new
// primary commits in its own term (SERVER-53813), and the scan would miss
// writes the stream started at the hand-off time does not deliver.
func (d *DB) afterHandoff(ctx context.Context) context.Context {
	t := d.handoff.load()
	if t.IsZero() {
		return ctx
	}
	if r, ok := watch.ReadAfter(ctx); ok && !r.Before(t) {
		return ctx
	}
	return watch.WithReadAfter(ctx, t)
}

// streamClusterTime opens a change stream on the database with an empty
// first batch (batchSize 0) and returns the cluster time of its
// postBatchResumeToken, which the driver caches as the stream's resume
// token when the first batch is empty (mongo/change_stream.go:396-401,
// updatePbrtFromCommand). Through a mongos that token is the merged
// stream's high-water mark, the earliest of every shard's; for a stream
// opened with no start point and an empty first batch it is the start
// time mongos chose (its cluster time), which a lagging shard may not
// have committed yet. Every later write is delivered by a stream started
// at it; every earlier one is seen by the scans because they read with
// afterClusterTime at it (afterHandoff), so each shard answers only once
// its majority-committed snapshot reaches it. The stream is closed at
// once (killCursors, bounded by closeTimeout).
func (d *DB) streamClusterTime(ctx context.Context) (bson.Timestamp, error) {
	cs, err := d.db.Watch(ctx, bson.A{}, options.ChangeStream().SetBatchSize(0))
	if err != nil {
		return bson.Timestamp{}, fail(d.cfg.Database, streamNeeds, "cluster time: open change stream", err)
	}
	defer func() {
		cctx, cancel := boundClose(context.WithoutCancel(ctx))
		defer cancel()
		_ = cs.Close(cctx)
	}()
	ts, err := tokenTime(cs.ResumeToken())
	if err != nil {
		return bson.Timestamp{}, watch.WithClass(watch.Fatal, fmt.Errorf("cluster time: postBatchResumeToken: %w", err))
	}
	return ts, nil
}

// tokenTime returns the cluster time a resume token encodes. A token is
// {_data: <hex string>}: the server's KeyString encoding of the token's
// fields, clusterTime first (src/mongo/db/pipeline/resume_token.cpp,
// ResumeToken::ResumeToken(const ResumeTokenData&)); a Timestamp is
// encoded as the type byte 130 (0x82, KeyString CType kTimestamp)
// followed by its 64 bits big-endian, seconds then increment.
func tokenTime(token bson.Raw) (bson.Timestamp, error) {
	if len(token) == 0 {
		return bson.Timestamp{}, errors.New("no resume token")
	}
	data, ok := token.Lookup("_data").StringValueOK()
	if !ok {
		return bson.Timestamp{}, fmt.Errorf("resume token %s has no _data string", token)
	}
	b, err := hex.DecodeString(data)
	if err != nil {
		return bson.Timestamp{}, fmt.Errorf("resume token _data %q: %w", data, err)
	}
	if len(b) < 9 || b[0] != 0x82 {
		return bson.Timestamp{}, fmt.Errorf("resume token _data %q does not start with a timestamp", data)
	}
	ts := bson.Timestamp{T: binary.BigEndian.Uint32(b[1:5]), I: binary.BigEndian.Uint32(b[5:9])}
	if ts.IsZero() {
		return bson.Timestamp{}, fmt.Errorf("resume token _data %q holds a zero timestamp", data)
	}
	return ts, nil
}

// clusterTimeCommand is the majority read whose operationTime
// ClusterTime returns. RunCommand sends it as written (no database read
// concern is added, mongo/database.go processRunCommand), so the read
// concern is in the command; the server answers a majority read with the
// committed snapshot's optime (jstests/replsets/operation_time_read_and_write_concern.js:
// "Majority reads and writes return the last committed optime's
// timestamp and local reads and writes return the last applied optime's
// timestamp").
func clusterTimeCommand(coll string) bson.D {
	return bson.D{
		{Key: "find", Value: coll},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: stateID}}},
		{Key: "projection", Value: bson.D{{Key: "_id", Value: 1}}},
		{Key: "limit", Value: int64(1)},
		{Key: "singleBatch", Value: true},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}}},
	}
}

// clusterTimeOf reads the cluster time of a command response: the earlier
// of operationTime and $clusterTime.clusterTime, whichever are present.
func clusterTimeOf(resp bson.Raw) (bson.Timestamp, error) {
	var out bson.Timestamp
	found := false
	for _, path := range [][]string{{"operationTime"}, {"$clusterTime", "clusterTime"}} {
		v, err := resp.LookupErr(path...)
		if err != nil {
			continue
		}
		t, i, ok := v.TimestampOK()
		if !ok {
			continue
		}
		ts := bson.Timestamp{T: t, I: i}
		if !found || ts.Before(out) {
			out, found = ts, true
		}
	}
	if !found || out.IsZero() {
		return bson.Timestamp{}, errors.New("response holds neither operationTime nor $clusterTime (a member just started, or not a replica set)")
	}
	return out, nil
}

// indexes are the indexes EnsureIndexes creates (see there for why).
var indexes = []IndexBuild{
	{Collection: materialize.CollSubmission, Keys: coverKeys, Name: coverIndexName, scanned: true, stringKeys: true},
	{Collection: materialize.CollSubmission, Keys: bson.D{{Key: "problem", Value: 1}, {Key: "user", Value: 1}}, Name: "problem_1_user_1", stringKeys: true},
	{Collection: materialize.CollProblem, Keys: bson.D{{Key: "homeworks", Value: 1}}, Name: "homeworks_1"},
	pendingIndex,
}

// IndexBuild names one index EnsureIndexes builds: its collection, key
// document and name. Waiting is zero when the build is announced, and
// how long the createIndexes has been waiting in the reports that follow
// every IndexWaitReport while it has not returned.
type IndexBuild struct {
	Collection string
	Keys       bson.D
	Name       string
	Partial    bson.D // partialFilterExpression, nil for none
	Waiting    time.Duration

	// scanned: the rebuild's scan reads the whole collection in the
	// index's order, which a sparse index cannot give (it misses
	// documents). stringKeys: a key holds strings (user), whose bounds and
	// order a collation other than simple changes. hinted: the query
	// names the index (hint), so only an index of that name serves it.
	scanned, stringKeys, hinted bool
}

// IndexWaitReport is how often EnsureIndexes reports a build that has not
// finished. With commitQuorum "majority", a build that waits this long is
// building a large collection, or waits for a majority of the
// data-bearing voting members to finish it (a member down or far behind).
const IndexWaitReport = time.Minute

// indexAdmin is what EnsureIndexes needs from the server: listIndexes and
// createIndexes on one collection of the database.
type indexAdmin interface {
	database() string
	list(ctx context.Context, coll string) ([]bson.Raw, error)
	create(ctx context.Context, coll string, model mongo.IndexModel) error
}

// driverIndexes is indexAdmin on a database through the driver.
// standalone: no commitQuorum (a standalone refuses the field,
// SERVER-39532).
type driverIndexes struct {
	db         *mongo.Database
	standalone bool
}

func (a driverIndexes) database() string { return a.db.Name() }

// list returns the index documents listIndexes answers, whole:
// IndexView.ListSpecifications keeps neither hidden, partialFilterExpression
// nor collation (mongo/results.go:173-211), which decide whether the
// planner can use an index (usableIndex).
func (a driverIndexes) list(ctx context.Context, coll string) ([]bson.Raw, error) {
	cur, err := a.db.Collection(coll).Indexes().List(ctx)
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == codeNamespaceNotFound {
		return nil, nil // no collection yet: no index
	}
	if err != nil {
		return nil, err
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// create sends one createIndexes with commitQuorum "majority"
// (options.CreateIndexes().SetCommitQuorumMajority,
// mongo/options/indexoptions.go:96; the driver adds the field for wire
// version 9, MongoDB 4.4, and up, mongo/op_create_indexes.go:79-84). The
// server's default, "votingMembers", waits for every data-bearing voting
// member: with one of them down the build, and so start-up, would wait
// until it returns (SERVER-65670). With "majority" the primary commits
// the build once a majority has built it; a member that was down builds
// it when it catches up.
func (a driverIndexes) create(ctx context.Context, coll string, model mongo.IndexModel) error {
	opts := options.CreateIndexes()
	if !a.standalone {
		opts.SetCommitQuorumMajority()
	}
	_, err := a.db.Collection(coll).Indexes().CreateOne(ctx, model, opts)
	return err
}

// EnsureIndexes creates the indexes the adapter's queries rely on, if
// missing:
//
//   - submission {user: 1, problem: 1, timestamp: 1, _id: 1, status: 1,
//     score: 1, languageType: 1} (coverKeys, coverIndexName): its prefix
//     is the order of ScanSubmissions, so a rebuild streams every
//     submission grouped by (user, problem) without a blocking sort, and
//     serves Submissions' filters on user and on (user, problem); with the
//     other keys it covers the reads of a landing (see coverKeys). A
//     deployment's earlier {user, problem, timestamp, _id} index is left
//     as it is (its prefix is this one's: drop it to save its writes);
//   - submission {problem: 1, user: 1}: finds the submissions and users of
//     one problem (recomputing a problem's pairs, operator queries)
//     without a collection scan;
//   - problem {homeworks: 1} (multikey): ProblemsListing's lookup of the
//     problems listing a homework.
//   - submission {languageType: 1, lastSend: 1} where status is -1
//     (pendingIndex): PendingSubmissions' query, which hints it.
//
// It first lists each collection's indexes (listIndexes, under ctx): an
// index with the same keys, under any name, is present, unless the
// planner cannot use it for these queries (unusableIndex: hidden,
// partial, sparse or collated where that matters), which nothing would
// show but slow landings and rebuilds; if the server will not build ours
// beside it, EnsureIndexes fails naming it. Each missing one
// is announced to building (nil: not announced) and then built with ONE
// createIndexes whose context has no deadline: the driver turns a
// context deadline into the command's maxTimeMS
// (x/mongo/driver/operation.go:746-765, internal/driverutil/operation.go:44-68)
// and a createIndexes interrupted by maxTimeMS aborts its build
// (SERVER-46595), so a deadline would make a large build fail at every
// start. Cancelling ctx (a signal) still stops the wait: the server keeps
// building, since a client disconnect does not kill createIndexes
// (SERVER-101507), and the next start finds it listed (listIndexes
// lists builds in progress) and goes on; queries use it once built. A
// client-wide timeoutMS in the URI would impose a deadline again: do not
// set one, or pre-build the indexes (docs/install.md#indexes).
//
// The builds do not block Back-End's writes (MongoDB 4.2+ builds hold
// exclusive locks only at start and end) but take time on a large
// submission collection.
func (d *DB) EnsureIndexes(ctx context.Context, building func(IndexBuild)) error {
	return ensureIndexes(ctx, driverIndexes{db: d.db, standalone: d.standalone}, building, IndexWaitReport)
}

func ensureIndexes(ctx context.Context, admin indexAdmin, building func(IndexBuild), report time.Duration) error {
	var missing []IndexBuild
	listed := make(map[string][]bson.Raw)
	for _, ix := range indexes {
		specs, ok := listed[ix.Collection]
		if !ok {
			var err error
			if specs, err = admin.list(ctx, ix.Collection); err != nil {
				return fail(admin.database(), needs(ix.Collection, "listIndexes"), "list indexes of "+ix.Collection, err)
			}
			listed[ix.Collection] = specs
		}
		if _, ok := usableMatch(specs, ix); !ok {
			missing = append(missing, ix)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	bctx, cancel := withoutDeadline(ctx)
	defer cancel()
	for _, ix := range missing {
		if building != nil {
			building(ix)
		}
		opts := options.Index().SetName(ix.Name)
		if ix.Partial != nil {
			opts.SetPartialFilterExpression(ix.Partial)
		}
		model := mongo.IndexModel{Keys: ix.Keys, Options: opts}
		stop := reportWaiting(ix, building, report)
		err := admin.create(bctx, ix.Collection, model)
		stop()
		unusable, _ := usableMatch(listed[ix.Collection], ix)
		var ce mongo.CommandError
		_ = errors.As(err, &ce)
		switch {
		case err == nil && len(unusable) == 0:
			continue
		case err == nil, ce.Code == codeIndexOptionsConflict, ce.Code == codeIndexKeySpecsConflict && len(unusable) > 0:
		default:
			return fail(admin.database(), needs(ix.Collection, "createIndex"), fmt.Sprintf("create index %s on %s", ix.Name, ix.Collection), err)
		}
		// A conflict: an index with these keys created meanwhile (the
		// queries use it all the same), or one the server counts as
		// equivalent to ours although the planner cannot use it. Or a
		// success next to an unusable one, which the server may answer
		// as "already exists". The listing tells.
		specs, lerr := admin.list(ctx, ix.Collection)
		if lerr != nil {
			return fail(admin.database(), needs(ix.Collection, "listIndexes"), "list indexes of "+ix.Collection, lerr)
		}
		if unusable, ok := usableMatch(specs, ix); !ok {
			return watch.WithClass(watch.Fatal, fmt.Errorf(
				"create index %s on %s: %s, with its keys, cannot serve the daemon's queries and the server builds no second one (%v); unhide it (a hidden one) or drop it, and start again",
				ix.Name, ix.Collection, strings.Join(unusable, ", "), err))
		}
	}
	return nil
}

// usableMatch reports whether specs (listIndexes documents) hold an index
// with ix's keys that the planner can use for ix's queries, and names,
// with the reason, each index with those keys it cannot use.
func usableMatch(specs []bson.Raw, ix IndexBuild) (unusable []string, ok bool) {
	for _, s := range specs {
		k, _ := s.Lookup("key").DocumentOK()
		if !sameKeys(k, ix.Keys) {
			continue
		}
		why := unusableIndex(s, ix)
		if why == "" {
			ok = true
			continue
		}
		name, _ := s.Lookup("name").StringValueOK()
		unusable = append(unusable, fmt.Sprintf("index %q (%s)", name, why))
	}
	return unusable, ok
}

// unusableIndex says why the planner cannot use the index spec (a
// listIndexes document) for ix's queries, "" when it can:
//   - hidden: the planner ignores a hidden index;
//   - partialFilterExpression: used only for a query whose filter implies
//     the expression, which the scan's empty filter and the landings'
//     user and problem filters do not; a build with a filter of its own
//     (ix.Partial, the pending check's) is served only by an index with
//     that filter (a full one would hold every submission);
//   - another name, for ix.hinted: the query's hint names ix.Name;
//   - sparse, for ix.scanned: not used where it would miss documents, as
//     for the scan's sort over every submission (a filter on a key
//     implies the key exists, so the other queries can use one);
//   - a collation other than "simple", for ix.stringKeys: string keys
//     (user) compare by the collation, and a query under the simple
//     collation cannot use their bounds or order.
func unusableIndex(spec bson.Raw, ix IndexBuild) string {
	var why []string
	if b, ok := spec.Lookup("hidden").BooleanOK(); ok && b {
		why = append(why, "hidden")
	}
	pf, partial := spec.Lookup("partialFilterExpression").DocumentOK()
	switch {
	case ix.Partial == nil && partial:
		why = append(why, "partial")
	case ix.Partial != nil && !partial:
		why = append(why, "not partial")
	case ix.Partial != nil && !sameKeys(pf, ix.Partial):
		why = append(why, "another partial filter")
	}
	if name, _ := spec.Lookup("name").StringValueOK(); ix.hinted && name != ix.Name {
		why = append(why, "not named "+strconv.Quote(ix.Name)+", which the query hints")
	}
	if ix.scanned && optionSet(spec.Lookup("sparse")) {
		why = append(why, "sparse")
	}
	if c, ok := spec.Lookup("collation").DocumentOK(); ok && ix.stringKeys {
		if loc, _ := c.Lookup("locale").StringValueOK(); loc != "simple" {
			why = append(why, "collation "+strconv.Quote(loc))
		}
	}
	return strings.Join(why, ", ")
}

// optionSet reports whether an index option is set: true, or a non-zero
// number (the shell accepts sparse: 1).
func optionSet(v bson.RawValue) bool {
	if b, ok := v.BooleanOK(); ok {
		return b
	}
	if f, ok := v.AsFloat64OK(); ok {
		return f != 0
	}
	return false
}

// reportWaiting calls building with ix and the time waited every report
// until stop is called (nothing when building is nil).
func reportWaiting(ix IndexBuild, building func(IndexBuild), report time.Duration) (stop func()) {
	if building == nil || report <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(exited)
		t := time.NewTicker(report)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				w := ix
				w.Waiting = now.Sub(start)
				building(w)
			}
		}
	}()
	return func() { close(done); <-exited }
}

// withoutDeadline returns a context carrying ctx's values, with no
// deadline, cancelled when ctx is cancelled before its own deadline (a
// signal) but not when that deadline passes.
func withoutDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return out, func() { stop(); cancel() }
}

// sameKeys reports whether an index's key document (as listIndexes
// returns it) has the fields of want in the same order with the same
// directions; numbers compare by value (the shell writes 1 as a double).
func sameKeys(got bson.Raw, want bson.D) bool {
	elems, err := got.Elements()
	if err != nil || len(elems) != len(want) {
		return false
	}
	for i, e := range elems {
		if e.Key() != want[i].Key {
			return false
		}
		g, gok := e.Value().AsFloat64OK()
		w, wok := toFloat(want[i].Value)
		if !gok || !wok || g != w {
			return false
		}
	}
	return true
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
