package explain

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/internal/memstore"
)

// BenchmarkExplainDump explains one pair of a demo dump (2,000 users,
// 100,000 submissions) two ways in one invocation: "stream", ReadDump as
// explain --dump reads; "memstore", the dump loaded into memstore first,
// as explain --dump read it before. retained-B is the heap the read holds
// when Explain runs (after a GC): the streaming read's is bounded by the
// user's submissions, memstore's is the whole dump.
func BenchmarkExplainDump(b *testing.B) {
	docs := demo.Generate(demo.Params{Users: 2000, Problems: 50, Homeworks: 10, Submissions: 100_000, Seed: 1})
	root := b.TempDir()
	if err := dump.Write(root, docs); err != nil {
		b.Fatal(err)
	}
	d, err := dump.Resolve(root, "normal-oj")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// A pair with entries and submissions: a student of a course and one
	// of its problems.
	user, problem := pairWithSubmissions(b, docs)
	run := func(b *testing.B, read func() (*Input, any)) {
		b.ReportAllocs()
		var retained uint64
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			in, keep := read()
			runtime.GC()
			runtime.ReadMemStats(&after)
			if after.HeapAlloc > before.HeapAlloc {
				retained = max(retained, after.HeapAlloc-before.HeapAlloc)
			}
			ex, err := Explain(in)
			if err != nil {
				b.Fatal(err)
			}
			if len(ex.Submissions) == 0 || len(ex.Entries) == 0 { // pairWithSubmissions failed
				b.Fatalf("%s %d: %d submissions, %d entries: pick a pair with both", user, problem, len(ex.Submissions), len(ex.Entries))
			}
			runtime.KeepAlive(keep)
		}
		b.ReportMetric(float64(retained), "retained-B")
	}
	b.Run("stream", func(b *testing.B) {
		run(b, func() (*Input, any) {
			in, err := ReadDump(ctx, d, user, problem)
			if err != nil {
				b.Fatal(err)
			}
			return in, nil
		})
	})
	b.Run("memstore", func(b *testing.B) {
		run(b, func() (*Input, any) {
			st := memstore.New()
			for _, coll := range dump.Sources {
				var ds []bson.Raw
				if err := d.Each(coll, true, func(doc bson.Raw) error { ds = append(ds, bytes.Clone(doc)); return nil }); err != nil {
					b.Fatal(err)
				}
				if err := st.Load(coll, ds...); err != nil {
					b.Fatal(err)
				}
			}
			in, err := Read(ctx, st, user, problem)
			if err != nil {
				b.Fatal(err)
			}
			return in, st
		})
	})
}

// pairWithSubmissions returns the first (user, problem) holding an entry
// in a homework and a submission.
func pairWithSubmissions(b *testing.B, docs map[string][]bson.Raw) (string, int64) {
	subs := map[string]bool{}
	for _, s := range docs["submission"] {
		subs[s.Lookup("user").StringValue()+"/"+strconv.FormatInt(s.Lookup("problem").AsInt64(), 10)] = true
	}
	for _, h := range docs["homework"] {
		ss, _ := h.Lookup("studentStatus").DocumentOK()
		us, _ := ss.Elements()
		for _, u := range us {
			ps, _ := u.Value().Document().Elements()
			for _, p := range ps {
				if subs[u.Key()+"/"+p.Key()] {
					n, _ := strconv.ParseInt(p.Key(), 10, 64)
					return u.Key(), n
				}
			}
		}
	}
	b.Fatal("no pair with an entry and a submission")
	return "", 0
}
