package offline

import (
	"context"
	"os"
	"testing"

	"github.com/normal-oj/noj-materializer/dump"
)

// BenchmarkRunDump runs Run on the dump named by OFFLINE_BENCH_DUMP (with
// an output under OFFLINE_BENCH_OUT when set), for profiling:
//
//	OFFLINE_BENCH_DUMP=/tmp/noj-offline-bench/university-1000000 \
//	  go test -run '^$' -bench RunDump -benchtime 1x -cpuprofile cpu.prof ./offline/
//
// make bench-offline measures whole processes against a floor instead.
func BenchmarkRunDump(b *testing.B) {
	dir := os.Getenv("OFFLINE_BENCH_DUMP")
	if dir == "" {
		b.Skip("OFFLINE_BENCH_DUMP not set")
	}
	d, err := dump.Resolve(dir, "normal-oj")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		out := os.Getenv("OFFLINE_BENCH_OUT")
		if out != "" {
			if err := os.RemoveAll(out); err != nil {
				b.Fatal(err)
			}
		}
		rep, err := Run(context.Background(), d, Options{Out: out})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Submissions), "submissions")
	}
}
