package mongodb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// cursorReply is a one-batch cursor reply of namespace ns holding docs.
func cursorReply(ns string, docs ...bson.D) bson.D {
	batch := bson.A{}
	for _, d := range docs {
		batch = append(batch, d)
	}
	return bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: ns}, {Key: "firstBatch", Value: batch}}}}
}

// fullReads names every part of a Read.
func fullReads() *watch.Reads {
	return &watch.Reads{
		Pairs:         []materialize.Pair{{User: "alice", Problem: 1}, {User: "bob", Problem: 2}},
		Users:         []string{"alice", "bob", "$odd.name"},
		Problems:      []int64{1, 2},
		Homeworks:     []bson.ObjectID{{0x65, 1}, {0x65, 2}},
		HomeworkUsers: []string{"alice", "bob", "$odd.name"},
	}
}

// separateStages returns, for each command ReadSeparately sends for r
// (over empty collections), its collection and the stages it runs: a
// find's filter and projection as {$match}, {$project}, an aggregate's
// pipeline as sent.
func separateStages(t *testing.T, r *watch.Reads) (colls []string, stages []bson.A) {
	t.Helper()
	d, md, sent := mockDB(t)
	for range 5 {
		md.AddResponses(cursorReply("normal-oj.x"))
	}
	if _, err := watch.ReadSeparately(context.Background(), d, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range sent() {
		var cmd bson.D
		if err := bson.Unmarshal(c, &cmd); err != nil {
			t.Fatal(err)
		}
		switch cmd[0].Key {
		case "find":
			colls = append(colls, cmd[0].Value.(string))
			st := bson.A{bson.D{{Key: "$match", Value: lookupD(cmd, "filter")}}}
			if p := lookupD(cmd, "projection"); p != missing {
				st = append(st, bson.D{{Key: "$project", Value: p}})
			}
			stages = append(stages, st)
		case "aggregate":
			colls = append(colls, cmd[0].Value.(string))
			stages = append(stages, lookupD(cmd, "pipeline").(bson.A))
		default:
			t.Fatalf("ReadSeparately sent %s", c)
		}
	}
	return colls, stages
}

// unionParts splits the pipeline of a combined Read into its parts: the
// base collection's stages and each $unionWith's, each without the
// wrapping $replaceWith, whose tag is returned.
func unionParts(t *testing.T, base string, pipeline bson.A) (colls []string, stages []bson.A, tags []string) {
	t.Helper()
	split := func(coll string, p bson.A) {
		if len(p) == 0 {
			t.Fatalf("empty part pipeline of %s", coll)
		}
		last := p[len(p)-1].(bson.D)
		if last[0].Key != "$replaceWith" {
			t.Fatalf("part of %s ends with %v, want {$replaceWith: {p, d: $$ROOT}}", coll, last)
		}
		w := last[0].Value.(bson.D)
		tag, ok := lookupD(w, "p").(string)
		if len(w) != 2 || !ok || lookupD(w, "d") != "$$ROOT" {
			t.Fatalf("part of %s wrapped as %v, want {p: <tag>, d: \"$$ROOT\"}", coll, w)
		}
		colls, stages, tags = append(colls, coll), append(stages, p[:len(p)-1]), append(tags, tag)
	}
	i := 0
	for i < len(pipeline) && pipeline[i].(bson.D)[0].Key != "$unionWith" {
		i++
	}
	split(base, pipeline[:i])
	for _, st := range pipeline[i:] {
		s := st.(bson.D)
		if s[0].Key != "$unionWith" {
			t.Fatalf("stage %v after the first $unionWith", s)
		}
		u := s[0].Value.(bson.D)
		coll, _ := lookupD(u, "coll").(string)
		p, _ := lookupD(u, "pipeline").(bson.A)
		split(coll, p)
	}
	return colls, stages, tags
}

// TestReadOneAggregate: Read sends one aggregate, majority and causally
// after the batch's event like every read, with a batch size that brings
// a landing's result in its first reply; its parts are the stages the
// separate methods send, on their collections, each wrapped with a tag
// of its own.
func TestReadOneAggregate(t *testing.T) {
	r := fullReads()
	wantColls, wantStages := separateStages(t, r)

	d, md, sent := mockDB(t)
	md.AddResponses(cursorReply("normal-oj.submission"))
	ev := bson.Timestamp{T: 1_800_000_000, I: 7}
	if _, err := d.Read(watch.WithReadAfter(context.Background(), ev), r); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("Read sent %d commands, want 1 aggregate", len(cmds))
	}
	var cmd bson.D
	if err := bson.Unmarshal(cmds[0], &cmd); err != nil {
		t.Fatal(err)
	}
	base, ok := cmd[0].Value.(string)
	if cmd[0].Key != "aggregate" || !ok {
		t.Fatalf("Read sent %s, want an aggregate of a collection", cmds[0])
	}
	if lvl, _ := cmds[0].Lookup("readConcern", "level").StringValueOK(); lvl != "majority" {
		t.Errorf("readConcern %s, want level majority", cmds[0].Lookup("readConcern"))
	}
	if tt, ti, _ := cmds[0].Lookup("readConcern", "afterClusterTime").TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != ev {
		t.Errorf("afterClusterTime %v, want the event's %v", cmds[0].Lookup("readConcern", "afterClusterTime"), ev)
	}
	// The default first batch is 101 documents; a landing's result must
	// come whole in the first reply, however many documents it has, up to
	// the 16 MiB a reply holds.
	if bs, ok := cmds[0].Lookup("cursor", "batchSize").Int32OK(); !ok || bs < 1<<20 {
		t.Errorf("cursor %s: want a batchSize no document count reaches before 16 MiB", cmds[0].Lookup("cursor"))
	}
	colls, stages, tags := unionParts(t, base, lookupD(cmd, "pipeline").(bson.A))
	if len(colls) != len(wantColls) {
		t.Fatalf("Read has %d parts %v, ReadSeparately sends %d commands %v", len(colls), colls, len(wantColls), wantColls)
	}
	seen := map[string]bool{}
	for i := range colls {
		if colls[i] != wantColls[i] || extJSON(t, stages[i]) != extJSON(t, wantStages[i]) {
			t.Errorf("part %d: %s %s, want %s %s (as the separate method sends it)", i, colls[i], extJSON(t, stages[i]), wantColls[i], extJSON(t, wantStages[i]))
		}
		if seen[tags[i]] {
			t.Errorf("part %d: tag %q used twice", i, tags[i])
		}
		seen[tags[i]] = true
	}

	// Outside a batch and before any write: no afterClusterTime.
	md.AddResponses(cursorReply("normal-oj.submission"))
	if _, err := d.Read(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	cmds = sent()
	if len(cmds) != 1 {
		t.Fatalf("Read outside a batch sent %d commands, want 1", len(cmds))
	}
	if _, err := cmds[0].LookupErr("readConcern", "afterClusterTime"); err == nil {
		t.Errorf("afterClusterTime %v outside a batch", cmds[0].Lookup("readConcern"))
	}
}

// wrapped is docs as the combined Read's reply holds them: {p: tag, d}.
func wrapped(tag string, docs ...bson.D) []bson.D {
	out := make([]bson.D, len(docs))
	for i, d := range docs {
		out[i] = bson.D{{Key: "p", Value: tag}, {Key: "d", Value: d}}
	}
	return out
}

// readReplies are, per part, documents as the server returns them to
// the part's query (projected; UserStats' pipeline results), with the
// unusual ones each part's decoder must treat as the separate method
// does, and the reply to UserStats' read by _id of the submissions its
// pipeline left to the Go decoder.
type readReplies struct {
	subs, stats, users, problems, homeworks []bson.D
	others                                  []bson.D // nil: UserStats reads none by _id
}

func testReplies() readReplies {
	oid := func(n byte) bson.ObjectID { return bson.ObjectID{0x65, 0xe1, n} }
	hw := func(n byte) bson.ObjectID { return bson.ObjectID{0x65, n} }
	ts := bson.DateTime(1_770_000_000_000)
	entry := bson.D{{Key: "score", Value: int32(100)}, {Key: "problemStatus", Value: int32(0)},
		{Key: "submissionIds", Value: bson.A{oid(1).Hex()}}, {Key: "rawScore", Value: int32(100)}}
	return readReplies{
		subs: []bson.D{
			{{Key: "_id", Value: oid(1)}, {Key: "user", Value: "alice"}, {Key: "problem", Value: int32(1)}, {Key: "languageType", Value: int32(0)},
				{Key: "timestamp", Value: ts}, {Key: "status", Value: int32(0)}, {Key: "score", Value: int32(100)}},
			{{Key: "_id", Value: oid(2)}, {Key: "user", Value: "alice"}, {Key: "problem", Value: int32(1)}, {Key: "timestamp", Value: "yesterday"}},
			{{Key: "_id", Value: "s3"}, {Key: "user", Value: "bob"}, {Key: "problem", Value: int64(2)}, {Key: "timestamp", Value: ts}},
			{{Key: "_id", Value: oid(1)}, {Key: "user", Value: "alice"}, {Key: "problem", Value: int32(1)}, {Key: "timestamp", Value: ts}}, // again: once
			{{Key: "_id", Value: oid(4)}, {Key: "user", Value: bson.A{"bob"}}, {Key: "problem", Value: int32(2)}, {Key: "timestamp", Value: ts}},
		},
		stats: []bson.D{
			{{Key: "_id", Value: "alice"}, {Key: "n", Value: int32(3)}, {Key: "ac", Value: int32(1)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{int64(1)}}},
			{{Key: "_id", Value: "bob"}, {Key: "n", Value: int32(1)}, {Key: "ac", Value: int32(0)}, {Key: "other", Value: bson.A{bson.A{oid(5)}}},
				{Key: "first", Value: bson.A{bson.D{{Key: "p", Value: int32(3)}, {Key: "f", Value: bson.D{{Key: "t", Value: ts}, {Key: "i", Value: oid(6)}}}}}}},
			// a symbol, array or missing user groups under null: only its
			// other counts (a string _id the decoder rejects)
			{{Key: "_id", Value: nil}, {Key: "n", Value: int32(0)}, {Key: "ac", Value: int32(0)}, {Key: "other", Value: bson.A{bson.A{oid(7), "s8"}}}},
			{{Key: "_id", Value: "$odd.name"}, {Key: "n", Value: int64(2)}, {Key: "ac", Value: int32(2)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{int32(4), int32(2)}}},
			{{Key: "_id", Value: "not-named"}, {Key: "n", Value: int32(9)}, {Key: "ac", Value: int32(9)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: bson.A{}}},
		},
		others: []bson.D{
			{{Key: "_id", Value: oid(5)}, {Key: "user", Value: "bob"}, {Key: "problem", Value: int32(2)}, {Key: "timestamp", Value: ts},
				{Key: "status", Value: int32(0)}, {Key: "score", Value: float64(100)}},
			{{Key: "_id", Value: oid(7)}, {Key: "user", Value: bson.Symbol("bob")}, {Key: "problem", Value: int32(2)}, {Key: "timestamp", Value: ts}},
		},
		users: []bson.D{
			{{Key: "_id", Value: "alice"}, {Key: "submission", Value: int32(3)}, {Key: "AC_submission", Value: int32(1)}, {Key: "AC_problem_ids", Value: bson.A{int32(1)}}},
			{{Key: "_id", Value: "bob"}, {Key: "submission", Value: "many"}},
			{{Key: "_id", Value: int32(5)}, {Key: "submission", Value: int32(1)}},
			{{Key: "_id", Value: "$odd.name"}},
		},
		problems: []bson.D{
			{{Key: "_id", Value: int32(1)}, {Key: "homeworks", Value: bson.A{hw(1)}}},
			{{Key: "_id", Value: int64(2)}, {Key: "homeworks", Value: "not an array"}},
		},
		homeworks: []bson.D{
			{{Key: "_id", Value: hw(1)}, {Key: "duration", Value: bson.D{{Key: "start", Value: ts}, {Key: "end", Value: ts + 1000}}},
				{Key: "penalty", Value: "score = score * 0.5"},
				{Key: "studentStatus", Value: bson.D{{Key: "alice", Value: bson.D{{Key: "1", Value: entry}}}, {Key: "$odd.name", Value: "not a document"}}}},
			{{Key: "_id", Value: hw(2)}, {Key: "studentStatus", Value: int32(5)}},
		},
	}
}

// separateReplies are the replies ReadSeparately reads, in the order of
// its commands.
func (x readReplies) separate() []bson.D {
	out := []bson.D{cursorReply("normal-oj.submission", x.subs...), cursorReply("normal-oj.submission", x.stats...)}
	if x.others != nil {
		out = append(out, cursorReply("normal-oj.submission", x.others...))
	}
	return append(out, cursorReply("normal-oj.user", x.users...), cursorReply("normal-oj.problem", x.problems...),
		cursorReply("normal-oj.homework", x.homeworks...))
}

// combinedDocs are the documents of a combined Read's aggregate.
func (x readReplies) combinedDocs() bson.A {
	var out bson.A
	for _, p := range []struct {
		tag  string
		docs []bson.D
	}{{partSubmissions, x.subs}, {partStats, x.stats}, {partUsers, x.users}, {partProblems, x.problems}, {partHomeworks, x.homeworks}} {
		for _, d := range wrapped(p.tag, p.docs...) {
			out = append(out, d)
		}
	}
	return out
}

// combined are the replies of a combined Read: one aggregate, then the
// read by _id.
func (x readReplies) combined() []bson.D {
	out := []bson.D{{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: "normal-oj.submission"}, {Key: "firstBatch", Value: x.combinedDocs()}}}}}
	if x.others != nil {
		out = append(out, cursorReply("normal-oj.submission", x.others...))
	}
	return out
}

