// Package storecost wraps the in-memory store in a decorator that counts,
// per call, what the daemon would cost a MongoDB server (round trips,
// documents and BSON bytes read and written) and makes each call take the
// time a network would: a round-trip time per round trip plus a cost per
// byte transferred. It serves the online cost benchmark (cmd/onlinebench)
// only and is not linked into the production binary.
//
// Bytes are the BSON sizes of what a MongoDB server would return or
// receive for each call, computed from the stored documents the way the
// mongodb adapter's queries shape them (see the size functions below): the
// projected documents of a find, the documents a pipeline returns, the
// filter and update document of each write model; a Read is the adapter's
// one aggregate answering its parts, each document wrapped as {p, d}. Command
// envelopes (the command name, $db, lsid, $clusterTime, readConcern,
// ~150-250 B per command) are not counted on either side.
package storecost

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// Model is the cost of the network between the daemon and the primary.
type Model struct {
	RTT     time.Duration // per round trip
	PerByte time.Duration // per byte sent or received (8ns ≈ 1 Gbit/s)
	// Await is how long a poll of the change stream that finds no event
	// waits for one, as a getMore with maxAwaitTimeMS does (0: it returns
	// at once). The waiting polls the in-memory store, inside the
	// decorator: its CPU is the store's, not the engine's.
	Await time.Duration
}

// firstBatch is the number of documents a find or aggregate returns in its
// first reply when no batchSize is set (the server's default, 101); the
// rest come with getMore, each up to 16 MiB.
const (
	firstBatch  = 101
	getMoreSize = 16 << 20
	// queryTerms is the adapter's chunk size (mongodb.queryTerms): one
	// query per 500 ids, users or pairs.
	queryTerms = 500
	// bulkChunk is the adapter's bulk write chunk (1000 models).
	bulkChunk = 1000
	// tokenBytes is the BSON size assumed for a MongoDB resume token
	// ({_data: "<hex string>"}: ~130 hex characters for an event on a
	// document keyed by an ObjectId), in place of memstore's short one.
	tokenBytes = 150
)

// Counts are the costs of the calls made since the last Reset.
type Counts struct {
	RoundTrips   int64
	ReadCalls    int64 // find/aggregate commands
	WriteCalls   int64 // update/bulkWrite commands
	DocsRead     int64 // documents returned
	BytesRead    int64 // BSON bytes returned
	DocsWritten  int64 // write models sent
	BytesWritten int64 // BSON bytes of filters and updates sent
	Events       int64 // change events received
	EventBytes   int64 // their BSON bytes (counted in BytesRead too)
	// Examined is what the server touches to answer: documents it reads
	// and their stored BSON bytes, and for writes the stored size of each
	// document it rewrites; for the reads the covering submission index
	// answers, its entries (ExaminedKeys) and their stored bytes
	// (memstore.IndexScan), in ExaminedBytes too. Other index entries
	// (a lookup by _id, a homework's) are not counted.
	ExaminedDocs  int64
	ExaminedBytes int64
	ExaminedKeys  int64
	// Inner is the time spent in the in-memory store itself (the stand-in
	// for the server's work, which the model does not charge).
	Inner time.Duration
	// Model is the time the model charged (sleeps).
	Model time.Duration
	// Slept is the wall time those sleeps took: Model plus the OS's
	// overshoot of each sleep (a check on the model, not part of it).
	Slept time.Duration
	// CPU is the CPU time spent inside the decorator's calls: the
	// in-memory store, the accounting and the benchmark's hooks (each
	// call runs locked to its OS thread and reads that thread's CPU
	// clock); zero where ThreadCPU cannot be read.
	CPU time.Duration
	// ByCall is the round trips per method of the decorator
	// ("Submissions", "Apply", "Next" for change events...).
	ByCall map[string]int64
}

// Sub returns c - d.
func (c Counts) Sub(d Counts) Counts {
	return Counts{
		RoundTrips: c.RoundTrips - d.RoundTrips, ReadCalls: c.ReadCalls - d.ReadCalls, WriteCalls: c.WriteCalls - d.WriteCalls,
		DocsRead: c.DocsRead - d.DocsRead, BytesRead: c.BytesRead - d.BytesRead,
		DocsWritten: c.DocsWritten - d.DocsWritten, BytesWritten: c.BytesWritten - d.BytesWritten,
		Events: c.Events - d.Events, EventBytes: c.EventBytes - d.EventBytes,
		ExaminedDocs: c.ExaminedDocs - d.ExaminedDocs, ExaminedBytes: c.ExaminedBytes - d.ExaminedBytes, ExaminedKeys: c.ExaminedKeys - d.ExaminedKeys,
		Inner: c.Inner - d.Inner, Model: c.Model - d.Model, Slept: c.Slept - d.Slept, CPU: c.CPU - d.CPU,
		ByCall: subMap(c.ByCall, d.ByCall),
	}
}

