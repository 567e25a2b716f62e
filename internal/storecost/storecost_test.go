package storecost

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// readWorld is n users and n problems, each problem in one of two
// homeworks, and a submission of user u0 to each problem.
func readWorld(t *testing.T, n int) (*memstore.Store, *watch.Reads) {
	t.Helper()
	st := memstore.New()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hws := []bson.ObjectID{{11: 1}, {11: 2}}
	r := &watch.Reads{Homeworks: hws}
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		must(t, st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
		must(t, st.Load(materialize.CollProblem, mtest.Raw("_id", int32(i+1), "homeworks", bson.A{hws[i%2]})))
		must(t, st.Load(materialize.CollSubmission, mtest.Raw("_id", bson.ObjectID{10: byte(i >> 8), 11: byte(i)}, "user", "u0", "problem", int32(i+1),
			"languageType", int32(1), "timestamp", bson.NewDateTimeFromTime(end.Add(-time.Hour)), "status", int32(0), "score", int32(100))))
		r.Pairs = append(r.Pairs, materialize.Pair{User: "u0", Problem: int64(i + 1)})
		r.Users = append(r.Users, u)
		r.Problems = append(r.Problems, int64(i+1))
		r.HomeworkUsers = append(r.HomeworkUsers, u)
	}
	for _, h := range hws {
		must(t, st.Load(materialize.CollHomework, mtest.Raw("_id", h, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
			"studentStatus", mtest.D("u0", mtest.D("1", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))))
	}
	return st, r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadCountsOneRoundTrip: a Read is one round trip (named "Read"),
// one read call, returning what its parts' separate reads return, each
// document wrapped as {p: <tag>, d: <document>} (16 bytes and the tag
// more), in one reply however many documents (the adapter's batch size
// has no count limit, where each separate read past 101 documents costs a
// getMore); the server examines what the parts' reads do. A part of more
// than 500 terms is read separately; a Read of nothing costs nothing.
func TestReadCountsOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		n          int
		roundTrips int64
	}{
		{n: 3, roundTrips: 1},   // 3 submissions, 1 user's stats, 3 users, 3 problems, 2 homeworks
		{n: 30, roundTrips: 1},  // 30 + 1 + 30 + 30 + 2 + 10 homeworks added below = 103
		{n: 120, roundTrips: 1}, // 120 + 1 + 120 + 120 + 2: each part but two past the first batch
	} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			st, r := readWorld(t, c.n)
			s := New(st, Model{})
			// The parts, each read separately.
			var docs, bytes, wrap, examDocs, examBytes int64
			part := func(name string, read func()) {
				before := s.Counts()
				read()
				d := s.Counts().Sub(before)
				docs += d.DocsRead
				bytes += d.BytesRead
				wrap += d.DocsRead * int64(16+len(name))
				examDocs += d.ExaminedDocs
				examBytes += d.ExaminedBytes
			}
			part(partSubmissions, func() { _, _, err := s.Submissions(ctx, nil, r.Pairs); must(t, err) })
			part(partUserStats, func() { _, _, err := s.UserStats(ctx, r.Users); must(t, err) })
			part(partUsers, func() { _, err := s.Users(ctx, r.Users); must(t, err) })
			part(partProblems, func() { _, _, err := s.Problems(ctx, r.Problems); must(t, err) })
			part(partHomeworks, func() { _, _, err := s.Homeworks(ctx, r.Homeworks, r.HomeworkUsers); must(t, err) })
			if c.n == 120 {
				for _, call := range []string{"Submissions", "Users", "Problems"} {
					if s.Counts().ByCall[call] != 2 {
						t.Errorf("%s read separately: %d round trips, want 2 (a getMore past 101 documents)", call, s.Counts().ByCall[call])
					}
				}
			}
			if c.n == 30 {
				// Push the total past 101: the homeworks part again.
				r.Homeworks = append(r.Homeworks, bson.ObjectID{11: 3})
				for i := range 10 {
					h := bson.ObjectID{10: 1, 11: byte(i)}
					must(t, st.Load(materialize.CollHomework, mtest.Raw("_id", h, "studentStatus", mtest.D())))
					r.Homeworks = append(r.Homeworks, h)
					part(partHomeworks, func() { _, _, err := s.Homeworks(ctx, []bson.ObjectID{h}, r.HomeworkUsers); must(t, err) })
				}
			}
			want, err := s.Read(ctx, r)
			must(t, err)
			before := s.Counts()
			got, err := s.Read(ctx, r)
			must(t, err)
			d := s.Counts().Sub(before)
			if len(got.Submissions) != len(want.Submissions) || len(got.Homeworks) != len(want.Homeworks) {
				t.Fatalf("Read answered differently twice")
			}
			if d.RoundTrips != c.roundTrips || d.ByCall["Read"] != c.roundTrips || len(d.ByCall) != 1 || d.ReadCalls != 1 {
				t.Errorf("Read: %d round trips %v, %d read calls; want %d, all Read, one call", d.RoundTrips, d.ByCall, d.ReadCalls, c.roundTrips)
			}
			if d.DocsRead != docs || d.BytesRead != bytes+wrap {
				t.Errorf("Read: %d documents, %d bytes; want the parts' %d, %d + %d wrapping", d.DocsRead, d.BytesRead, docs, bytes, wrap)
			}
			if d.ExaminedDocs != examDocs || d.ExaminedBytes != examBytes {
				t.Errorf("Read: server examined %d documents, %d bytes; want the parts' %d, %d", d.ExaminedDocs, d.ExaminedBytes, examDocs, examBytes)
			}
			if c.n == 30 && docs <= firstBatch {
				t.Errorf("%d documents: the case does not pass the first batch", docs)
			}
		})
	}
	t.Run("a part past one query", func(t *testing.T) {
		st, r := readWorld(t, 3)
		for i := range 600 {
			r.Pairs = append(r.Pairs, materialize.Pair{User: "nobody", Problem: int64(1000 + i)})
		}
		s := New(st, Model{})
		if _, err := s.Read(ctx, r); err != nil {
			t.Fatal(err)
		}
		c := s.Counts()
		if c.ByCall["Read"] != 0 || c.ByCall["Submissions"] != 2 || c.ByCall["Homeworks"] != 1 {
			t.Errorf("round trips by call %v, want the parts read separately (Submissions in two queries)", c.ByCall)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		st, _ := readWorld(t, 1)
		s := New(st, Model{})
		if _, err := s.Read(ctx, &watch.Reads{}); err != nil {
			t.Fatal(err)
		}
		if c := s.Counts(); c.RoundTrips != 0 || c.ReadCalls != 0 {
			t.Errorf("an empty Read: %d round trips, %d read calls; want none", c.RoundTrips, c.ReadCalls)
		}
	})
}

