package progress

import (
	"bytes"
	"testing"
	"time"
)

// TestReporterPhases: a phase begun with its total in bytes (the input
// files' sizes, known before reading) has a time left from its first
// report, computed at the phase's own rate (so an earlier slower phase
// does not inflate it); documents are counted once, whatever the phases;
// a phase begun after a report is announced at once (a long writing
// phase is never silent).
func TestReporterPhases(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var got []Status
	r := New(func(s Status) { got = append(got, s) }, clk.now, 5*time.Second, 0)

	// Reading: 100 MB in all, 10 MB/s, one 64 KiB document at a time.
	const mb = 1 << 20
	r.Begin("reading submissions", Bytes, 100*mb)
	for range 60 * 16 { // 60 MB in 6 s
		clk.t = clk.t.Add(time.Second / 160)
		r.Add(1)
		r.Advance(mb / 16)
	}
	if len(got) != 1 {
		t.Fatalf("%d reports after 6 s of reading, want 1: %+v", len(got), got)
	}
	first := got[0]
	if first.Unit != Bytes || first.PhaseTotal != 100*mb || first.PhaseDone < 50*mb {
		t.Errorf("first report %+v", first)
	}
	// 5 s in, 50 MB read, 50 MB left at 10 MB/s.
	if first.ETA != 5*time.Second {
		t.Errorf("time left %s, want 5s", first.ETA)
	}
	for range 40 * 16 {
		clk.t = clk.t.Add(time.Second / 160)
		r.Add(1)
		r.Advance(mb / 16)
	}
	// Deriving: 1600 documents at 100/s, ten times slower than reading.
	r.Begin("deriving", Documents, 1600)
	if last := got[len(got)-1]; last.Phase != "deriving" || last.PhaseDone != 0 || last.Final {
		t.Errorf("the phase was not announced: %+v", got[len(got)-1])
	}
	n := len(got)
	for range 1600 {
		clk.t = clk.t.Add(time.Second / 100)
		r.Advance(1)
	}
	if len(got) == n {
		t.Fatal("no report while deriving")
	}
	d := got[n]
	// 10.24 s in, 1024 done at 100/s, 576 left: 5.76 s.
	if d.Phase != "deriving" || d.PhaseDone != 1024 || d.ETA != 6*time.Second {
		t.Errorf("deriving report %+v, want 1024 done, 6s left", d)
	}
	r.Begin("writing", Bytes, 0) // unknown total: no time left
	r.Finish()
	last := got[len(got)-1]
	if !last.Final || last.Done != 1600 {
		t.Errorf("final %+v: want 1600 documents, each counted once", last)
	}
}

func TestTextPhases(t *testing.T) {
	var b bytes.Buffer
	s := Text(&b, "rebuild")
	s(Status{Phase: "reading submissions", Unit: Bytes, PhaseDone: 412 << 20, PhaseTotal: 1200 << 20, PhaseRate: 98 << 20, Done: 1200000, PhaseDocs: 1200000, ETA: 8 * time.Second})
	s(Status{Phase: "deriving", Unit: Documents, PhaseDone: 600000, PhaseTotal: 3000000, PhaseRate: 300000, Done: 3000000, ETA: 8 * time.Second})
	s(Status{Phase: "writing", Unit: Bytes, PhaseDone: 3 << 30, Done: 3000000})
	want := "rebuild: reading submissions: 412.0 MiB of 1.2 GiB (34%), 1200000 documents, 98.0 MiB/s, 8s left\n" +
		"rebuild: deriving: 600000 of 3000000 documents (20%), 300000/s, 8s left\n" +
		"rebuild: writing: 3.0 GiB, 0 B/s\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