// TestReadDecodesAsSeparately: the combined reply decodes, part by part,
// to exactly what ReadSeparately decodes from the same documents:
// undecodable documents in each part reported the same, UserStats'
// submissions left to the Go decoder (a symbol user, a string _id) read
// by _id and counted or reported the same.
func TestReadDecodesAsSeparately(t *testing.T) {
	x := testReplies()
	ctx := context.Background()
	d, md, _ := mockDB(t)
	md.AddResponses(x.separate()...)
	want, err := watch.ReadSeparately(ctx, d, fullReads())
	if err != nil {
		t.Fatal(err)
	}
	if len(want.SubmissionsBad) == 0 || len(want.StatsBad) == 0 || len(want.ProblemsBad) == 0 || len(want.HomeworksBad) == 0 {
		t.Fatalf("the fixture has no undecodable document in some part: %+v", want)
	}
	d, md, sent := mockDB(t)
	md.AddResponses(x.combined()...)
	got, err := d.Read(ctx, fullReads())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sent()); n != 2 {
		t.Errorf("Read sent %d commands, want 2 (the aggregate, UserStats' read by _id)", n)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read =\n%s\nReadSeparately =\n%s", dump(got), dump(want))
	}
}

func dump(r *watch.ReadResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "subs %v bad %v\n", r.Submissions, r.SubmissionsBad)
	fmt.Fprintf(&b, "stats %v bad %v\nusers %v\n", r.Stats, r.StatsBad, r.Users)
	for id, p := range r.Problems {
		fmt.Fprintf(&b, "problem %d %+v\n", id, *p)
	}
	fmt.Fprintf(&b, "problems bad %v\n", r.ProblemsBad)
	for id, h := range r.Homeworks {
		fmt.Fprintf(&b, "homework %s %+v\n", id.Hex(), *h)
	}
	fmt.Fprintf(&b, "homeworks bad %v\n", r.HomeworksBad)
	return b.String()
}

