package materialize_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// benchWorld is the scale: 1,000,000 submissions over 20,000
// users, 500 problems and 100 homeworks. Users are in 100 courses of 200;
// each course has one homework of 5 problems (every problem in exactly one
// homework), every student has an entry for each of its 5 problems, and
// submits 50 times over them. Submissions come grouped by (user, problem)
// in the rebuild scan's order.
type benchWorld struct {
	cat    *materialize.Catalog
	users  []string
	groups [][]materialize.Submission
}

func newBenchWorld(users, problems, homeworks, subs int) *benchWorld {
	r := rand.New(rand.NewPCG(7, 11))
	w := &benchWorld{cat: materialize.NewCatalog()}
	perHW := problems / homeworks
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	penalties := []string{"score = score * 0.8 ** overtime", "if overtime > 3:\n    score = 0\nelse:\n    score = score * (1 - overtime * 0.1)"}
	hwIDs := make([]bson.ObjectID, homeworks)
	for h := range hwIDs {
		hwIDs[h] = bson.NewObjectIDFromTimestamp(time.Unix(int64(1_700_000_000+h), 0))
		for k := 0; k < perHW; k++ {
			p := int64(h*perHW + k + 1)
			w.cat.AddProblem(materialize.Problem{ID: p, Homeworks: []bson.ObjectID{hwIDs[h]}})
		}
	}
	students := make([]map[string]map[string]struct{}, homeworks)
	for h := range students {
		students[h] = make(map[string]map[string]struct{})
	}
	w.users = make([]string, users)
	for u := range w.users {
		w.users[u] = "student" + strconv.Itoa(u)
		h := u % homeworks
		set := make(map[string]struct{}, perHW)
		for k := 0; k < perHW; k++ {
			set[strconv.Itoa(h*perHW+k+1)] = struct{}{}
		}
		students[h][w.users[u]] = set
	}
	for h, id := range hwIDs {
		w.cat.AddHomework(materialize.Homework{ID: id, End: end, Penalty: penalties[h%len(penalties)], Students: students[h]})
	}
	perUser := subs / users
	perPair := perUser / perHW
	seq := uint32(0)
	for u, name := range w.users {
		h := u % homeworks
		for k := 0; k < perHW; k++ {
			p := int64(h*perHW + k + 1)
			g := make([]materialize.Submission, perPair)
			for i := range g {
				seq++
				ts := end - 10*86_400_000 + r.Int64N(20*86_400_000) // half of them late
				var id bson.ObjectID
				id[0], id[1], id[2], id[3] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
				st := int64(r.IntN(8))
				score := int64(r.IntN(11) * 10)
				if st == 0 {
					score = 100
				}
				g[i] = materialize.Submission{ID: id, User: name, Problem: p, Timestamp: ts, Status: st, Score: score}
			}
			materialize.SortSubmissions(g)
			w.groups = append(w.groups, g)
		}
	}
	return w
}

// countSink counts what a derivation emits, holding nothing.
type countSink struct{ users, entries int }

func (s *countSink) User(string, materialize.UserStats) error { s.users++; return nil }
func (s *countSink) Entry(bson.ObjectID, string, string, materialize.Entry) error {
	s.entries++
	return nil
}

// BenchmarkDerive is one full derivation of 1,000,000 grouped submissions
// over 20,000 users, 500 problems and 100 homeworks, on one core. It
// reports the time per derivation and the bytes allocated. The builder
// holds the catalog, one group, the users seen and the pairs covered, never
// the submissions already consumed.
func BenchmarkDerive(b *testing.B) {
	w := newBenchWorld(20_000, 500, 100, 1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	var sink countSink
	for b.Loop() {
		sink = countSink{}
		bl := materialize.NewBuilder(materialize.NewDeriver(), w.cat, &sink)
		for _, g := range w.groups {
			if err := bl.Group(g[0].User, g[0].Problem, g); err != nil {
				b.Fatal(err)
			}
		}
		if err := bl.Finish(w.users); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(sink.entries), "entries")
}

// BenchmarkDerivePair is the per-key cost in the daemon: one (user,
// problem) group of 10 submissions through 1 homework.
func BenchmarkDerivePair(b *testing.B) {
	w := newBenchWorld(200, 5, 1, 10_000)
	d := materialize.NewDeriver()
	g := w.groups[0]
	hws := w.cat.Visited(g[0].Problem)
	b.ReportAllocs()
	for b.Loop() {
		d.Pair(g[0].User, g[0].Problem, g, hws)
	}
}

// TestBuilderMemoryIsBoundedByGroups checks the streaming claim at the
// pure level: the builder keeps no submission after its group is done.
func TestBuilderMemoryIsBoundedByGroups(t *testing.T) {
	w := newBenchWorld(400, 10, 2, 20_000)
	var sink countSink
	bl := materialize.NewBuilder(materialize.NewDeriver(), w.cat, &sink)
	for _, g := range w.groups {
		if err := bl.Group(g[0].User, g[0].Problem, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := bl.Finish(w.users); err != nil {
		t.Fatal(err)
	}
	if sink.users != 400 || sink.entries != 400*5 {
		t.Fatalf("users %d entries %d, want 400 and 2000", sink.users, sink.entries)
	}
	// Groups of one user must be contiguous: a user seen again is an error.
	bl = materialize.NewBuilder(materialize.NewDeriver(), w.cat, &countSink{})
	g0 := w.groups[0]
	if err := bl.Group(g0[0].User, g0[0].Problem, g0); err != nil {
		t.Fatal(err)
	}
	g1 := w.groups[len(w.groups)-1]
	if err := bl.Group(g1[0].User, g1[0].Problem, g1); err != nil {
		t.Fatal(err)
	}
	if err := bl.Group(g0[0].User, g0[0].Problem, g0); err == nil {
		t.Fatal("a user's groups out of order were accepted")
	}
}
