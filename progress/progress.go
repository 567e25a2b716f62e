// Package progress reports the progress of long work (a rebuild or verify
// reading millions of documents) at most once per interval: documents
// done, the rate, and the time left when the total is known.
//
// Work in phases (Begin) measures each phase in its own unit, bytes of the
// input files or documents, so the total is known when the phase begins
// (the files' sizes), and its time left is computed at the phase's own
// rate. Documents (Add) are counted once, whatever the phase.
//
// A Reporter holds no global state: its clock and its output (a Sink) are
// given to it, so it is tested with a fake clock and a recording sink.
package progress

import (
	"fmt"
	"io"
	"time"
)

// Status is one progress report.
type Status struct {
	Phase   string        // what is being read, e.g. "submissions"
	Done    int64         // documents done so far (all phases)
	Total   int64         // documents expected in all; 0 when unknown
	Elapsed time.Duration // since the Reporter started
	Rate    float64       // documents per second since the start
	// ETA is the time left: of the phase at PhaseRate for a phase begun
	// with a total (Begin), else of all the work at Rate; 0 when the total
	// is unknown.
	ETA   time.Duration
	Final bool // the last report (Finish)

	// A phase begun with Begin: its unit (0 otherwise), units done and
	// expected (0: unknown), units per second since it began, and the
	// documents counted (Add) while it ran.
	Unit       Unit
	PhaseDone  int64
	PhaseTotal int64
	PhaseRate  float64
	PhaseDocs  int64
}

// Unit is what a phase is measured in.
type Unit int

const (
	// Documents: a phase counting documents (or records).
	Documents Unit = iota + 1
	// Bytes: a phase reading or writing files.
	Bytes
)

// bytesCheck is how many bytes a Bytes phase advances between two clock
// reads (large reads advance by megabytes, documents by a few hundred
// bytes).
const bytesCheck = 1 << 20

// Sink receives reports.
type Sink func(Status)

// checkEvery is how many Add calls pass between two clock reads, so that
// counting costs an increment, not a clock read, per document.
const checkEvery = 1024

// Reporter counts documents and calls its Sink at most once per Every.
// A nil *Reporter is valid and reports nothing. It is not safe for
// concurrent use.
type Reporter struct {
	sink  Sink
	now   func() time.Time
	every time.Duration

	phase      string
	done       int64
	total      int64
	sinceCheck int
	start      time.Time
	last       time.Time
	reported   bool

	unit       Unit // the phase begun with Begin (0: none)
	phaseDone  int64
	phaseTotal int64
	phaseDocs  int64
	phaseStart time.Time
	sinceBytes int64
}

// New returns a Reporter calling sink at most once per every (5 s when
// zero), reading time from now (time.Now when nil). total is the number of
// documents expected (0: unknown).
func New(sink Sink, now func() time.Time, every time.Duration, total int64) *Reporter {
	if now == nil {
		now = time.Now
	}
	if every <= 0 {
		every = 5 * time.Second
	}
	t := now()
	return &Reporter{sink: sink, now: now, every: every, total: total, start: t, last: t}
}

// Phase names what the following documents are (reported as is).
func (r *Reporter) Phase(name string) {
	if r != nil {
		r.phase = name
	}
}

// SetTotal sets the number of documents expected in all (0: unknown).
func (r *Reporter) SetTotal(total int64) {
	if r != nil {
		r.total = total
	}
}

// Begin starts a phase measured in unit, total of them expected (0:
// unknown); Advance counts them. When a report was sent before (long
// work), the phase is reported at once: a long phase is never silent.
func (r *Reporter) Begin(phase string, unit Unit, total int64) {
	if r == nil {
		return
	}
	t := r.now()
	r.phase, r.unit, r.phaseTotal, r.phaseDone, r.phaseDocs, r.phaseStart = phase, unit, total, 0, 0, t
	r.sinceCheck, r.sinceBytes = 0, 0
	if r.reported {
		r.last = t
		r.sink(r.status(t, false))
	}
}

// Advance counts n more units of the phase begun with Begin and reports
// when an interval has passed since the last report.
func (r *Reporter) Advance(n int64) {
	if r == nil {
		return
	}
	r.phaseDone += n
	r.sinceCheck++
	r.sinceBytes += n
	if r.sinceCheck < checkEvery && (r.unit != Bytes || r.sinceBytes < bytesCheck) {
		return
	}
	r.check()
}