// TestReadSendsOnlyNamedParts: an empty part is not read; no part, no
// command; one part, no $unionWith.
func TestReadSendsOnlyNamedParts(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		r     watch.Reads
		base  string
		colls []string
	}{
		{"nothing", watch.Reads{HomeworkUsers: []string{"alice"}}, "", nil},
		{"users", watch.Reads{Users: []string{"alice"}}, "submission", []string{"submission", "user"}},
		{"problems", watch.Reads{Problems: []int64{3}}, "problem", []string{"problem"}},
		{"homeworks", watch.Reads{Homeworks: []bson.ObjectID{{1}}, HomeworkUsers: []string{"a"}}, "homework", []string{"homework"}},
		{"pairs and problems", watch.Reads{Pairs: []materialize.Pair{{User: "a", Problem: 1}}, Problems: []int64{1}}, "submission", []string{"submission", "problem"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, sent := mockDB(t)
			md.AddResponses(cursorReply("normal-oj." + c.base))
			got, err := d.Read(ctx, &c.r)
			if err != nil {
				t.Fatal(err)
			}
			cmds := sent()
			if c.base == "" {
				if len(cmds) != 0 || !reflect.DeepEqual(got, &watch.ReadResult{}) {
					t.Errorf("Read of nothing sent %d commands, returned %+v", len(cmds), got)
				}
				return
			}
			if len(cmds) != 1 {
				t.Fatalf("%d commands, want 1", len(cmds))
			}
			var cmd bson.D
			if err := bson.Unmarshal(cmds[0], &cmd); err != nil {
				t.Fatal(err)
			}
			if cmd[0].Key != "aggregate" || cmd[0].Value != c.base {
				t.Fatalf("sent %s, want an aggregate of %s", cmds[0], c.base)
			}
			colls, _, _ := unionParts(t, c.base, lookupD(cmd, "pipeline").(bson.A))
			if !slices.Equal(colls, c.colls) {
				t.Errorf("parts read %v, want %v", colls, c.colls)
			}
			want, _ := watch.ReadSeparately(ctx, emptySource{}, &c.r)
			if (got.Stats == nil) != (want.Stats == nil) || (got.Users == nil) != (want.Users == nil) ||
				(got.Problems == nil) != (want.Problems == nil) || (got.Homeworks == nil) != (want.Homeworks == nil) {
				t.Errorf("parts returned %+v, want those ReadSeparately returns %+v", got, want)
			}
		})
	}
}