func subMap(a, b map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(a))
	for k, v := range a {
		if v-b[k] != 0 {
			out[k] = v - b[k]
		}
	}
	return out
}

// caller names the decorator method that called charge.
func caller() string {
	pc, _, _, ok := runtime.Caller(2)
	if !ok {
		return "?"
	}
	name := runtime.FuncForPC(pc).Name()
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// Store decorates a memstore.Store: watch.Store, watch.Feed and
// resume.Store, counting and delaying every call. Safe for concurrent use.
type Store struct {
	inner *memstore.Store
	model Model
	sleep func(time.Duration)

	mu sync.Mutex
	c  Counts
	// owed is modelled time charged but not slept yet: the bytes of change
	// events delivered since the last sleep (see charge).
	owed time.Duration
	// Hooks for the benchmark's staleness clock: OnEvent is called with
	// each change event delivered, OnApplied after each Apply returned.
	OnEvent   func(watch.Event)
	OnApplied func()
	OnSaved   func()
	// OnQuiet is called after each poll of the change stream that
	// returned no event, OnCall after every other call.
	OnQuiet func()
	OnCall  func()
}

var (
	_ watch.Store  = (*Store)(nil)
	_ watch.Feed   = (*Store)(nil)
	_ resume.Store = (*Store)(nil)
)

// New returns the decorator of inner under model.
func New(inner *memstore.Store, model Model) *Store {
	return &Store{inner: inner, model: model, sleep: time.Sleep}
}

// Counts returns the counts so far.
func (s *Store) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	c.ByCall = make(map[string]int64, len(s.c.ByCall))
	for k, v := range s.c.ByCall {
		c.ByCall[k] = v
	}
	return c
}

// call is the cost of one call: its round trips and transfers, and what
// the server examined.
type call struct {
	read                   bool
	rt, docs, bytes        int64
	examDocs, examBytes    int64
	examKeys               int64
	events, eventBytes     int64
	inner                  time.Duration
	writesDocs, writeBytes int64
}

// cpuSpan locks the calling goroutine to its OS thread and returns the
// function that, deferred, adds the thread's CPU time since to the counts
// and unlocks it. The model's sleep inside costs no CPU.
func (s *Store) cpuSpan() func() {
	runtime.LockOSThread()
	c0, ok := ThreadCPU()
	return func() {
		c1, ok1 := ThreadCPU()
		runtime.UnlockOSThread()
		if ok && ok1 {
			s.mu.Lock()
			s.c.CPU += c1 - c0
			s.mu.Unlock()
		}
	}
}

// maxOwed bounds the modelled time owed before it is slept.
const maxOwed = time.Millisecond

// charge records c and sleeps the model's time for it. A call without a
// round trip (a change event of a getMore reply already being read) owes
// its transfer time instead, slept with the next call that has a round
// trip, at the next quiet poll (flushOwed), or once maxOwed is owed: one
// sleep per reply rather than one per event, because each sleep costs
// the OS tens of µs beyond what it asks, more than an event's bytes (at
// 1,000 landings/s those overheads were most of the staleness measured).
// The time slept in all equals Counts.Model; an event is delivered at
// most maxOwed before its bytes are paid for.
func (s *Store) charge(c call) {
	d := time.Duration(c.rt)*s.model.RTT + time.Duration(c.bytes+c.writeBytes)*s.model.PerByte
	name := caller()
	s.mu.Lock()
	if s.c.ByCall == nil {
		s.c.ByCall = make(map[string]int64)
	}
	s.c.ByCall[name] += c.rt
	s.c.RoundTrips += c.rt
	if c.read {
		s.c.ReadCalls++
	} else if c.writesDocs > 0 {
		s.c.WriteCalls++
	}
	s.c.DocsRead += c.docs
	s.c.BytesRead += c.bytes
	s.c.DocsWritten += c.writesDocs
	s.c.BytesWritten += c.writeBytes
	s.c.Events += c.events
	s.c.EventBytes += c.eventBytes
	s.c.ExaminedDocs += c.examDocs
	s.c.ExaminedBytes += c.examBytes
	s.c.ExaminedKeys += c.examKeys
	s.c.Inner += c.inner
	s.c.Model += d
	s.owed += d
	sleep := time.Duration(0)
	if c.rt > 0 || s.owed >= maxOwed {
		sleep, s.owed = s.owed, 0
	}
	s.mu.Unlock()
	if s.OnCall != nil {
		s.OnCall()
	}
	s.pay(sleep)
}