// TestEventBytesSleptPerReply: the bytes of the change events of one
// getMore reply are slept for together (at the next call with a round
// trip, a quiet poll, or once a millisecond is owed), not event by event:
// the OS's overhead of each tiny sleep (tens of µs, more than an event's
// 8 ns/byte) is no part of the model, and at 1,000 landings/s it was most
// of the measured staleness. The model's total time is unchanged.
func TestEventBytesSleptPerReply(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	for i := range 50 {
		must(t, st.Insert(materialize.CollUser, mtest.Raw("_id", fmt.Sprintf("u%d", i), "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	model := Model{RTT: time.Millisecond, PerByte: 8 * time.Nanosecond}
	cs := New(st, model)
	var slept []time.Duration
	cs.sleep = func(d time.Duration) { slept = append(slept, d) }
	s, err := cs.Open(ctx, watch.Position{StartAt: bson.Timestamp{T: 1, I: 1}})
	must(t, err)
	n := 0
	for {
		_, ok, err := s.Next(ctx)
		must(t, err)
		if !ok {
			break
		}
		n++
	}
	if n != 50 {
		t.Fatalf("events: got %d, want 50", n)
	}
	var total time.Duration
	for _, d := range slept {
		total += d
	}
	c := cs.Counts()
	if total != c.Model {
		t.Errorf("slept %v in all, the model charged %v", total, c.Model)
	}
	// The open's round trip, the reply's (the first event), and the rest
	// of the 50 events' bytes (~100 each at 8 ns/byte) at the quiet poll.
	if len(slept) != 3 {
		t.Errorf("slept %d times for one reply of %d events (%v), want 3", len(slept), n, slept)
	}
}

// TestGetMorePerDrainedReply: a getMore reply holds every event the
// server has when it is sent; once the engine has taken them all, its next
// event is another getMore's reply, whether or not a poll found the
// stream quiet in between (the driver's TryNext sends a getMore whenever
// its batch is exhausted): events that trickle in one by one cost a round
// trip each, a backlog one for all.
func TestGetMorePerDrainedReply(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	cs := New(st, Model{})
	s, err := cs.Open(ctx, watch.Position{StartAt: bson.Timestamp{T: 1, I: 1}})
	must(t, err)
	insert := func(i int) {
		must(t, st.Insert(materialize.CollUser, mtest.Raw("_id", fmt.Sprintf("u%d", i), "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	next := func() {
		t.Helper()
		if _, ok, err := s.Next(ctx); err != nil || !ok {
			t.Fatalf("Next: %v %v", ok, err)
		}
	}
	base := cs.Counts().RoundTrips
	for i := range 3 { // one by one: three replies
		insert(i)
		next()
	}
	if got := cs.Counts().RoundTrips - base; got != 3 {
		t.Errorf("3 events arriving one by one: %d round trips, want 3", got)
	}
	for i := 3; i < 10; i++ { // a backlog of 7: one reply
		insert(i)
	}
	for range 7 {
		next()
	}
	if got := cs.Counts().RoundTrips - base; got != 4 {
		t.Errorf("then a backlog of 7: %d round trips in all, want 4", got)
	}
}

// TestReadExaminesNoSubmission: the reads of a landing (the pairs'
// submissions, the users' counts) examine the covering index's entries,
// not the submissions: the server examines only the users, problems and
// homeworks, and the same bytes however large the submissions (Back-End
// stores every case's result in them).
func TestReadExaminesNoSubmission(t *testing.T) {
	ctx := context.Background()
	examined := func(big bool) Counts {
		st, r := readWorld(t, 3)
		if big {
			for _, raw := range st.Collection(materialize.CollSubmission) {
				var d bson.D
				must(t, bson.Unmarshal(raw, &d))
				d = append(d, bson.E{Key: "tasks", Value: bson.A{bson.D{{Key: "cases", Value: bson.A{string(make([]byte, 4096))}}}}})
				b, err := bson.Marshal(d)
				must(t, err)
				must(t, st.Load(materialize.CollSubmission, b))
			}
		}
		s := New(st, Model{})
		_, err := s.Read(ctx, r)
		must(t, err)
		return s.Counts()
	}
	small, big := examined(false), examined(true)
	// 3 users, 3 problems and 2 homeworks; u0's 3 submissions are 3
	// entries for the pairs and 3 for u0's counts.
	if small.ExaminedDocs != 8 || small.ExaminedKeys != 6 {
		t.Errorf("Read examined %d documents, %d index entries; want 8 (no submission), 6", small.ExaminedDocs, small.ExaminedKeys)
	}
	if big.ExaminedBytes != small.ExaminedBytes {
		t.Errorf("Read examined %d bytes with 4 KiB more per submission, %d without; want the same", big.ExaminedBytes, small.ExaminedBytes)
	}
}