// emptySource answers every part with empty, non-nil results.
type emptySource struct{}

func (emptySource) Submissions(context.Context, []string, []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	return nil, nil, nil
}
func (emptySource) UserStats(context.Context, []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	return map[string]materialize.UserStats{}, nil, nil
}
func (emptySource) Users(context.Context, []string) (map[string]watch.StoredUser, error) {
	return map[string]watch.StoredUser{}, nil
}
func (emptySource) Problems(context.Context, []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	return map[int64]*materialize.Problem{}, nil, nil
}
func (emptySource) Homeworks(context.Context, []bson.ObjectID, []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	return map[bson.ObjectID]*watch.HomeworkDoc{}, nil, nil
}

// TestReadOverQueryTermsSeparately: a part over queryTerms terms needs
// several queries; Read then sends ReadSeparately's commands.
func TestReadOverQueryTermsSeparately(t *testing.T) {
	pairs := make([]materialize.Pair, queryTerms+1)
	for i := range pairs {
		pairs[i] = materialize.Pair{User: fmt.Sprintf("u%d", i), Problem: 1}
	}
	users := make([]string, queryTerms+1)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
	}
	for _, r := range []*watch.Reads{{Pairs: pairs, Problems: []int64{1}}, {Users: users}, {Problems: make([]int64, queryTerms+1)},
		{Homeworks: make([]bson.ObjectID, queryTerms+1)}} {
		_, wantStages := separateStages(t, r)
		d, md, sent := mockDB(t)
		for range 8 {
			md.AddResponses(cursorReply("normal-oj.x"))
		}
		if _, err := d.Read(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if n := len(sent()); n != len(wantStages) || n < 2 {
			t.Errorf("Read of a part over %d terms sent %d commands, want ReadSeparately's %d", queryTerms, n, len(wantStages))
		}
	}
}

// TestReadTooLargeSeparately: a result the server refuses as too large
// (BSONObjectTooLarge) is read again separately (the wrapper never takes
// a document over the server's limit, 16 MiB + 16 KiB; see Read).
func TestReadTooLargeSeparately(t *testing.T) {
	x := testReplies()
	ctx := context.Background()
	d, md, _ := mockDB(t)
	md.AddResponses(x.separate()...)
	want, err := watch.ReadSeparately(ctx, d, fullReads())
	if err != nil {
		t.Fatal(err)
	}
	d, md, sent := mockDB(t)
	md.AddResponses(commandError(10334, "BSONObjectTooLarge", "BSONObj size: 16793610 (0x1000A0A) is invalid. Size must be between 0 and 16793600(16MB)"))
	md.AddResponses(x.separate()...)
	got, err := d.Read(ctx, fullReads())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sent()); n != 1+len(x.separate()) {
		t.Errorf("%d commands, want the aggregate and ReadSeparately's %d", n, len(x.separate()))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read =\n%s\nReadSeparately =\n%s", dump(got), dump(want))
	}
}

