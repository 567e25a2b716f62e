// Command onlinebench measures what the online path costs MongoDB per
// landing and how stale a score gets (make bench-online): a deadline rush
// on the university shape (demo.NewRush: one course, its homework, the
// patched Back-End writing only the submission) runs through the engine
// over the in-memory store wrapped in storecost's counting decorator, which
// charges a round-trip time per round trip and a cost per byte. It prints,
// per landing, round trips, documents and bytes read, writes and bytes
// written, and the staleness from the submission's change event to the
// acknowledged derived write, next to the Back-End's own finish_judging on
// the same workload (contrib/normal-oj-backend/costbench.py when its
// Python dependencies are present), and whether the targets (docs/benchmarks.md) are
// met.
//
//	onlinebench [--rtt 1ms] [--per-byte 8ns] [--rates 10,100,1000] [--history 10,100,1000,10000] [--classes 20,80,400] [--backend FILE]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/demo"
	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/storecost"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "onlinebench:", err)
		os.Exit(1)
	}
}

type options struct {
	model           storecost.Model
	rates           []int
	landings        int
	rateSeconds     float64
	students        int
	problems        int
	earlier         int
	history         []int
	historyStudents int
	classes         []int
	closedLandings  int
	backend         string
	jsonOut         string
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("onlinebench", flag.ContinueOnError)
	var o options
	var rates, history, classes string
	fs.DurationVar(&o.model.RTT, "rtt", time.Millisecond, "round-trip time charged per round trip")
	fs.DurationVar(&o.model.PerByte, "per-byte", 8*time.Nanosecond, "time charged per byte sent or received (8ns ≈ 1 Gbit/s)")
	fs.DurationVar(&o.model.Await, "await", 200*time.Millisecond, "how long a poll of the change stream waits for an event: the daemon's getMore waits up to its maxAwaitTimeMS, the batch wait (200ms)")
	fs.StringVar(&rates, "rates", "10,100,1000", "landing rates (per second) of the rush on the anchor workload")
	fs.IntVar(&o.landings, "landings", 200, "landings per rate (at least rate × --rate-seconds)")
	fs.Float64Var(&o.rateSeconds, "rate-seconds", 2, "seconds each rate runs at least")
	fs.IntVar(&o.students, "students", 80, "students of the anchor workload's course")
	fs.IntVar(&o.problems, "problems", 5, "problems of the homework")
	fs.IntVar(&o.earlier, "earlier", 100, "earlier submissions per student in the anchor workload (all to the homework)")
	fs.StringVar(&history, "history", "10,100,1000,10000", "earlier submissions per student for the history rows (10 to the homework, the rest to past homeworks)")
	fs.IntVar(&o.historyStudents, "history-students", 20, "students of the history rows")
	fs.StringVar(&classes, "classes", "20,80,400", "class sizes for the class rows (100 earlier submissions each, all to the homework)")
	fs.IntVar(&o.closedLandings, "closed-landings", 30, "landings of each growth row (one at a time)")
	fs.StringVar(&o.backend, "backend", "", "JSON figures of the Back-End's finish_judging (contrib/normal-oj-backend/costbench.py); empty: the recorded anchor figures")
	fs.StringVar(&o.jsonOut, "json", "", "write the rows as JSON to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.rates, err = ints(rates); err != nil {
		return fmt.Errorf("--rates: %w", err)
	}
	if o.history, err = ints(history); err != nil {
		return fmt.Errorf("--history: %w", err)
	}
	if o.classes, err = ints(classes); err != nil {
		return fmt.Errorf("--classes: %w", err)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	be, err := backendFigures(o.backend)
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Fprintf(w, "online cost model: %v per round trip, %v per byte; memstore's own time is not charged (subtracted from staleness); %d CPUs\n\n",
		o.model.RTT, o.model.PerByte, runtime.NumCPU())
	var rows []row
	anchor := demo.RushParams{Students: o.students, Problems: o.problems, Earlier: o.earlier, InHomework: o.earlier, Seed: 1}
	for _, rate := range o.rates {
		n := max(o.landings, int(float64(rate)*o.rateSeconds))
		r, err := measure(ctx, o.model, anchor, fmt.Sprintf("rush %d/s", rate), rate, n)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	closed, err := measure(ctx, o.model, anchor, "one at a time", 0, o.closedLandings)
	if err != nil {
		return err
	}
	rows = append(rows, closed)
	var hist, class []row
	for _, h := range o.history {
		p := demo.RushParams{Students: o.historyStudents, Problems: o.problems, Earlier: h, InHomework: 10, Seed: 2}
		r, err := measure(ctx, o.model, p, fmt.Sprintf("history %d", h), 0, o.closedLandings)
		if err != nil {
			return err
		}
		hist = append(hist, r)
	}
	for _, c := range o.classes {
		p := demo.RushParams{Students: c, Problems: o.problems, Earlier: o.earlier, InHomework: o.earlier, Seed: 3}
		r, err := measure(ctx, o.model, p, fmt.Sprintf("class %d", c), 0, o.closedLandings)
		if err != nil {
			return err
		}
		class = append(class, r)
	}
	rows = append(rows, hist...)
	rows = append(rows, class...)
	printTable(w, rows, be)
	printRebuild(w, rows)
	printTargets(w, rows, closed, hist, class, be)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// row is one measured scenario; per-landing figures are totals / landings.
type row struct {
	Name        string
	Students    int
	Earlier     int
	Rate        int // 0: one landing at a time
	Landings    int
	Submissions int // in the store before the rush
	HomeworkKB  float64
	Total       storecost.Counts
	Stale       []time.Duration // per landing, event to acknowledged derived write
	CPU         time.Duration   // process CPU during the rush (engine, store, generator)
	StoreCPU    time.Duration   // CPU inside the store decorator (memstore, accounting, hooks)
	GenCPU      time.Duration   // CPU of the load generator's goroutine (landings, waiting for idle)
	// EngineThreadCPU is the CPU of the engine's goroutine (locked to its
	// thread): the engine and the store calls it makes.
	EngineThreadCPU time.Duration
	Batches         int64  // batches the engine processed
	Alloc           uint64 // bytes allocated during the rush (the same)
	Rebuild         storecost.Counts
	RebuildWall     time.Duration
}

func (r row) per(v int64) float64 { return float64(v) / float64(r.Landings) }

func (r row) quantile(q float64) time.Duration {
	if len(r.Stale) == 0 {
		return 0
	}
	s := slices.Clone(r.Stale)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// tracker follows each landing from its change event to the Apply that
// acknowledged the derived write of the batch holding it.
type tracker struct {
	mu      sync.Mutex
	cs      *storecost.Store
	landed  map[bson.ObjectID]landing
	pending []landing
	stale   []time.Duration
	lastSeq int
	quiet   int // quiet polls since the last event delivered or store call, begun after the batch wait of that event
	acked   int
	// lastAt is when the last event was delivered; wait the engine's
	// BatchMaxWait: a batch of echoes only waits that long for more.
	lastAt time.Time
	wait   time.Duration
}

type landing struct {
	at    time.Time
	inner time.Duration
}

func (t *tracker) event(ev watch.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastSeq = seqOf(ev.ClusterTime)
	t.quiet = 0
	t.lastAt = time.Now()
	if ev.Change.Collection != materialize.CollSubmission || ev.Change.Op != materialize.OpUpdate {
		return
	}
	if l, ok := t.landed[ev.Change.SubmissionID]; ok {
		delete(t.landed, ev.Change.SubmissionID)
		t.pending = append(t.pending, l)
	}
}

func (t *tracker) applied() {
	now := time.Now()
	inner := t.cs.Counts().Inner
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.pending {
		// The store's own time stands in for the server's work, which the
		// model does not charge: take it out.
		t.stale = append(t.stale, now.Sub(l.at)-(inner-l.inner))
		t.acked++
	}
	t.pending = t.pending[:0]
}

// quietPoll follows each poll of the change stream that found no event.
// A batch closes at a quiet poll (one of nothing but echoes, at the first
// quiet poll after its BatchMaxWait), and the engine polls again only
// after processing it, so two quiet polls in a row past the wait of the
// last event delivered, with no store call between, mean every event
// delivered was processed (this hook runs before the engine reads its
// clock, and the engine's batch deadline is set after the event's hook
// ran: the 5 ms margin covers that). A landing still pending then was in a batch
// that wrote nothing (the batch of its submit had already read the result
// and written its values): it counts until now (an upper bound).
func (t *tracker) quietPoll() {
	t.mu.Lock()
	if time.Since(t.lastAt) >= t.wait+5*time.Millisecond {
		t.quiet++
	}
	flush := t.quiet >= 2 && len(t.pending) > 0
	t.mu.Unlock()
	if flush {
		t.applied()
	}
}

// call follows every call of the store but the polls without events.
func (t *tracker) call() {
	t.mu.Lock()
	t.quiet = 0
	t.mu.Unlock()
}

// seqOf inverts memstore's cluster times (base + 60 s per event).
func seqOf(ts bson.Timestamp) int { return int((int64(ts.T) - 1_700_000_000) / 60) }

// idle reports whether every event of st was delivered and processed.
// (Checkpoints are saved at most every Config.CheckpointEvery, so a saved
// checkpoint no longer marks the end of a batch.)
func (t *tracker) idle(st *memstore.Store) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastSeq >= st.OplogLen() && t.quiet >= 2 && len(t.pending) == 0
}

func waitIdle(ctx context.Context, t *tracker, st *memstore.Store, errc <-chan error) error {
	deadline := time.Now().Add(10 * time.Minute)
	for !t.idle(st) {
		select {
		case err := <-errc:
			return fmt.Errorf("engine stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Microsecond):
		}
		if time.Now().After(deadline) {
			return errors.New("engine did not catch up in 10 minutes")
		}
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure seeds p, rebuilds, then lands n submissions: at rate per second
// (open loop), or one at a time when rate is 0 (each waits until the
// daemon is idle again), and returns the costs.
func measure(ctx context.Context, model storecost.Model, p demo.RushParams, name string, rate, n int) (row, error) {
	rush := demo.NewRush(p)
	st := memstore.New()
	for coll, docs := range rush.Docs {
		if err := st.Load(coll, docs...); err != nil {
			return row{}, fmt.Errorf("load %s: %w", coll, err)
		}
	}
	r := row{Name: name, Students: p.Students, Earlier: p.Earlier, Rate: rate, Landings: n, Submissions: len(rush.Docs[materialize.CollSubmission])}
	cs := storecost.New(st, model)
	// The daemon's defaults, BatchMaxWait set for the tracker to know it.
	// The change stream's polls wait model.Await for an event, as the
	// daemon's getMores do (maxAwaitTimeMS, the batch wait: see --await),
	// so the engine needs no IdlePause.
	cfg := watch.Config{BatchMaxWait: 200 * time.Millisecond}
	t := &tracker{cs: cs, landed: make(map[bson.ObjectID]landing), wait: cfg.BatchMaxWait}
	cs.OnEvent, cs.OnApplied, cs.OnQuiet, cs.OnCall = t.event, t.applied, t.quietPoll, t.call
	metrics := watch.NewMetrics(nil)
	eng := &watch.Engine{Store: cs, Feed: cs, Checkpoints: cs, Log: zerolog.Nop(), Metrics: metrics, Config: cfg}
	start := time.Now()
	if _, err := eng.RebuildAndCheckpoint(ctx); err != nil {
		return r, fmt.Errorf("%s: rebuild: %w", name, err)
	}
	r.RebuildWall = time.Since(start)
	r.Rebuild = cs.Counts()
	r.HomeworkKB = float64(len(st.Get(materialize.CollHomework, rush.Homework))) / 1024
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	thread := make(chan storecost.Thread, 1)
	go func() {
		defer wg.Done()
		// The engine's goroutine on a thread of its own, whose CPU clock
		// is then the engine's (and its store calls') CPU.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		thread <- storecost.CurrentThread()
		if err := eng.Run(ctx); err != nil {
			errc <- err
		}
	}()
	engThread := <-thread
	defer wg.Wait()
	defer cancel()
	// The rebuild's own writes come back as events: let them pass first.
	if err := waitIdle(ctx, t, st, errc); err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	base := cs.Counts()
	t.mu.Lock()
	t.stale, t.acked = nil, 0
	t.mu.Unlock()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	// The generator runs on this goroutine, locked to its thread, so its
	// CPU is that thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gen0, _ := storecost.ThreadCPU()
	batches0 := testutil.ToFloat64(metrics.Batches)
	eng0, _ := engThread.CPU()
	cpu0 := cpuTime()
	begin := time.Now()
	for i := 0; i < n; i++ {
		if rate > 0 {
			if d := time.Until(begin.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		pending, judged := rush.Landing(i)
		id := judged.Lookup("_id").ObjectID()
		if err := st.Insert(materialize.CollSubmission, pending); err != nil {
			return r, err
		}
		t.mu.Lock()
		t.landed[id] = landing{at: time.Now(), inner: cs.Counts().Inner}
		t.mu.Unlock()
		if err := st.Update(materialize.CollSubmission, judged, []string{"status", "score", "tasks", "runTime", "memoryUsage", "lastSend"}); err != nil {
			return r, err
		}
		if rate == 0 {
			if err := waitIdle(ctx, t, st, errc); err != nil {
				return r, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if err := waitIdle(ctx, t, st, errc); err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	r.CPU = cpuTime() - cpu0
	if eng1, ok := engThread.CPU(); ok {
		r.EngineThreadCPU = eng1 - eng0
	}
	if gen1, ok := storecost.ThreadCPU(); ok {
		r.GenCPU = gen1 - gen0
	}
	r.Batches = int64(testutil.ToFloat64(metrics.Batches) - batches0)
	runtime.ReadMemStats(&ms1)
	r.Alloc = ms1.TotalAlloc - ms0.TotalAlloc
	r.Total = cs.Counts().Sub(base)
	r.StoreCPU = r.Total.CPU
	t.mu.Lock()
	r.Stale = slices.Clone(t.stale)
	acked := t.acked
	t.mu.Unlock()
	if acked != n {
		return r, fmt.Errorf("%s: %d of %d landings acknowledged by a derived write", name, acked, n)
	}
	return r, nil
}

// backend holds the Back-End's per-landing figures.
type backend struct {
	Source       string  `json:"source"`
	Calls        float64 `json:"calls"`
	Writes       float64 `json:"writes"`
	DocsRead     float64 `json:"docs_read"`
	KiBRead      float64 `json:"kib_read"`
	KiBWritten   float64 `json:"kib_written"`
	HomeworkKB   float64 `json:"homework_kb"`
	Landings     int     `json:"landings"`
	Students     int     `json:"students"`
	EarlierPerSt int     `json:"earlier_per_student"`
}

// anchor is a recorded measurement of the unpatched finish_judging (one
// course of 80 students, one homework of 5 problems, 100 earlier
// submissions per student, 200 landings around the deadline).
var anchor = backend{Source: "recorded measurement (not run here)", Calls: 9.4, Writes: 3.4, DocsRead: 5, KiBRead: 288, KiBWritten: 0.94, HomeworkKB: 297, Landings: 200, Students: 80, EarlierPerSt: 100}

func backendFigures(path string) (backend, error) {
	if path == "" {
		return anchor, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return backend{}, fmt.Errorf("read Back-End figures: %w", err)
	}
	var be backend
	if err := json.Unmarshal(b, &be); err != nil {
		return backend{}, fmt.Errorf("read Back-End figures %s: %w", path, err)
	}
	if be.Source == "" {
		be.Source = path
	}
	return be, nil
}

func kib(v float64) float64 { return v / 1024 }

func printTable(w io.Writer, rows []row, be backend) {
	fmt.Fprintln(w, "per landing (a submit and its result: both change events, the derived writes and their own change events, checkpoints):")
	fmt.Fprintf(w, "%-16s %6s %7s %8s %6s %7s %8s %8s %6s %8s %9s %9s %9s %9s %9s\n",
		"scenario", "subs", "hw KiB", "landings", "rt", "reads", "docs", "KiB rd", "writes", "KiB wr", "ev KiB", "srv KiB", "p50", "p99", "max")
	for _, r := range rows {
		stale := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
		fmt.Fprintf(w, "%-16s %6d %7.0f %8d %6.1f %7.1f %8.1f %8.2f %6.1f %8.2f %9.2f %9.1f %9s %9s %9s\n",
			r.Name, r.Submissions, r.HomeworkKB, r.Landings, r.per(r.Total.RoundTrips), r.per(r.Total.ReadCalls), r.per(r.Total.DocsRead),
			kib(r.per(r.Total.BytesRead)), r.per(r.Total.DocsWritten), kib(r.per(r.Total.BytesWritten)), kib(r.per(r.Total.EventBytes)),
			kib(r.per(r.Total.ExaminedBytes)), stale(r.quantile(0.5)), stale(r.quantile(0.99)), stale(r.quantile(1)))
	}
	fmt.Fprintf(w, "%-16s %6s %7.0f %8d %6.1f %7.1f %8.1f %8.2f %6.1f %8.2f\n", "Back-End", "", be.HomeworkKB, be.Landings,
		be.Calls, be.Calls-be.Writes, be.DocsRead, be.KiBRead, be.Writes, be.KiBWritten)
	fmt.Fprintf(w, "  Back-End: %s (%d students, %d earlier submissions each)\n", be.Source, be.Students, be.EarlierPerSt)
	fmt.Fprintln(w, "  rt: round trips (each find/aggregate/bulkWrite/update, getMores past 101 documents, a getMore per reply of change events: every event the server has when the engine asks);")
	fmt.Fprintln(w, "  docs/KiB rd: documents and BSON bytes returned, change events included (ev KiB); writes/KiB wr: write models and their filter+update BSON;")
	fmt.Fprintln(w, "  srv KiB: stored bytes the server reads or rewrites to answer (not transferred); p50/p99/max: change event to acknowledged derived write.")
	fmt.Fprintln(w)
	for _, r := range rows {
		if r.Rate == 0 && !strings.HasPrefix(r.Name, "one") {
			continue
		}
		keys := make([]string, 0, len(r.Total.ByCall))
		for k := range r.Total.ByCall {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, r.per(r.Total.ByCall[k])))
		}
		fmt.Fprintf(w, "  %-16s round trips by call: %s\n", r.Name, strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.Landings) }
		fmt.Fprintf(w, "  %-16s batches %.2f/landing; CPU µs/landing: engine %.0f (its goroutine %.0f - store calls %.0f); process %.0f (generator %.0f); %.0f KiB allocated/landing (all); model time slept %+.1f%% of charged\n",
			r.Name, r.per(r.Batches), us(r.EngineThreadCPU-r.StoreCPU), us(r.EngineThreadCPU), us(r.StoreCPU), us(r.CPU), us(r.GenCPU), float64(r.Alloc)/1024/float64(r.Landings),
			overshoot(r.Total))
	}
	fmt.Fprintln(w, "  engine CPU: the CPU of the engine's goroutine (locked to an OS thread, read from that thread's CPU clock) minus the CPU inside")
	fmt.Fprintln(w, "  its calls of the store decorator (memstore, cost accounting, the bench's hooks, timed the same way); the Go runtime's")
	fmt.Fprintln(w, "  background GC and scheduler work is in neither (it is in the process's figure, with the load generator's).")
	fmt.Fprintln(w)
}

func printRebuild(w io.Writer, rows []row) {
	fmt.Fprintln(w, "initial rebuild (in-memory store, same cost model), per million submissions:")
	for _, r := range rows {
		m := float64(r.Submissions) / 1e6
		if m == 0 {
			continue
		}
		c := r.Rebuild
		cpu := r.RebuildWall - c.Model - c.Inner
		fmt.Fprintf(w, "  %-16s %8d subs: %6.0f rt, %8.1f MiB read, %8.1f MiB written, %8.0f writes; model %6.1f s, engine CPU (wall - model - store) %6.1f s\n",
			r.Name, r.Submissions, float64(c.RoundTrips)/m, float64(c.BytesRead)/m/(1<<20), float64(c.BytesWritten)/m/(1<<20),
			float64(c.DocsWritten)/m, c.Model.Seconds()/m, cpu.Seconds()/m)
	}
	fmt.Fprintln(w)
}

func metMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// spread is max/min of f over rows.
func spread(rows []row, f func(row) float64) float64 {
	lo, hi := 0.0, 0.0
	for i, r := range rows {
		v := f(r)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	if lo == 0 {
		return 0
	}
	return hi / lo
}

func printTargets(w io.Writer, rows []row, closed row, hist, class []row, be backend) {
	fmt.Fprintln(w, "targets:")
	beBytes := (be.KiBRead + be.KiBWritten) * 1024
	for _, r := range rows {
		if r.Students != be.Students || r.Earlier != be.EarlierPerSt || strings.HasPrefix(r.Name, "history") || strings.HasPrefix(r.Name, "class") {
			continue
		}
		b := r.per(r.Total.BytesRead + r.Total.BytesWritten)
		fmt.Fprintf(w, "  %-16s bytes read+written %.2f KiB ≤ Back-End %.2f KiB: %s; round trips %.1f ≤ %.1f: %s\n",
			r.Name, b/1024, beBytes/1024, metMissed(b <= beBytes), r.per(r.Total.RoundTrips), be.Calls, metMissed(r.per(r.Total.RoundTrips) <= be.Calls))
	}
	for _, r := range rows {
		if r.Rate == 1000 {
			p99 := r.quantile(0.99)
			fmt.Fprintf(w, "  p99 staleness at 1000/s = %v ≤ 500ms: %s (depends on the machine's load)\n", p99.Round(100*time.Microsecond), metMissed(p99 <= 500*time.Millisecond))
		}
	}
	for _, g := range []struct {
		name string
		rows []row
	}{{"earlier submissions per user", hist}, {"students in the homework", class}} {
		if len(g.rows) < 2 {
			continue
		}
		bytes := spread(g.rows, func(r row) float64 { return r.per(r.Total.BytesRead + r.Total.BytesWritten) })
		rt := spread(g.rows, func(r row) float64 { return r.per(r.Total.RoundTrips) })
		docs := spread(g.rows, func(r row) float64 { return r.per(r.Total.DocsRead) })
		ok := bytes <= 2 && rt <= 2 && docs <= 2
		fmt.Fprintf(w, "  flat in %s (%s to %s): bytes ×%.2f, round trips ×%.2f, documents ×%.2f (≤ ×2): %s\n",
			g.name, g.rows[0].Name, g.rows[len(g.rows)-1].Name, bytes, rt, docs, metMissed(ok))
		srv := spread(g.rows, func(r row) float64 { return r.per(r.Total.ExaminedBytes) })
		fmt.Fprintf(w, "    (server-side bytes examined ×%.2f: not a target, reported)\n", srv)
	}
	// The server's work per landing against the Back-End's bytes per
	// landing: at 1,000 earlier submissions per user at most a quarter;
	// the other history rows reported beside it. Documents examined per
	// landing stay the same in every row when no submission is examined
	// (the reads of a user's submissions examine index entries).
	for _, r := range hist {
		srv := r.per(r.Total.ExaminedBytes)
		fmt.Fprintf(w, "  %-16s server examines %.1f KiB per landing (%.1f index entries, %.1f documents), Back-End's bytes %.2f KiB",
			r.Name, srv/1024, r.per(r.Total.ExaminedKeys), r.per(r.Total.ExaminedDocs), beBytes/1024)
		if r.Earlier == 1000 {
			fmt.Fprintf(w, ": ≤ ¼ (%.2f KiB): %s", beBytes/4/1024, metMissed(srv <= beBytes/4))
		}
		fmt.Fprintln(w)
	}
	_ = closed
}

// overshoot is how much longer the model's sleeps took than it charged,
// in percent of the charge: the OS's timer overshoot, in the staleness
// measured but no part of the model.
func overshoot(c storecost.Counts) float64 {
	if c.Model <= 0 {
		return 0
	}
	return 100 * float64(c.Slept-c.Model) / float64(c.Model)
}