// flushOwed sleeps the time owed (see charge).
func (s *Store) flushOwed() {
	s.mu.Lock()
	d := s.owed
	s.owed = 0
	s.mu.Unlock()
	s.pay(d)
}

// pay sleeps d and counts the wall time the sleep took.
func (s *Store) pay(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.Now()
	s.sleep(d)
	took := time.Since(t)
	s.mu.Lock()
	s.c.Slept += took
	s.mu.Unlock()
}

// readRoundTrips is the round trips of a read sent as chunks queries
// returning docs documents of bytes bytes in all: one per query, and the
// getMores past each query's first batch of 101 documents.
func readRoundTrips(chunks int, docs, bytes int64) int64 {
	if chunks < 1 {
		chunks = 1
	}
	rt := int64(chunks)
	if docs > int64(chunks)*firstBatch {
		rt += (bytes + getMoreSize - 1) / getMoreSize
	}
	return rt
}

func chunksOf(n int) int { return (n + queryTerms - 1) / queryTerms }

func size(d bson.D) int64 {
	b, err := bson.Marshal(d)
	if err != nil {
		panic("storecost: marshal: " + err.Error()) // values built from stored BSON always encode
	}
	return int64(len(b))
}

// project returns the named fields of raw, in stored order, with _id.
func project(raw bson.Raw, fields ...string) bson.D {
	want := map[string]bool{"_id": true}
	for _, f := range fields {
		want[f] = true
	}
	out := bson.D{}
	elems, _ := raw.Elements()
	for _, e := range elems {
		if want[e.Key()] {
			out = append(out, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	return out
}

var submissionFields = []string{"user", "problem", "languageType", "timestamp", "status", "score"}

// submissionsCost is the transfer of subs, the submissions a read
// returned, projected; the server examines each one's document, as a
// read by _id does (no round trips).
func (s *Store) submissionsCost(subs []materialize.Submission) call {
	c := call{read: true}
	for i := range subs {
		raw := s.inner.Get(materialize.CollSubmission, subs[i].ID)
		c.docs++
		c.bytes += size(project(raw, submissionFields...))
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	return c
}

// indexCost is what the server examines to read the submissions of users
// and pairs on the covering index (memstore.ScanIndex): its entries, and
// documents only when the index cannot cover the read.
func (s *Store) indexCost(users []string, pairs []materialize.Pair) call {
	x := s.inner.ScanIndex(users, pairs)
	c := call{read: true, examKeys: x.Keys, examBytes: x.KeyBytes}
	for _, raw := range x.Fetched {
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	return c
}

// coveredSubmissionsCost is the transfer of subs, returned by a read of
// users' and pairs' submissions, and what that read examines on the
// covering index (no round trips).
func (s *Store) coveredSubmissionsCost(users []string, pairs []materialize.Pair, subs []materialize.Submission) call {
	c := s.indexCost(users, pairs)
	for i := range subs {
		c.docs++
		c.bytes += size(project(s.inner.Get(materialize.CollSubmission, subs[i].ID), submissionFields...))
	}
	return c
}

// Submissions implements watch.Source (a find projected to the derivation's
// fields, one per 500 terms).
func (s *Store) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	subs, bad, err := s.inner.Submissions(ctx, users, pairs)
	c := s.coveredSubmissionsCost(users, pairs, subs)
	c.rt = readRoundTrips(chunksOf(len(users)+len(pairs)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return subs, bad, err
}

// UserStats implements watch.Source (the adapter's userStatsPipeline:
// one small document per user, {_id, n, ac, other: [], order: [AC problem
// ids]}, as for users whose submissions all have Back-End's types; the
// server examines every entry of the user on the covering index).
func (s *Store) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.UserStats(ctx, users)
	c := s.userStatsCost(users, out)
	c.rt = readRoundTrips(chunksOf(len(users)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

// userStatsCost is the transfer and examination of UserStats(users)
// returning out (no round trips).
func (s *Store) userStatsCost(users []string, out map[string]materialize.UserStats) call {
	c := s.indexCost(users, nil)
	for u, st := range out {
		if st.Submission == 0 && len(st.ACProblemIDs) == 0 {
			continue // no submission of the user: no group, no document
		}
		order := make(bson.A, len(st.ACProblemIDs))
		for i, p := range st.ACProblemIDs {
			order[i] = int32(p)
		}
		c.docs++
		c.bytes += size(bson.D{{Key: "_id", Value: u}, {Key: "n", Value: int32(st.Submission)}, {Key: "ac", Value: int32(st.ACSubmission)}, {Key: "other", Value: bson.A{}}, {Key: "order", Value: order}})
	}
	return c
}

// SubmissionsByID implements watch.Source.
func (s *Store) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	subs, bad, err := s.inner.SubmissionsByID(ctx, ids)
	c := s.submissionsCost(subs)
	c.rt = readRoundTrips(chunksOf(len(ids)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return subs, bad, err
}

func (s *Store) problemsCost(ids []int64, chunks int) call {
	c := call{read: true}
	for _, id := range ids {
		raw := s.inner.Get(materialize.CollProblem, int32(id))
		if raw == nil {
			raw = s.inner.Get(materialize.CollProblem, id)
		}
		if raw == nil {
			continue
		}
		c.docs++
		c.bytes += size(project(raw, "homeworks"))
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	c.rt = readRoundTrips(chunks, c.docs, c.bytes)
	return c
}

// Problems implements watch.Source.
func (s *Store) Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.Problems(ctx, ids)
	c := s.problemsCost(foundProblems(out), chunksOf(len(ids)))
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

func foundProblems(out map[int64]*materialize.Problem) []int64 {
	found := make([]int64, 0, len(out))
	for id := range out {
		found = append(found, id)
	}
	return found
}

// ProblemsListing implements watch.Source (a find on the homeworks_1 index).
func (s *Store) ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, err := s.inner.ProblemsListing(ctx, homeworks)
	seen := map[int64]bool{}
	var ids []int64
	for _, ps := range out {
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				ids = append(ids, p)
			}
		}
	}
	c := s.problemsCost(ids, chunksOf(len(homeworks)))
	c.inner = time.Since(t)
	s.charge(c)
	return out, err
}

// Homeworks implements watch.Source (the adapter's homeworkPipeline:
// _id, duration, penalty and the named users' part of studentStatus; the
// server reads each homework whole to build it).
func (s *Store) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.Homeworks(ctx, ids, users)
	c := s.homeworksCost(out, users)
	c.rt = readRoundTrips(chunksOf(len(ids)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

// homeworksCost is the transfer and examination of a Homeworks read for
// users returning out (no round trips).
func (s *Store) homeworksCost(out map[bson.ObjectID]*watch.HomeworkDoc, users []string) call {
	var uset map[string]bool
	if users != nil {
		uset = make(map[string]bool, len(users))
		for _, u := range users {
			uset[u] = true
		}
	}
	c := call{read: true}
	for id := range out {
		raw := s.inner.Get(materialize.CollHomework, id)
		d := project(raw, "duration", "penalty")
		if ss, ok := raw.Lookup(materialize.FieldStudentStatus).DocumentOK(); ok {
			kept := bson.D{}
			elems, _ := ss.Elements()
			for _, e := range elems {
				if uset == nil || uset[e.Key()] {
					kept = append(kept, bson.E{Key: e.Key(), Value: e.Value()})
				}
			}
			d = append(d, bson.E{Key: materialize.FieldStudentStatus, Value: kept})
		}
		c.docs++
		c.bytes += size(d)
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	return c
}

// EntryKeys implements watch.Source (key names only).
func (s *Store) EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]watch.EntryRef, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.EntryKeys(ctx, homeworks)
	c := call{read: true}
	for id, refs := range out {
		raw := s.inner.Get(materialize.CollHomework, id)
		byUser := map[string]bson.A{}
		var order []string
		for _, r := range refs {
			if _, ok := byUser[r.User]; !ok {
				order = append(order, r.User)
			}
			byUser[r.User] = append(byUser[r.User], r.ProblemKey)
		}
		keys := bson.A{}
		for _, u := range order {
			keys = append(keys, bson.D{{Key: "u", Value: u}, {Key: "doc", Value: true}, {Key: "p", Value: byUser[u]}})
		}
		c.docs++
		c.bytes += size(bson.D{{Key: "_id", Value: id}, {Key: "keys", Value: keys}, {Key: "ssType", Value: "object"}})
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	c.rt = readRoundTrips(chunksOf(len(homeworks)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

// EntriesForProblems implements watch.Source (an aggregation over every
// homework: entry keys cannot be indexed).
func (s *Store) EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, err := s.inner.EntriesForProblems(ctx, problems)
	c := call{read: true}
	hits := map[bson.ObjectID]map[string]bson.A{}
	for p, hus := range out {
		for _, hu := range hus {
			if hits[hu.Homework] == nil {
				hits[hu.Homework] = map[string]bson.A{}
			}
			hits[hu.Homework][hu.User] = append(hits[hu.Homework][hu.User], materialize.ProblemKey(p))
		}
	}
	for h, us := range hits {
		arr := bson.A{}
		for u, ps := range us {
			arr = append(arr, bson.D{{Key: "u", Value: u}, {Key: "p", Value: ps}})
		}
		c.docs++
		c.bytes += size(bson.D{{Key: "_id", Value: h}, {Key: "hits", Value: arr}})
	}
	for _, raw := range s.inner.Collection(materialize.CollHomework) {
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	c.rt = readRoundTrips(chunksOf(len(problems)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return out, err
}

// Users implements watch.Source (_id and the three derived fields).
func (s *Store) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, err := s.inner.Users(ctx, names)
	c := s.usersCost(out)
	c.rt = readRoundTrips(chunksOf(len(names)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return out, err
}

// usersCost is the transfer and examination of a Users read returning
// out (no round trips).
func (s *Store) usersCost(out map[string]watch.StoredUser) call {
	c := call{read: true}
	for name := range out {
		raw := s.inner.Get(materialize.CollUser, name)
		c.docs++
		c.bytes += size(project(raw, materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs))
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	return c
}

// UserWriteSize is the BSON size of the adapter's user write model:
// filter {_id: user} and update {$set: {submission, AC_submission,
// AC_problem_ids}} (mongodb.userWrite).
func UserWriteSize(w watch.UserWrite) int64 {
	return size(bson.D{{Key: "_id", Value: w.User}}) +
		size(bson.D{{Key: "$set", Value: w.Stats.Fields()}})
}

// EntryWriteSize is the BSON size of the adapter's entry write model for
// names that are safe path components (mongodb.entryWriteByPath): filter
// {_id, "studentStatus.u.p": {$exists: true}}, update {$set: {path: entry}}.
// Names needing the pipeline form are larger; the benchmark has none.
func EntryWriteSize(w watch.EntryWrite) int64 {
	path := materialize.FieldStudentStatus + "." + w.User + "." + w.ProblemKey
	return size(bson.D{{Key: "_id", Value: w.Homework}, {Key: path, Value: bson.D{{Key: "$exists", Value: true}}}}) +
		size(bson.D{{Key: "$set", Value: bson.D{{Key: path, Value: w.Entry.Doc()}}}})
}

// RecordKeysSize is the BSON size of the adapter's key record upsert:
// filter {_id} and update {$addToSet: {pairs: {$each: [{u, p}...]}}}.
func RecordKeysSize(id bson.ObjectID, pairs []materialize.Pair) int64 {
	each := make(bson.A, len(pairs))
	for i, p := range pairs {
		each[i] = bson.D{{Key: "u", Value: p.User}, {Key: "p", Value: p.Problem}}
	}
	return size(bson.D{{Key: "_id", Value: id}}) +
		size(bson.D{{Key: "$addToSet", Value: bson.D{{Key: "pairs", Value: bson.D{{Key: "$each", Value: each}}}}}})
}

// Apply implements watch.Writer: one bulk write per collection (per 1000
// models), each model a filter and a $set; the operationTime is the
// inner store's.
func (s *Store) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	defer s.cpuSpan()()
	t := time.Now()
	at, err := s.inner.Apply(ctx, w)
	c := call{}
	c.rt = int64((len(w.Users)+bulkChunk-1)/bulkChunk + (len(w.Entries)+bulkChunk-1)/bulkChunk)
	hws := map[bson.ObjectID]bool{}
	for _, u := range w.Users {
		c.writesDocs++
		c.writeBytes += UserWriteSize(u)
		c.examDocs++
		c.examBytes += int64(len(s.inner.Get(materialize.CollUser, u.User)))
	}
	for _, e := range w.Entries {
		c.writesDocs++
		c.writeBytes += EntryWriteSize(e)
		hws[e.Homework] = true
	}
	for h := range hws {
		c.examDocs++
		c.examBytes += int64(len(s.inner.Get(materialize.CollHomework, h)))
	}
	c.inner = time.Since(t)
	s.charge(c)
	if s.OnApplied != nil {
		s.OnApplied()
	}
	return at, err
}

// LookupKeys implements watch.KeyIndex (a find on the key index by _id).
func (s *Store) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, err := s.inner.LookupKeys(ctx, ids)
	c := call{read: true}
	for id, pairs := range out {
		arr := bson.A{}
		for _, p := range pairs {
			arr = append(arr, bson.D{{Key: "u", Value: p.User}, {Key: "p", Value: p.Problem}})
		}
		c.docs++
		c.bytes += size(bson.D{{Key: "_id", Value: id}, {Key: "pairs", Value: arr}})
		c.examDocs++
	}
	c.rt = readRoundTrips(chunksOf(len(ids)), c.docs, c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	return out, err
}

// RecordKeys implements watch.KeyIndex (one bulk write of upserts).
func (s *Store) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	defer s.cpuSpan()()
	t := time.Now()
	err := s.inner.RecordKeys(ctx, keys)
	c := call{}
	for id, pairs := range keys {
		if len(pairs) == 0 {
			continue
		}
		c.writesDocs++
		c.writeBytes += RecordKeysSize(id, pairs)
	}
	c.rt = (c.writesDocs + bulkChunk - 1) / bulkChunk
	c.inner = time.Since(t)
	s.charge(c)
	return err
}

// ScanSubmissions implements watch.Scanner (one sorted find over the whole
// collection, projected; getMores of 16 MiB). Its CPU is not counted in
// Counts.CPU: fn, the rebuild's own work, runs inside it.
func (s *Store) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	t := time.Now()
	var c call
	c.read = true
	var inFn time.Duration
	err := s.inner.ScanSubmissions(ctx, func(sub materialize.Submission) error {
		raw := s.inner.Get(materialize.CollSubmission, sub.ID)
		c.docs++
		c.bytes += size(project(raw, submissionFields...))
		c.examDocs++
		c.examBytes += int64(len(raw))
		f := time.Now()
		err := fn(sub)
		inFn += time.Since(f)
		return err
	}, bad)
	c.rt = readRoundTrips(1, c.docs, c.bytes)
	c.inner = time.Since(t) - inFn
	s.charge(c)
	return err
}

func (s *Store) wholeCost(coll string, fields ...string) call {
	c := call{read: true}
	for _, raw := range s.inner.Collection(coll) {
		c.docs++
		if fields == nil {
			c.bytes += int64(len(raw))
		} else {
			c.bytes += size(project(raw, fields...))
		}
		c.examDocs++
		c.examBytes += int64(len(raw))
	}
	c.rt = readRoundTrips(1, c.docs, c.bytes)
	return c
}

// AllProblems implements watch.Scanner.
func (s *Store) AllProblems(ctx context.Context) ([]*materialize.Problem, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.AllProblems(ctx)
	c := s.wholeCost(materialize.CollProblem, "homeworks")
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

// AllHomeworks implements watch.Scanner (every homework with its whole
// studentStatus).
func (s *Store) AllHomeworks(ctx context.Context) ([]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.AllHomeworks(ctx)
	c := s.wholeCost(materialize.CollHomework, "duration", "penalty", materialize.FieldStudentStatus)
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

// AllUsers implements watch.Scanner.
func (s *Store) AllUsers(ctx context.Context) (map[string]watch.StoredUser, []*materialize.DecodeError, error) {
	defer s.cpuSpan()()
	t := time.Now()
	out, bad, err := s.inner.AllUsers(ctx)
	c := s.wholeCost(materialize.CollUser, materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs)
	c.inner = time.Since(t)
	s.charge(c)
	return out, bad, err
}

// ClusterTime implements watch.Scanner (one command).
func (s *Store) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	defer s.cpuSpan()()
	t := time.Now()
	ct, err := s.inner.ClusterTime(ctx)
	s.charge(call{read: true, rt: 1, inner: time.Since(t)})
	return ct, err
}

// LoadCheckpoint implements resume.Store (one find).
func (s *Store) LoadCheckpoint(ctx context.Context) (resume.Checkpoint, bool, error) {
	defer s.cpuSpan()()
	t := time.Now()
	cp, ok, err := s.inner.LoadCheckpoint(ctx)
	s.charge(call{read: true, rt: 1, docs: 1, bytes: size(bson.D{{Key: "_id", Value: "checkpoint"}, {Key: "checkpoint", Value: cp}}), inner: time.Since(t)})
	return cp, ok, err
}

// CheckpointWriteSize is the BSON size of the adapter's checkpoint save
// (mongodb.saveCheckpointWrite at epoch 0: filter {_id, lease: {$exists:
// false}}, update {$set: {checkpoint: cp}}), with the token at the size
// of a MongoDB resume token.
func CheckpointWriteSize(cp resume.Checkpoint) int64 {
	cp.Token = mongoToken
	return size(bson.D{{Key: "_id", Value: "checkpoint"}, {Key: "lease", Value: bson.D{{Key: "$exists", Value: false}}}}) +
		size(bson.D{{Key: "$set", Value: bson.D{{Key: "checkpoint", Value: cp}}}})
}

// mongoToken is a resume token of tokenBytes bytes: {_data: "<hex>"}.
var mongoToken = func() bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "_data", Value: strings.Repeat("8", tokenBytes-17)}})
	if err != nil {
		panic(err)
	}
	return b
}()

// SaveCheckpoint implements resume.Store (one update).
func (s *Store) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	defer s.cpuSpan()()
	t := time.Now()
	err := s.inner.SaveCheckpoint(ctx, cp)
	s.charge(call{rt: 1, writesDocs: 1, writeBytes: CheckpointWriteSize(cp), examDocs: 1, inner: time.Since(t)})
	if s.OnSaved != nil {
		s.OnSaved()
	}
	return err
}

// Open implements watch.Feed: a stream whose events are counted (and
// delayed by a round trip per getMore that returns events).
func (s *Store) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	defer s.cpuSpan()()
	st, err := s.inner.Open(ctx, at)
	if err != nil {
		return nil, err
	}
	s.charge(call{read: true, rt: 1})
	return &stream{s: s, inner: st}, nil
}

type stream struct {
	s     *Store
	inner watch.Stream
	// buffered is the events of the last getMore reply not delivered yet:
	// at 0, the next event is another getMore's reply.
	buffered int
}

// pending is what a getMore sent now would return: every event the inner
// stream has (memstore's Pending), or just the one at hand.
func (st *stream) pending() int {
	if p, ok := st.inner.(interface{ Pending() int }); ok {
		return p.Pending()
	}
	return 0
}

// EventSize is the BSON size of e as watch.Pipeline projects it, with a
// MongoDB-sized resume token: Back-End's integers (a problem's _id, a
// submission's problem) as int32. A half of a submission's pair whose
// value does not decode is not counted (the Event does not hold it).
func EventSize(e watch.Event) int64 {
	c := e.Change
	d := bson.D{
		{Key: "operationType", Value: string(c.Op)},
		{Key: "clusterTime", Value: e.ClusterTime},
		{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: c.Collection}}},
	}
	var key any
	switch c.Collection {
	case materialize.CollSubmission:
		key = c.SubmissionID
	case materialize.CollHomework:
		key = c.HomeworkID
	case materialize.CollProblem:
		key = int32(c.ProblemID)
	default:
		key = c.UserID
	}
	d = append(d, bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: key}}})
	halves := func(m materialize.Move) bson.D {
		h := bson.D{}
		if m.HasUser {
			h = append(h, bson.E{Key: "user", Value: m.User})
		}
		if m.HasProblem {
			h = append(h, bson.E{Key: "problem", Value: int32(m.Problem)})
		}
		return h
	}
	switch {
	case c.Op == materialize.OpInsert || c.Op == materialize.OpReplace:
		// fullDocument reduced to user and problem: {} for a document
		// that has neither (every user, homework and problem).
		fd := halves(c.Move)
		if c.HasPair {
			fd = halves(materialize.Move{User: c.Pair.User, HasUser: true, Problem: c.Pair.Problem, HasProblem: true})
		}
		d = append(d, bson.E{Key: "fullDocument", Value: fd})
	case c.Op == materialize.OpUpdate && c.Collection == materialize.CollSubmission && (c.Move.HasUser || c.Move.HasProblem):
		d = append(d, bson.E{Key: "moved", Value: halves(c.Move)})
	}
	if c.Fields != nil {
		d = append(d, bson.E{Key: "changedFields", Value: c.Fields})
	}
	if e.Values != nil {
		// derivedValues: on every update of a user or homework that set
		// at most watch.MaxDerivedValues fields ([] when it set no
		// derived path); DecodeEvent leaves Values nil when it is absent.
		vals := bson.A{}
		for _, v := range e.Values {
			vals = append(vals, bson.D{{Key: "k", Value: v.Path}, {Key: "v", Value: v.Value}})
		}
		d = append(d, bson.E{Key: "derivedValues", Value: vals})
	}
	return size(d) + tokenBytes + 5 // "_id" element: type byte, "_id\x00", the token document
}

// Next implements watch.Stream.
func (st *stream) Next(ctx context.Context) (watch.Event, bool, error) {
	defer st.s.cpuSpan()()
	t := time.Now()
	last := t // the start of the inner call that answered: waiting is no store work
	ev, ok, err := st.inner.Next(ctx)
	for err == nil && !ok && time.Since(t) < st.s.model.Await && ctx.Err() == nil {
		time.Sleep(200 * time.Microsecond)
		last = time.Now()
		ev, ok, err = st.inner.Next(ctx)
	}
	if err != nil || !ok {
		st.buffered = 0
		st.s.flushOwed()
		if st.s.OnQuiet != nil {
			st.s.OnQuiet()
		}
		return ev, ok, err
	}
	c := call{read: false, inner: time.Since(last), events: 1}
	c.eventBytes = EventSize(ev)
	c.bytes = c.eventBytes
	c.docs = 0
	if st.buffered == 0 {
		// The driver's batch is exhausted: this event comes with a
		// getMore, whose reply holds every event the server has by now
		// (a getMore on a change stream returns as soon as it has one).
		c.rt = 1
		st.buffered = 1 + st.pending()
	}
	st.buffered--
	st.s.charge(c)
	if st.s.OnEvent != nil {
		st.s.OnEvent(ev)
	}
	return ev, ok, err
}

func (st *stream) ResumeToken() bson.Raw           { return st.inner.ResumeToken() }
func (st *stream) Close(ctx context.Context) error { return st.inner.Close(ctx) }

// Tags of the parts of the adapter's Read (mongodb/read.go): each
// document of its one aggregate is a part's document wrapped as
// {p: <tag>, d: <document>}.
const (
	partSubmissions = "s"
	partUserStats   = "t"
	partUsers       = "u"
	partProblems    = "p"
	partHomeworks   = "h"
)

// wrapBytes is what wrapping a document as {p: tag, d: <document>} adds
// to its BSON size.
func wrapBytes(tag string) int64 {
	return size(bson.D{{Key: "p", Value: tag}, {Key: "d", Value: bson.D{}}}) - size(bson.D{})
}

// oneReplyRoundTrips is the round trips of a read whose cursor batch size
// has no count limit (the adapter's Read: readBatchSize): the first reply
// holds up to 16 MiB, each getMore 16 MiB more.
func oneReplyRoundTrips(bytes int64) int64 {
	return max(1, (bytes+getMoreSize-1)/getMoreSize)
}

// Read implements watch.Source as the adapter answers it (mongodb.DB.Read):
// one aggregate returning every part's documents, each as the part's own
// read shapes it, wrapped as {p, d}, in one reply (its batch size has no
// count limit: a getMore only past 16 MiB); the server examines what each
// part's read would. A part of more than one query's terms (500) is
// answered one call per part instead (watch.ReadSeparately), each charged
// as its method; a Read of no part costs nothing.
func (s *Store) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	pairs := make(map[materialize.Pair]bool, len(r.Pairs))
	for _, p := range r.Pairs {
		pairs[p] = true
	}
	if len(pairs) > queryTerms || len(r.Users) > queryTerms || len(r.Problems) > queryTerms || len(r.Homeworks) > queryTerms {
		return watch.ReadSeparately(ctx, s, r)
	}
	if len(r.Pairs) == 0 && len(r.Users) == 0 && len(r.Problems) == 0 && len(r.Homeworks) == 0 {
		return &watch.ReadResult{}, nil
	}
	defer s.cpuSpan()()
	t := time.Now()
	res, err := s.inner.Read(ctx, r)
	if res == nil {
		res = &watch.ReadResult{}
	}
	c := call{read: true}
	add := func(part string, pc call) {
		c.docs += pc.docs
		c.bytes += pc.bytes + pc.docs*wrapBytes(part)
		c.examDocs += pc.examDocs
		c.examBytes += pc.examBytes
		c.examKeys += pc.examKeys
	}
	if len(r.Pairs) > 0 {
		add(partSubmissions, s.coveredSubmissionsCost(nil, r.Pairs, res.Submissions))
	}
	if len(r.Users) > 0 {
		add(partUserStats, s.userStatsCost(r.Users, res.Stats))
		add(partUsers, s.usersCost(res.Users))
	}
	if len(r.Problems) > 0 {
		add(partProblems, s.problemsCost(foundProblems(res.Problems), 1))
	}
	if len(r.Homeworks) > 0 {
		add(partHomeworks, s.homeworksCost(res.Homeworks, r.HomeworkUsers))
	}
	c.rt = oneReplyRoundTrips(c.bytes)
	c.inner = time.Since(t)
	s.charge(c)
	if err != nil {
		return nil, err
	}
	return res, nil
}