// TestReadErrorClasses: a failed combined Read has the class ReadSeparately's
// first read has for the same reply; Unauthorized names find on every
// collection the aggregate reads.
func TestReadErrorClasses(t *testing.T) {
	ctx := watch.WithReadAfter(context.Background(), bson.Timestamp{T: 1_800_000_000, I: 1})
	replies := []bson.D{
		unauthorized("aggregate"),
		commandError(18, "AuthenticationFailed", "auth failed"),
		commandError(91, "ShutdownInProgress", "shutting down"),
		commandError(189, "PrimarySteppedDown", "stepped down"),
		commandError(134, "ReadConcernMajorityNotAvailableYet", "not yet"),
		commandError(148, "ReadConcernMajorityNotEnabled", "off"),
		commandError(462, "IngressRequestRateLimitExceeded", "rate limited", "SystemOverloadedError", "RetryableError"),
		commandError(237, "CursorKilled", "killed"),
		commandError(2, "BadValue", "unknown"),
		commandError(40324, "Location40324", "Unrecognized pipeline stage name: '$unionWith'"),
	}
	for _, reply := range replies {
		name := lookupD(reply, "codeName").(string)
		t.Run(name, func(t *testing.T) {
			class := func(read func(*DB) error) (watch.Class, error) {
				d, md, _ := mockDB(t)
				for range 6 { // the driver retries some once or more
					md.AddResponses(reply)
				}
				err := read(d)
				return watch.ClassOf(err), err
			}
			want, werr := class(func(d *DB) error { _, err := watch.ReadSeparately(ctx, d, fullReads()); return err })
			got, err := class(func(d *DB) error { _, err := d.Read(ctx, fullReads()); return err })
			if werr == nil || err == nil {
				t.Fatalf("Read: %v; ReadSeparately: %v; want both to fail", err, werr)
			}
			if got != want {
				t.Errorf("Read: class %s (%v); ReadSeparately: %s (%v)", got, err, want, werr)
			}
			if got == watch.Unauthorized && name == "Unauthorized" {
				for _, w := range []string{`"find"`, "normal-oj.submission", "normal-oj.user", "normal-oj.problem", "normal-oj.homework"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%v: does not name %s", err, w)
					}
				}
			}
		})
	}
}

// evalDB is a database of the evaluator's collections.
type evalDB map[string][]bson.D

func (db evalDB) run(coll string, stages bson.A, fn func(bson.Raw) error) error {
	for _, out := range runPipelineIn(db, db[coll], norm(stages).(bson.A)) {
		if err := fn(rawOf(out)); err != nil {
			return err
		}
	}
	return nil
}

// evalSeparate is watch.PartReader over the evaluator: each method runs
// the queries its DB method sends (as TestReadOneAggregate checks them,
// a find as {$match}, {$project}) and decodes them with its collector.
type evalSeparate struct{ db evalDB }

func (e evalSeparate) Submissions(_ context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	p := newSubmissionsPart()
	for _, f := range submissionFilters(users, pairs, queryTerms) {
		if err := e.db.run(materialize.CollSubmission, findStages(f, submissionProjection), p.add); err != nil {
			return nil, nil, err
		}
	}
	return p.subs, p.bad, nil
}

func (e evalSeparate) byID(_ context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	var subs []materialize.Submission
	var bad []*materialize.DecodeError
	for chunk := range slices.Chunk(ids, queryTerms) {
		_ = e.db.run(materialize.CollSubmission, findStages(idIn(chunk), submissionProjection), func(raw bson.Raw) error {
			s, err := materialize.DecodeSubmission(raw)
			if err != nil {
				bad = append(bad, decodeError(materialize.CollSubmission, raw, err))
				return nil
			}
			subs = append(subs, s)
			return nil
		})
	}
	return subs, bad, nil
}

func (e evalSeparate) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	r := newUserStats(users)
	for chunk := range slices.Chunk(users, queryTerms) {
		if err := e.db.run(materialize.CollSubmission, userStatsPipeline(chunk), r.add); err != nil {
			return nil, nil, err
		}
	}
	subs, bad, err := othersOf(ctx, e.byID, r)
	if err != nil {
		return nil, nil, err
	}
	return r.finish(subs, bad)
}

func (e evalSeparate) Users(_ context.Context, names []string) (map[string]watch.StoredUser, error) {
	p := make(usersPart)
	for chunk := range slices.Chunk(names, queryTerms) {
		_ = e.db.run(materialize.CollUser, findStages(idIn(chunk), userProjection), p.add) // usersPart.add never fails
	}
	return p, nil
}

func (e evalSeparate) Problems(_ context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	p := newProblemsPart(len(ids))
	for chunk := range slices.Chunk(ids, queryTerms) {
		_ = e.db.run(materialize.CollProblem, findStages(idIn(chunk), problemProjection), p.add) // problemsPart.add never fails
	}
	return p.out, p.bad, nil
}

