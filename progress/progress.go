// Package progress reports the progress of long work (a rebuild or verify
// reading millions of documents) at most once per interval: documents
// done, the rate, and the time left when the total is known.
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
	ETA     time.Duration // time left at Rate; 0 when Total is unknown
	Final   bool          // the last report (Finish)
}

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

// Add counts n more documents and reports when an interval has passed
// since the last report.
func (r *Reporter) Add(n int) {
	if r == nil {
		return
	}
	r.done += int64(n)
	r.sinceCheck++
	if r.sinceCheck < checkEvery {
		return
	}
	r.sinceCheck = 0
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
	if r.total > r.done && s.Rate > 0 && !final {
		s.ETA = time.Duration(float64(r.total-r.done) / s.Rate * float64(time.Second)).Round(time.Second)
	}
	return s
}

// Text returns a Sink writing one line per report to w, prefixed with what
// (e.g. "verify"):
//
//	verify: 1200000 of 3000000 documents (40%), submissions, 412000/s, 4s left
//	verify: 3000000 documents in 7.3s, 410000/s
func Text(w io.Writer, what string) Sink {
	return func(s Status) {
		if s.Final {
			fmt.Fprintf(w, "%s: %d documents in %s, %.0f/s\n", what, s.Done, s.Elapsed.Round(100*time.Millisecond), s.Rate)
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