// Add counts n more documents and reports when an interval has passed
// since the last report.
func (r *Reporter) Add(n int) {
	if r == nil {
		return
	}
	r.done += int64(n)
	r.phaseDocs += int64(n)
	r.sinceCheck++
	if r.sinceCheck < checkEvery {
		return
	}
	r.check()
}

func (r *Reporter) check() {
	r.sinceCheck, r.sinceBytes = 0, 0
	if t := r.now(); t.Sub(r.last) >= r.every {
		r.last = t
		r.reported = true
		r.sink(r.status(t, false))
	}
}

// Finish sends a final report, but only when an interval report was sent
// before: short work stays silent.
func (r *Reporter) Finish() {
	if r == nil || !r.reported {
		return
	}
	r.sink(r.status(r.now(), true))
}

// Done returns the number of documents counted so far.
func (r *Reporter) Done() int64 {
	if r == nil {
		return 0
	}
	return r.done
}

func (r *Reporter) status(t time.Time, final bool) Status {
	s := Status{Phase: r.phase, Done: r.done, Total: r.total, Elapsed: t.Sub(r.start), Final: final}
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.Rate = float64(r.done) / secs
	}
	if r.unit != 0 && !final {
		s.Unit, s.PhaseDone, s.PhaseTotal, s.PhaseDocs = r.unit, r.phaseDone, r.phaseTotal, r.phaseDocs
		if secs := t.Sub(r.phaseStart).Seconds(); secs > 0 {
			s.PhaseRate = float64(r.phaseDone) / secs
		}
		if r.phaseTotal > r.phaseDone && s.PhaseRate > 0 {
			s.ETA = time.Duration(float64(r.phaseTotal-r.phaseDone) / s.PhaseRate * float64(time.Second)).Round(time.Second)
		}
		return s
	}
	if r.total > r.done && s.Rate > 0 && !final {
		s.ETA = time.Duration(float64(r.total-r.done) / s.Rate * float64(time.Second)).Round(time.Second)
	}
	return s
}

// Text returns a Sink writing one line per report to w, prefixed with what
// (e.g. "verify"):
//
//	verify: 1200000 of 3000000 documents (40%), submissions, 412000/s, 4s left
//	verify: reading submissions: 412.0 MiB of 1.2 GiB (34%), 1200000 documents, 98.0 MiB/s, 8s left
//	verify: deriving: 600000 of 3000000 documents (20%), 300000/s, 8s left
//	verify: 3000000 documents in 7.3s, 410000/s
func Text(w io.Writer, what string) Sink {
	return func(s Status) {
		if s.Final {
			fmt.Fprintf(w, "%s: %d documents in %s, %.0f/s\n", what, s.Done, s.Elapsed.Round(100*time.Millisecond), s.Rate)
			return
		}
		if s.Unit != 0 {
			fmt.Fprintln(w, phaseLine(what, s))
			return
		}
		line := fmt.Sprintf("%s: %d", what, s.Done)
		if s.Total > 0 {
			line += fmt.Sprintf(" of %d documents (%d%%)", s.Total, s.Done*100/s.Total)
		} else {
			line += " documents"
		}
		if s.Phase != "" {
			line += ", " + s.Phase
		}
		line += fmt.Sprintf(", %.0f/s", s.Rate)
		if s.ETA > 0 {
			line += fmt.Sprintf(", %s left", s.ETA)
		}
		fmt.Fprintln(w, line)
	}
}

// phaseLine is the text of a report of a phase begun with Begin.
func phaseLine(what string, s Status) string {
	amount, rate := func(n int64) string { return fmt.Sprintf("%d", n) }, fmt.Sprintf("%.0f/s", s.PhaseRate)
	if s.Unit == Bytes {
		amount, rate = formatBytes, formatBytes(int64(s.PhaseRate))+"/s"
	}
	line := fmt.Sprintf("%s: %s: %s", what, s.Phase, amount(s.PhaseDone))
	if s.PhaseTotal > 0 {
		line += fmt.Sprintf(" of %s", amount(s.PhaseTotal))
	}
	if s.Unit == Documents {
		line += " documents"
	}
	if s.PhaseTotal > 0 {
		line += fmt.Sprintf(" (%d%%)", s.PhaseDone*100/s.PhaseTotal)
	}
	if s.Unit == Bytes && s.PhaseDocs > 0 {
		line += fmt.Sprintf(", %d documents", s.Done)
	}
	line += ", " + rate
	if s.ETA > 0 {
		line += fmt.Sprintf(", %s left", s.ETA)
	}
	return line
}

// formatBytes is n in binary units with one decimal (412.0 MiB).
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