func (e evalSeparate) Homeworks(_ context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	p := newHomeworksPart(len(ids))
	for chunk := range slices.Chunk(ids, queryTerms) {
		_ = e.db.run(materialize.CollHomework, homeworkPipeline(chunk, users), p.add) // homeworksPart.add never fails
	}
	return p.out, p.bad, nil
}

// randomReadDB is a random database of the four source collections, with
// the unusual documents of randomSubmission and users, problems and
// homeworks of every shape the decoders tell apart.
// randomSubset returns each of vals with probability one half, in order.
func randomSubset(r *rand.Rand, vals []string) []string {
	var out []string
	for _, v := range vals {
		if r.IntN(2) == 0 {
			out = append(out, v)
		}
	}
	return out
}

func randomReadDB(r *rand.Rand, users []string, hws []bson.ObjectID) evalDB {
	db := evalDB{}
	for i := range r.IntN(40) {
		db[materialize.CollSubmission] = append(db[materialize.CollSubmission], randomSubmission(r, i, users, false))
	}
	pick := func(vals ...any) any { return vals[r.IntN(len(vals))] }
	for _, u := range users {
		if r.IntN(4) == 0 {
			continue
		}
		d := bson.D{{Key: "_id", Value: u}, {Key: "username", Value: u}}
		if v := pick(int32(3), int64(2), "many", nil, missing); v != missing {
			d = append(d, bson.E{Key: "submission", Value: v})
		}
		if v := pick(int32(1), float64(1), missing); v != missing {
			d = append(d, bson.E{Key: "AC_submission", Value: v})
		}
		if v := pick(bson.A{int32(1)}, bson.A{}, "x", missing); v != missing {
			d = append(d, bson.E{Key: "AC_problem_ids", Value: v})
		}
		db[materialize.CollUser] = append(db[materialize.CollUser], d)
	}
	db[materialize.CollUser] = append(db[materialize.CollUser], bson.D{{Key: "_id", Value: int32(7)}, {Key: "submission", Value: int32(1)}})
	for id := range 6 {
		if r.IntN(3) == 0 {
			continue
		}
		d := bson.D{{Key: "_id", Value: pick(int32(id), int64(id))}, {Key: "problemName", Value: "p"}}
		if v := pick(bson.A{hws[0]}, bson.A{hws[0], hws[1]}, bson.A{}, "not an array", bson.A{"x"}, missing); v != missing {
			d = append(d, bson.E{Key: "homeworks", Value: v})
		}
		db[materialize.CollProblem] = append(db[materialize.CollProblem], d)
	}
	for _, id := range hws {
		if r.IntN(4) == 0 {
			continue
		}
		ss := bson.D{}
		for _, u := range users {
			switch r.IntN(4) {
			case 0:
			case 1:
				ss = append(ss, bson.E{Key: u, Value: "not a document"})
			default:
				ss = append(ss, bson.E{Key: u, Value: bson.D{{Key: "1", Value: bson.D{{Key: "score", Value: int32(r.IntN(101))}}}, {Key: "3", Value: bson.D{}}}})
			}
		}
		d := bson.D{{Key: "_id", Value: id}, {Key: "homeworkName", Value: "h"},
			{Key: "duration", Value: pick(bson.D{{Key: "start", Value: bson.DateTime(1)}, {Key: "end", Value: bson.DateTime(2_000_000_000_000)}}, "soon", missing)},
			{Key: "penalty", Value: pick("score = score * 0.9", int32(1))},
			{Key: "studentStatus", Value: pick(ss, ss, ss, int32(5))}}
		out := bson.D{}
		for _, e := range d {
			if e.Value != missing {
				out = append(out, e)
			}
		}
		db[materialize.CollHomework] = append(db[materialize.CollHomework], out)
	}
	return db
}

