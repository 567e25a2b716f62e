package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock advances only when told to.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestReporterInterval(t *testing.T) {
	cases := []struct {
		name     string
		total    int64
		steps    []time.Duration // clock advance before each batch of checkEvery Adds
		wantRuns int             // interval reports
	}{
		{"silent before the first interval", 0, []time.Duration{time.Second, time.Second}, 0},
		{"one report per interval", 0, []time.Duration{5 * time.Second, time.Second, 4 * time.Second, 5 * time.Second}, 3},
		{"known total", 10 * checkEvery, []time.Duration{6 * time.Second, 6 * time.Second}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			var got []Status
			r := New(func(s Status) { got = append(got, s) }, clk.now, 5*time.Second, c.total)
			r.Phase("submissions")
			for _, d := range c.steps {
				clk.t = clk.t.Add(d)
				for range checkEvery {
					r.Add(1)
				}
			}
			if len(got) != c.wantRuns {
				t.Fatalf("%d reports, want %d: %+v", len(got), c.wantRuns, got)
			}
			r.Finish()
			if c.wantRuns == 0 {
				if len(got) != 0 {
					t.Fatalf("short work reported at Finish: %+v", got)
				}
				return
			}
			last := got[len(got)-1]
			if !last.Final || last.Done != int64(len(c.steps)*checkEvery) {
				t.Errorf("final report %+v", last)
			}
			first := got[0]
			if first.Phase != "submissions" || first.Rate <= 0 {
				t.Errorf("first report %+v", first)
			}
			if c.total > 0 {
				// 1024 docs in 6 s, 9216 left: 54 s at that rate.
				if first.ETA != 54*time.Second {
					t.Errorf("ETA %s, want 54s", first.ETA)
				}
			} else if first.ETA != 0 {
				t.Errorf("ETA %s with an unknown total", first.ETA)
			}
		})
	}
}

func TestNilReporter(t *testing.T) {
	var r *Reporter
	r.Add(1)
	r.Phase("x")
	r.SetTotal(3)
	r.Finish()
	if r.Done() != 0 {
		t.Fatal("a nil reporter counted")
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	s := Text(&b, "verify")
	s(Status{Phase: "submissions", Done: 1200, Total: 3000, Rate: 400, ETA: 4 * time.Second})
	s(Status{Done: 50, Rate: 10})
	s(Status{Done: 3000, Elapsed: 7300 * time.Millisecond, Rate: 410, Final: true})
	want := "verify: 1200 of 3000 documents (40%), submissions, 400/s, 4s left\n" +
		"verify: 50 documents, 10/s\n" +
		"verify: 3000 documents in 7.3s, 410/s\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	if strings.Count(b.String(), "\n") != 3 {
		t.Error("one line per report")
	}
}