// TestReadPipeline runs Read's one aggregate (readPipeline: $unionWith,
// $replaceWith) through the evaluator over random databases and random
// Reads, decodes it as Read does, and compares it with ReadSeparately
// over the same database, each method running the queries it sends:
// every part's documents reach its decoder, from its own collection,
// none of another part. The counts, the users' stored fields and the
// decodable documents are also checked against memstore, which reads
// the whole documents with materialize's decoders. READPIPELINE_N sets
// the number of random cases (default 300).
func TestReadPipeline(t *testing.T) {
	n := 300
	if s := os.Getenv("READPIPELINE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	users := []string{"a", "b", "c.d", "$e"}
	hws := []bson.ObjectID{{0x65, 1}, {0x65, 2}, {0x65, 3}}
	d, _, _ := mockDB(t)
	ctx := context.Background()
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 19))
		db := randomReadDB(r, users, hws)
		sub := func(vals []string) []string { return randomSubset(r, vals) }
		rd := &watch.Reads{Users: sub(append(slices.Clone(users), "nobody")), HomeworkUsers: sub(users)}
		for range r.IntN(4) {
			rd.Pairs = append(rd.Pairs, materialize.Pair{User: users[r.IntN(len(users))], Problem: int64(1 + r.IntN(5))})
		}
		for id := range 7 {
			if r.IntN(2) == 0 {
				rd.Problems = append(rd.Problems, int64(id))
			}
		}
		for _, id := range append(hws, bson.ObjectID{0x65, 9}) {
			if r.IntN(2) == 0 {
				rd.Homeworks = append(rd.Homeworks, id)
			}
		}
		if r.IntN(5) == 0 {
			rd.HomeworkUsers = nil // every user
		}

		want, err := watch.ReadSeparately(ctx, evalSeparate{db}, rd)
		if err != nil {
			t.Fatal(err)
		}
		parts, ok := d.readParts(rd)
		if !ok {
			t.Fatalf("seed %d: %+v over queryTerms", seed, rd)
		}
		got := &watch.ReadResult{}
		if len(parts) > 0 {
			c := newReadCollector(rd)
			if err := db.run(parts[0].coll.Name(), readPipeline(parts), c.add); err != nil {
				t.Fatalf("seed %d, %+v: %v", seed, rd, err)
			}
			if got, err = c.finish(ctx, evalSeparate{db}.byID); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d, %+v: Read =\n%s\nReadSeparately =\n%s", seed, rd, dump(got), dump(want))
		}

		st := memstore.New()
		for coll, docs := range db {
			for _, doc := range docs {
				if err := st.Load(coll, rawOf(doc)); err != nil {
					t.Fatal(err)
				}
			}
		}
		mem, err := st.Read(ctx, rd)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstMemstore(t, seed, got, mem)
	}
}

// checkAgainstMemstore compares what memstore and the adapter agree on:
// the decodable submissions, the counts, the stored user fields, the
// decodable problems and homeworks (memstore reports fewer undecodable
// documents: only those a user it was asked for matches, not a pair).
func checkAgainstMemstore(t *testing.T, seed int, got, mem *watch.ReadResult) {
	t.Helper()
	byID := func(s []materialize.Submission) []materialize.Submission {
		return slices.SortedFunc(slices.Values(s), func(a, b materialize.Submission) int { return strings.Compare(a.ID.Hex(), b.ID.Hex()) })
	}
	if g, m := byID(got.Submissions), byID(mem.Submissions); !slices.Equal(g, m) {
		t.Errorf("seed %d: submissions %v, memstore %v", seed, g, m)
	}
	if len(got.Stats) != len(mem.Stats) {
		t.Errorf("seed %d: stats %v, memstore %v", seed, got.Stats, mem.Stats)
	}
	for u, s := range mem.Stats {
		if !got.Stats[u].Equal(s) {
			t.Errorf("seed %d: stats of %s %+v, memstore %+v", seed, u, got.Stats[u], s)
		}
	}
	if !reflect.DeepEqual(got.Users, mem.Users) {
		t.Errorf("seed %d: users %v, memstore %v", seed, got.Users, mem.Users)
	}
	if !reflect.DeepEqual(got.Problems, mem.Problems) {
		t.Errorf("seed %d: problems %v, memstore %v", seed, got.Problems, mem.Problems)
	}
	if len(got.Homeworks) != len(mem.Homeworks) {
		t.Errorf("seed %d: %d homeworks, memstore %d", seed, len(got.Homeworks), len(mem.Homeworks))
	}
	for id, h := range mem.Homeworks {
		g := got.Homeworks[id]
		if g == nil || g.End != h.End || g.Penalty != h.Penalty || !reflect.DeepEqual(g.Students, h.Students) {
			t.Errorf("seed %d: homework %s %+v, memstore %+v", seed, id.Hex(), g, h)
		}
	}
}

// TestReadGetMore: a result over what one reply holds (16 MiB) continues
// in getMores of the same cursor, with the same batch size, and decodes
// to the same result.
func TestReadGetMore(t *testing.T) {
	x := testReplies()
	ctx := context.Background()
	d, md, _ := mockDB(t)
	md.AddResponses(x.separate()...)
	want, err := watch.ReadSeparately(ctx, d, fullReads())
	if err != nil {
		t.Fatal(err)
	}
	all := x.combinedDocs()
	half := len(all) / 2
	d, md, sent := mockDB(t)
	md.AddResponses(
		bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "id", Value: int64(42)}, {Key: "ns", Value: "normal-oj.submission"}, {Key: "firstBatch", Value: all[:half]}}}},
		bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "id", Value: int64(0)}, {Key: "ns", Value: "normal-oj.submission"}, {Key: "nextBatch", Value: all[half:]}}}},
		cursorReply("normal-oj.submission", x.others...))
	got, err := d.Read(ctx, fullReads())
	if err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 3 {
		t.Fatalf("%d commands, want aggregate, getMore, find", len(cmds))
	}
	if bs, _ := cmds[1].Lookup("batchSize").Int32OK(); cmds[1].Lookup("getMore").Type == 0 || bs != readBatchSize {
		t.Errorf("second command %s, want a getMore with the aggregate's batch size", cmds[1])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read =\n%s\nReadSeparately =\n%s", dump(got), dump(want))
	}
}

// TestReadAfterOwnWrites: the combined Read, like every read, carries
// afterClusterTime of the daemon's own last acknowledged write when that
// is later than the batch's event.
func TestReadAfterOwnWrites(t *testing.T) {
	d, md, sent := mockDB(t)
	wrote := bson.Timestamp{T: 1_800_000_010, I: 2}
	md.AddResponses(bson.D{{Key: "ok", Value: 1}, {Key: "n", Value: 1}, {Key: "nModified", Value: 1}, {Key: "operationTime", Value: wrote}})
	if _, err := d.Apply(context.Background(), &watch.Writes{Users: []watch.UserWrite{{User: "alice"}}}); err != nil {
		t.Fatal(err)
	}
	sent()
	md.AddResponses(cursorReply("normal-oj.submission"))
	if _, err := d.Read(watch.WithReadAfter(context.Background(), bson.Timestamp{T: 1_800_000_000, I: 7}), fullReads()); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("%d commands, want 1", len(cmds))
	}
	if tt, ti, _ := cmds[0].Lookup("readConcern", "afterClusterTime").TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != wrote {
		t.Errorf("afterClusterTime %v, want the daemon's own write's %v", cmds[0].Lookup("readConcern"), wrote)
	}
}

// TestReadRejectsUnexpectedResults: a result that is not {p: <tag of a
// part read>, d: <document>} fails the Read (a dropped document would be
// a part read short, and its derived values written wrong); the cursor
// the failure leaves open is killed.
func TestReadRejectsUnexpectedResults(t *testing.T) {
	sub := bson.D{{Key: "_id", Value: bson.ObjectID{1}}, {Key: "user", Value: "alice"}}
	cases := []struct {
		name string
		r    *watch.Reads
		doc  bson.D
	}{
		{"unknown tag", fullReads(), bson.D{{Key: "p", Value: "x"}, {Key: "d", Value: sub}}},
		{"tag of a part not read", &watch.Reads{Pairs: []materialize.Pair{{User: "alice", Problem: 1}}},
			bson.D{{Key: "p", Value: partHomeworks}, {Key: "d", Value: sub}}},
		{"tag not a string", fullReads(), bson.D{{Key: "p", Value: int32(1)}, {Key: "d", Value: sub}}},
		{"no tag", fullReads(), bson.D{{Key: "d", Value: sub}}},
		{"d not a document", fullReads(), bson.D{{Key: "p", Value: partUsers}, {Key: "d", Value: "alice"}}},
		{"d an array", fullReads(), bson.D{{Key: "p", Value: partUsers}, {Key: "d", Value: bson.A{sub}}}},
		{"no d", fullReads(), bson.D{{Key: "p", Value: partSubmissions}}},
		{"not wrapped", fullReads(), sub},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, md, sent := mockDB(t)
			md.AddResponses(
				bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "id", Value: int64(42)}, {Key: "ns", Value: "normal-oj.submission"},
					{Key: "firstBatch", Value: bson.A{c.doc}}}}},
				bson.D{{Key: "ok", Value: 1}, {Key: "cursorsKilled", Value: bson.A{int64(42)}}})
			got, err := d.Read(context.Background(), c.r)
			if err == nil {
				t.Fatalf("Read of %v = %s, want an error", c.doc, dump(got))
			}
			if names := commandNames(sent()); !slices.Equal(names, []string{"aggregate", "killCursors"}) {
				t.Errorf("sent %v, want the aggregate and the killCursors of its cursor", names)
			}
		})
	}
}

// TestReadGetMoreErrors: a getMore that fails fails the Read, marked with
// the class of the getMore's error (a Read short of its later batches
// would derive and write values from part of the documents).
func TestReadGetMoreErrors(t *testing.T) {
	all := testReplies().combinedDocs()
	cases := []struct {
		reply bson.D
		class watch.Class
	}{
		{commandError(43, "CursorNotFound", "cursor id 42 not found"), watch.Transient},
		{commandError(237, "CursorKilled", "killed"), watch.Overloaded},
		{commandError(91, "ShutdownInProgress", "shutting down"), watch.Transient},
		{commandError(175, "QueryPlanKilled", "collection dropped"), watch.Transient},
		{commandError(13, "Unauthorized", "not authorized"), watch.Unauthorized},
		{commandError(292, "QueryExceededMemoryLimitNoDiskUseAllowed", "exceeded memory limit"), watch.Unclassified},
	}
	for _, c := range cases {
		t.Run(lookupD(c.reply, "codeName").(string), func(t *testing.T) {
			d, md, sent := mockDB(t)
			md.AddResponses(
				bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{{Key: "id", Value: int64(42)}, {Key: "ns", Value: "normal-oj.submission"}, {Key: "firstBatch", Value: all[:2]}}}},
				c.reply)
			got, err := d.Read(context.Background(), fullReads())
			if err == nil {
				t.Fatalf("Read = %s after a failed getMore, want an error", dump(got))
			}
			if cl := watch.ClassOf(err); cl != c.class {
				t.Errorf("Read: class %s (%v), want %s", cl, err, c.class)
			}
			if names := commandNames(sent()); len(names) < 2 || names[1] != "getMore" {
				t.Errorf("sent %v, want the aggregate, then a getMore", names)
			}
		})
	}
}

// commandNames are the names of cmds.
func commandNames(cmds []bson.Raw) []string {
	var out []string
	for _, c := range cmds {
		if e, err := c.IndexErr(0); err == nil {
			out = append(out, e.Key())
		}
	}
	return out
}
