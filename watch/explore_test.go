package watch_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// The explorer runs the real Leader, Engine, Rebuild and RebuildOnline
// over memstore with a simulated clock, and turns every nondeterministic
// step of the world into a choice point: which instance acts next, which
// source write lands, the clock passing a lease's expiry, the oplog
// rolling past the checkpoint, at each store call a crash, a transient or
// an unauthorized error (the policy exits on it), a foreign write, a
// renewal tick or a clock step onto a deadline, at each write a stall
// after the write guard passed (before the request leaves, or with the
// request in flight), a lost reply or a refusal, and at each renewal its
// outcome. A depth-first search enumerates every choice sequence within a
// bound by stateless re-execution: replay a prefix, extend it with first
// choices, backtrack by bumping the last choice that has another option.
// States reached again between two top-level steps, with the same budget
// left, are pruned. The properties are checked at every state, not only
// at the end (exploreProc.checkSave and checkSend, exploreWorld.checkState).

// exploreTTL is the simulated lease TTL. The Leader's renewal ticker runs
// on the synctest bubble's clock (every TTL/3), which moves only when the
// explorer chooses a renewal tick (exploreProc.at).
const exploreTTL = time.Hour

// exploreBase is the simulated server clock's start: far after the
// bubble's clock (2000), so the deadlines in simulated time (the write
// guard's, the close bound's) never expire contexts; exploreWorld
// enforces them against the simulated clock.
var exploreBase = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// exploreBound bounds one exploration.
type exploreBound struct {
	Steps   int  // top-level steps (an act, a source write, the clock, the oplog)
	Writes  int  // source writes, top-level or foreign (during an act)
	Faults  int  // crashes, transient errors, stalls, history lost
	Crashes int  // of the faults, crashes
	Skew    bool // a choice: B's clock behind the server's
	// Echoes: a choice, the echoes of the engine's own writes dropped
	// from every stream. memstore drops every event its Apply emitted,
	// so a deposed instance's late write too, which the engine's echo
	// rule never skips (it is not this engine's write): with stalls
	// that is a false violation, so a bound with echoes has no faults.
	Echoes bool
	// Renewals: the Leader's renewal ticker fires at most this often in
	// one schedule, before a batch's first read or a guarded write.
	Renewals int
	// Edges: clock steps onto a deadline or one tick either side of it
	// (the lease's expiry, the renewal window, the guard's deadline).
	Edges int
	// Transient: every fault is a transient error before a store call
	// (no crash, exit, stall, lost reply or refusal): a cheaper bound
	// that still combines faults with source writes.
	Transient bool
}

func (b exploreBound) String() string {
	s := fmt.Sprintf("steps=%d,writes=%d,faults=%d,crashes=%d,skew=%v,echoes=%v,renewals=%d,edges=%d", b.Steps, b.Writes, b.Faults, b.Crashes, b.Skew, b.Echoes, b.Renewals, b.Edges)
	if b.Transient {
		s += ",transient=true"
	}
	return s
}

func parseBound(s string, b exploreBound) (exploreBound, error) {
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return b, fmt.Errorf("bound %q: want key=value", kv)
		}
		switch k {
		case "skew":
			b.Skew = v == "true" || v == "1"
			continue
		case "echoes":
			b.Echoes = v == "true" || v == "1"
			continue
		case "transient":
			b.Transient = v == "true" || v == "1"
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return b, fmt.Errorf("bound %q: %w", kv, err)
		}
		switch k {
		case "steps":
			b.Steps = n
		case "writes":
			b.Writes = n
		case "faults":
			b.Faults = n
		case "crashes":
			b.Crashes = n
		case "renewals":
			b.Renewals = n
		case "edges":
			b.Edges = n
		default:
			return b, fmt.Errorf("bound %q: unknown key (steps, writes, faults, crashes, renewals, edges, skew, echoes, transient)", kv)
		}
	}
	return b, nil
}

// chooser is the source of every nondeterministic choice: choose returns
// one of 0..n-1 (n > 1).
type chooser interface {
	choose(n int) int
	// replaying reports that the choices so far repeat an explored
	// sequence: the states they reach were checked when first reached.
	replaying() bool
}

// script replays a prefix of choices and extends it with first choices,
// recording every choice made and how many options it had.
type script struct {
	prefix []int
	taken  []int
	sizes  []int
	replay bool // a replay of one sequence: check every state of it
	floor  int  // next bumps no choice before this one (a subtree's)
}

func (s *script) choose(n int) int {
	i := len(s.taken)
	c := 0
	if i < len(s.prefix) {
		c = min(s.prefix[i], n-1)
	}
	s.taken = append(s.taken, c)
	s.sizes = append(s.sizes, n)
	return c
}

func (s *script) replaying() bool { return !s.replay && len(s.taken) < len(s.prefix) }

// next returns the prefix of the next sequence in depth-first order: the
// last choice with another option, bumped; ok is false when none has.
func (s *script) next() ([]int, bool) {
	for j := len(s.taken) - 1; j >= s.floor; j-- {
		if s.taken[j]+1 < s.sizes[j] {
			p := append([]int(nil), s.taken[:j]...)
			return append(p, s.taken[j]+1), true
		}
	}
	return nil, false
}

func formatChoices(c []int) string {
	parts := make([]string, len(c))
	for i, v := range c {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ".")
}

func parseChoices(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ".") {
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("choice sequence %q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// errPruned stops a run at a state already explored with the same budget.
var errPruned = errors.New("state explored already")

// exploreWorld is one run: the store, the simulated clock, the instances
// and the properties' bookkeeping.
type exploreWorld struct {
	c     chooser
	b     exploreBound
	st    *memstore.Store
	now   time.Time // the server's clock
	trace []string
	seen  map[[32]byte]bool // states explored, shared by the runs of one exploration (nil: no pruning)
	known map[[32]byte]bool // the differential check: the states a pruned exploration reached
	novel string            // the first state reached that known lacks

	writes, faults, crashes, renewals, edges int // used of the bound
	procs                                    map[string]*exploreProc
	expiry                                   map[int64]time.Time // per epoch, the latest expiry the store granted it
	// refused: a write was refused for good (the policy moves past it),
	// so derived values may stay unlike the reference; fencing is still
	// checked.
	refused     bool
	reach       map[string]int // paths reached outside replayed prefixes
	incarnation map[string]int
	skew        map[string]time.Duration
	subs        []bson.ObjectID
	hw          bson.ObjectID

	maxWritten int64    // the highest epoch that sent a write
	lastPos    int      // the position of the last checkpoint saved
	ownBy      []string // per oplog event: the term whose write emitted it ("" for a source write)
	violation  string
	nested     int
	states     int // distinct states reached by this run
	metrics    *watch.Metrics
}

// exploreMetrics is shared by every engine and leader of the explorer:
// building a Metrics per engine would cost more than the engine's work.
var exploreMetrics = watch.NewMetrics(nil)

func newExploreWorld(c chooser, b exploreBound, seen map[[32]byte]bool) *exploreWorld {
	x := &exploreWorld{c: c, b: b, st: memstore.New(), now: exploreBase, seen: seen, metrics: exploreMetrics,
		procs: map[string]*exploreProc{}, incarnation: map[string]int{}, expiry: map[int64]time.Time{}, reach: map[string]int{}, skew: map[string]time.Duration{}, lastPos: -1}
	x.st.Clock = func() time.Time { return x.now }
	base := exploreBase.Add(-30 * 24 * time.Hour).UnixMilli()
	copy(x.hw[:], "homework0001")
	for _, u := range []string{"u1", "u2"} {
		must(x.st.Load(materialize.CollUser, mtest.Raw("_id", u, "submission", int32(0), "AC_submission", int32(0), "AC_problem_ids", bson.A{})))
	}
	must(x.st.Load(materialize.CollProblem, mtest.Raw("_id", int32(1), "homeworks", bson.A{x.hw}, "problemName", "p1")))
	must(x.st.Load(materialize.CollProblem, mtest.Raw("_id", int32(2), "homeworks", bson.A{}, "problemName", "p2")))
	entry := func() bson.D { return mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}) }
	must(x.st.Load(materialize.CollHomework, mtest.Raw("_id", x.hw, "homeworkName", "hw",
		"duration", mtest.D("start", bson.DateTime(base), "end", bson.DateTime(base+2*86_400_000)),
		"penalty", "score = score * 0.8 ** overtime",
		"studentStatus", mtest.D("u1", mtest.D("1", entry(), "2", entry())))))
	s0 := x.newSubID()
	must(x.st.Load(materialize.CollSubmission, mtest.Raw("_id", s0, "user", "u1", "problem", int32(1), "languageType", int32(0),
		"timestamp", bson.DateTime(base+86_400_000), "status", int32(0), "score", int32(100), "tasks", bson.A{})))
	x.subs = append(x.subs, s0)
	return x
}

// short names a submission of the explorer's world: s0, s1...
func short(id bson.ObjectID) string {
	n, err := strconv.Atoi(string(id[3:]))
	if err != nil {
		return id.Hex()
	}
	return "s" + strconv.Itoa(n)
}

func (x *exploreWorld) newSubID() bson.ObjectID {
	// Deterministic ids: a replayed sequence reaches the same states.
	var id bson.ObjectID
	copy(id[:], fmt.Sprintf("sub%09d", len(x.subs)))
	return id
}

func (x *exploreWorld) choose(n int) int {
	if n <= 1 {
		return 0
	}
	return x.c.choose(n)
}

// reached counts one path of the protocol, reached first by this run.
func (x *exploreWorld) reached(path string) {
	if !x.c.replaying() {
		x.reach[path]++
	}
}

func (x *exploreWorld) logf(format string, a ...any) {
	x.trace = append(x.trace, fmt.Sprintf("%s%s", strings.Repeat("  ", x.nested), fmt.Sprintf(format, a...)))
}

// fail records the first violated property; every instance then stops.
func (x *exploreWorld) fail(format string, a ...any) {
	if x.violation == "" {
		x.violation = fmt.Sprintf(format, a...)
		x.logf("VIOLATION: %s", x.violation)
	}
}

// run explores one choice sequence: the top-level steps, then a last
// check of the state.
func (x *exploreWorld) run() error {
	if x.b.Skew {
		// B's clock runs behind the server's by more than the guard's
		// margin; expiry is the server's to decide.
		if x.choose(2) == 1 {
			x.skew["B"] = -exploreTTL / 2
			x.logf("B's clock runs %s behind the server's", exploreTTL/2)
		}
	}
	if x.b.Echoes && x.choose(2) == 1 {
		// Convergence must not depend on the echoes: every stream skips
		// the events the engine's own writes emitted.
		x.st.DropOwnEvents = true
		x.logf("every stream drops the echoes of the engine's own writes")
	}
	for step := 0; step < x.b.Steps && x.violation == ""; step++ {
		if err := x.checkState(x.b.Steps - step); err != nil {
			return err
		}
		x.topStep()
	}
	if x.violation == "" {
		_ = x.checkState(0)
	}
	return nil
}

func (x *exploreWorld) topStep() {
	type option struct {
		name string
		do   func()
	}
	opts := []option{
		{"A acts", func() { x.act("A") }},
		{"B acts", func() { x.act("B") }},
	}
	if x.writes < x.b.Writes {
		opts = append(opts, option{"source write", func() { x.countWrite(); x.sourceWrite() }})
	}
	opts = append(opts, option{"clock", func() {
		x.now = x.now.Add(exploreTTL + time.Minute)
		x.logf("the clock passes every lease's expiry (+%s)", exploreTTL+time.Minute)
	}})
	opts = append(opts, option{"R rebuilds online", func() { x.act("R") }})
	if x.faults < x.b.Faults {
		opts = append(opts, option{"history lost", func() {
			// The oplog rolls over only because writes land: two of
			// Back-End's bookkeeping writes (a field nothing derives
			// from), then every event but the latest is gone.
			x.faults++
			doc := x.st.Get(materialize.CollSubmission, x.subs[0])
			for i := range 2 {
				if doc != nil {
					doc = setFields(doc, "lastSend", bson.DateTime(i))
					must(x.st.Update(materialize.CollSubmission, doc, []string{"lastSend"}))
				}
			}
			x.st.TruncateOplog()
			x.fillOwnBy()
			x.logf("the oplog rolls over (Back-End writes land): history before event %d lost", x.st.OplogLen())
		}})
	}
	o := opts[x.choose(len(opts))]
	if o.name != "source write" && o.name != "clock" && o.name != "history lost" {
		x.logf("-- %s", o.name)
	}
	o.do()
}

// sourceWrite applies one Back-End-shaped write chosen from the alphabet.
func (x *exploreWorld) sourceWrite() {
	st := x.st
	sub := func() (bson.ObjectID, bson.Raw) {
		var live []bson.ObjectID
		for _, id := range x.subs {
			if st.Get(materialize.CollSubmission, id) != nil {
				live = append(live, id)
			}
		}
		if len(live) == 0 {
			return bson.ObjectID{}, nil
		}
		id := live[x.choose(len(live))]
		return id, st.Get(materialize.CollSubmission, id)
	}
	base := exploreBase.Add(-30 * 24 * time.Hour).UnixMilli()
	switch x.choose(11) {
	case 0:
		u, p := []string{"u1", "u2"}[x.choose(2)], int32(1+x.choose(2))
		id := x.newSubID()
		must(st.Insert(materialize.CollSubmission, mtest.Raw("_id", id, "user", u, "problem", p, "languageType", int32(0),
			"timestamp", bson.DateTime(base+int64(1+len(x.subs))*43_200_000), "status", int32(-1), "score", int32(-1), "tasks", bson.A{})))
		x.subs = append(x.subs, id)
		x.logf("source: submission %s inserted (%s, problem %d, pending)", short(id), u, p)
	case 1:
		if id, doc := sub(); doc != nil {
			must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(0), "score", int32(100)), []string{"status", "score"}))
			x.logf("source: submission %s judged (AC, 100)", short(id))
		}
	case 2:
		if id, doc := sub(); doc != nil {
			must(st.Update(materialize.CollSubmission, setFields(doc, "status", int32(-1), "score", int32(-1)), []string{"status", "score"}))
			x.logf("source: submission %s rejudged (pending)", short(id))
		}
	case 3:
		if id, doc := sub(); doc != nil {
			if x.choose(2) == 0 {
				u := "u2"
				if doc.Lookup("user").StringValue() == "u2" {
					u = "u1"
				}
				must(st.Update(materialize.CollSubmission, setFields(doc, "user", u), []string{"user"}))
				x.logf("source: submission %s moved to user %s", short(id), u)
			} else {
				p := int32(3 - doc.Lookup("problem").Int32())
				must(st.Update(materialize.CollSubmission, setFields(doc, "problem", p), []string{"problem"}))
				x.logf("source: submission %s moved to problem %d", short(id), p)
			}
		}
	case 4:
		if id, doc := sub(); doc != nil {
			u := "u2"
			if doc.Lookup("user").StringValue() == "u2" {
				u = "u1"
			}
			must(st.Replace(materialize.CollSubmission, setFields(doc, "user", u, "status", int32(1), "score", int32(60))))
			x.logf("source: submission %s replaced (user %s, score 60)", short(id), u)
		}
	case 5:
		if id, doc := sub(); doc != nil {
			must(st.Delete(materialize.CollSubmission, id))
			x.logf("source: submission %s deleted", short(id))
		}
	case 6:
		doc := st.Get(materialize.CollHomework, x.hw)
		end, _ := doc.Lookup("duration", "end").DateTimeOK()
		nend := base + 2*86_400_000
		if end == nend {
			nend = base + 43_200_000 // before every submission: all late
		}
		must(st.Update(materialize.CollHomework, setFields(doc, "duration", mtest.D("start", bson.DateTime(base), "end", bson.DateTime(nend))), []string{"duration.end"}))
		x.logf("source: homework deadline moved to day %.1f", float64(nend-base)/86_400_000)
	case 7:
		doc := st.Get(materialize.CollHomework, x.hw)
		p := "score = 0"
		if doc.Lookup("penalty").StringValue() == p {
			p = "score = score * 0.8 ** overtime"
		}
		must(st.Update(materialize.CollHomework, setFields(doc, "penalty", p), []string{"penalty"}))
		x.logf("source: homework penalty set to %q", p)
	case 8:
		u := []string{"u1", "u2"}[x.choose(2)]
		doc := st.Get(materialize.CollHomework, x.hw)
		var ss bson.D
		must(bson.Unmarshal(doc.Lookup("studentStatus").Document(), &ss))
		out, found := bson.D{}, false
		for _, e := range ss {
			if e.Key == u {
				found = true
				continue
			}
			out = append(out, e)
		}
		if !found {
			entry := func() bson.D { return mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}) }
			out = append(out, bson.E{Key: u, Value: mtest.D("1", entry(), "2", entry())})
		}
		must(st.Update(materialize.CollHomework, setFields(doc, "studentStatus", out), []string{"studentStatus." + u}))
		x.logf("source: homework studentStatus key %s %s", u, map[bool]string{true: "removed", false: "added"}[found])
	case 9:
		p := int32(1 + x.choose(2))
		doc := st.Get(materialize.CollProblem, p)
		list := bson.A{x.hw}
		if arr, _ := doc.Lookup("homeworks").ArrayOK(); len(arr) > 5 { // not empty
			list = bson.A{}
		}
		must(st.Update(materialize.CollProblem, setFields(doc, "homeworks", list), []string{"homeworks"}))
		x.logf("source: problem %d homeworks set to %d homework(s)", p, len(list))
	case 10:
		doc := st.Get(materialize.CollUser, "u1")
		n, _ := doc.Lookup("submission").AsInt64OK()
		must(st.Update(materialize.CollUser, setFields(doc, "submission", int32(n+7)), []string{"submission"}))
		x.logf("source: a foreign write sets u1.submission to %d (a derived field)", n+7)
	}
	x.fillOwnBy()
}

func (x *exploreWorld) countWrite() {
	if x.writes++; x.writes == 2 {
		x.reached(pathTwoWrites)
	}
}

// fillOwnBy attributes the events emitted since the last attribution to
// source writes.
func (x *exploreWorld) fillOwnBy() {
	for len(x.ownBy) < x.st.OplogLen() {
		x.ownBy = append(x.ownBy, "")
	}
}

// proc returns the live process of instance name, starting a new one
// when there is none or it crashed. Every process of an instance is
// configured with the same id (a restarted pod keeps its name): the
// Leader draws a unique lease owner per process from it.
func (x *exploreWorld) proc(name string) *exploreProc {
	if p := x.procs[name]; p != nil && !p.dead {
		return p
	}
	x.incarnation[name]++
	if x.incarnation[name] > 1 {
		x.reached(pathRestart)
	}
	p := &exploreProc{Store: x.st, x: x, name: fmt.Sprintf("%s%d", name, x.incarnation[name]), skew: x.skew[name]}
	x.procs[name] = p
	return p
}

// act runs instance name for a while: A runs Leader.Run (campaigning
// again after a lost term) until its stream is quiet or the lease is held
// by another, B one lease term of Leader.Do with the engine's Run until
// its stream is quiet, R RebuildOnline.
func (x *exploreWorld) act(name string) {
	p := x.proc(name)
	p.epoch, p.ops, p.terms, p.opened, p.rebuilding = 0, 0, 0, false, false
	ctx := context.Background()
	if name == "R" {
		_, cp, err := watch.RebuildOnline(ctx, p, watch.OnlineRebuildOptions{Owner: name, TTL: exploreTTL, Log: zerolog.Nop(), Now: p.local, Metrics: x.metrics})
		x.logf("%s: RebuildOnline returns (checkpoint at event %d, epoch %d): %v", p.name, memstore.CheckpointPosition(cp), cp.Epoch, errText(err))
		if p.exits {
			p.dead = true
		}
		return
	}
	l := &watch.Leader{Leases: p, Owner: name, TTL: exploreTTL, Log: zerolog.Nop(), Now: p.local, Metrics: x.metrics,
		NewEngine: func(epoch int64) *watch.Engine {
			return &watch.Engine{Store: p, Feed: p, Checkpoints: p, Log: zerolog.Nop(), Now: p.local, Metrics: x.metrics,
				Sleep:  func(context.Context, time.Duration) {}, // a backoff passes no simulated time
				Config: watch.Config{BatchSize: 3, BatchMaxWait: exploreAwait, CheckpointEvery: -1, Epoch: epoch}}
		}}
	p.id = l.ID()
	var err error
	if name == "A" {
		rctx, cancel := context.WithCancel(ctx)
		p.cancel, p.runMode = cancel, true
		err = l.Run(rctx)
		cancel()
		x.logf("%s: Run returns: %v", p.name, errText(err))
	} else {
		p.runMode = false
		err = l.Do(ctx, func(ctx context.Context, eng *watch.Engine) error {
			jctx, cancel := context.WithCancel(ctx)
			defer cancel()
			p.cancel = cancel
			return eng.Run(jctx)
		})
		x.logf("%s: term ends: %v", p.name, errText(err))
	}
	p.cancel = nil
	if p.exits {
		p.dead = true
		x.logf("%s exits", p.name)
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// recoverShadow recovers a copy of the store with a fresh instance and no
// faults (the clock past every lease) and returns how the copy's derived
// values then differ from the reference's.
func (x *exploreWorld) recoverShadow() []string {
	c := x.st.Clone()
	now := x.now.Add(10 * exploreTTL)
	c.Clock = func() time.Time { return now }
	ctx := context.Background()
	l, ok, err := c.Acquire(ctx, "shadow", exploreTTL)
	if err != nil || !ok {
		return []string{fmt.Sprintf("shadow recovery: acquire: %v %v", ok, err)}
	}
	eng := &watch.Engine{Store: c, Feed: c, Checkpoints: c, Log: zerolog.Nop(), Now: func() time.Time { return now }, Metrics: x.metrics,
		Config: watch.Config{BatchSize: 3, BatchMaxWait: time.Hour, CheckpointEvery: -1, Epoch: l.Epoch}}
	quiet := 0
	for i := 0; i < 6 && quiet < 2; i++ {
		served := c.Stats().EventsServed
		err := eng.Drain(ctx)
		var f *watch.Fault
		switch {
		case err == nil:
			if c.Stats().EventsServed == served {
				quiet++
			}
		case errors.As(err, &f) && f.Action == watch.ActRebuild:
			if _, err := eng.RebuildAndCheckpoint(ctx); err != nil {
				return []string{fmt.Sprintf("shadow recovery: rebuild: %v", err)}
			}
		default:
			return []string{fmt.Sprintf("shadow recovery: drain: %v", err)}
		}
	}
	if quiet < 2 {
		return []string{"shadow recovery: no quiet stream after 6 drains (the stream cannot move past its checkpoint)"}
	}
	return reference.Check(refDB(c.Docs()))
}

// stateKey fingerprints the world between top-level steps with stepsLeft
// steps to go: the store's data (memstore.Fingerprint) and every field of
// the world that decides what can happen next (TestExploreKeyCoversTheWorld
// names each field and why a left-out one cannot matter).
func (x *exploreWorld) stateKey(stepsLeft int) [32]byte {
	h := sha256.New()
	x.st.Fingerprint(h)
	l, ok, _ := x.st.Current(context.Background())
	holder := "" // the instance holding an unexpired lease, whether that process lives, and how long it holds
	if ok && l.Expires.After(x.now) {
		p := x.procs[l.Owner[:1]]
		holder = fmt.Sprintf("%s/%v/%s", l.Owner[:1], p != nil && !p.dead && l.Owner == p.id, l.Expires.Sub(x.now))
	}
	fmt.Fprintf(h, "|%v|%d|%s|%d|%d|%d|%d|%d|%d|%d|%d|%v|%d|%v", ok, l.Epoch, holder, stepsLeft, x.writes, x.faults, x.crashes,
		x.renewals, x.edges, x.maxWritten, x.lastPos, x.skew, len(x.subs), x.refused)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// checkState is called between top-level steps: it prunes a state
// explored already with the same budget left, and checks convergence
// (a fresh instance recovering from here reaches the reference).
func (x *exploreWorld) checkState(stepsLeft int) error {
	if x.c.replaying() {
		return nil
	}
	if x.known != nil && stepsLeft > 0 && x.novel == "" {
		if k := x.stateKey(stepsLeft); !x.known[k] {
			x.novel = fmt.Sprintf("a state the pruned exploration never reached, %d steps left; trace:\n%s", stepsLeft, strings.Join(x.trace, "\n"))
		}
	}
	if x.seen != nil && stepsLeft > 0 {
		k := x.stateKey(stepsLeft)
		if x.seen[k] {
			return errPruned
		}
		x.seen[k] = true
		x.states++
	}
	if x.refused {
		return nil
	}
	if d := x.recoverShadow(); len(d) > 0 {
		x.fail("no convergence: a fresh instance recovering from this state without faults leaves %d derived values unlike the reference, first: %s", len(d), d[0])
	}
	return nil
}

// exploreProc is one process of an instance: the store as it sees it
// (every call a choice point), its local clock, and its lease epoch.
type exploreProc struct {
	*memstore.Store
	x      *exploreWorld
	name   string
	id     string // the lease owner id its Leader drew
	skew   time.Duration
	epoch  int64
	dead   bool
	exits  bool // an injected error the fault policy answers by exiting
	cancel context.CancelFunc
	ops    int

	runMode    bool      // A: Leader.Run, whose act ends when the lease is not acquired
	inTerm     bool      // a term runs: its renewal ticker is live
	terms      int       // terms begun in this act
	renewed    time.Time // local send time of the last acquisition or renewal that succeeded
	failed     bool      // an injected error since the last checkpoint saved
	opened     bool      // a stream was opened in this act
	rebuilding bool      // a rebuild the stream started itself runs
}

var errCrashed = errors.New("process crashed")

func (p *exploreProc) local() time.Time { return p.x.now.Add(p.skew) }

func (p *exploreProc) term() string { return fmt.Sprintf("%s@%d", p.name, p.epoch) }

// The paths the explorer counts (TestExplore prints how often each was
// reached and fails when one a bound claims was not).
const (
	pathTwoWrites      = "two source writes"
	pathFaultAndWrite  = "a fault after a source write"
	pathExitSave       = "a save after a failure lands (on the way out)"
	pathRelease        = "Release"
	pathReacquire      = "Run campaigns again after a lost term"
	pathRestart        = "a restarted process, same configured id"
	pathLandedErr      = "a write lands, then its reply is lost"
	pathRefused        = "a write refused for good"
	pathMidScan        = "a source write in the middle of a scan"
	pathStreamRebuild  = "a rebuild the stream starts itself"
	pathRebuildFault   = "a fault inside the stream's rebuild"
	pathTick           = "a renewal tick"
	pathRenewOK        = "a renewal succeeds"
	pathRenewFails     = "a renewal fails (transient)"
	pathRenewSlow      = "a renewal's reply is slow"
	pathRenewRefused   = "a renewal lands late and is refused"
	pathEdgePrefix     = "clock onto "
	pathWindowRefusal  = "the guard refuses a write (window passed)"
	pathDeadlineCutOff = "the guard's deadline cuts a request off"
)

// edge is a clock step onto a deadline or one tick either side of it.
type edge struct {
	name string
	at   time.Time // the server's clock
}

// edgeTick is the clock's tick for the edges: a millisecond, MongoDB's
// date resolution.
const edgeTick = time.Millisecond

// instant is a deadline an edge may land on.
type instant struct {
	name string
	at   time.Time // the server's clock
}

// edges returns the instants, later than now, one tick before, at and
// one tick after each of points.
func (p *exploreProc) edges(points ...instant) []edge {
	x := p.x
	var out []edge
	for _, pt := range points {
		for i, d := range []time.Duration{-edgeTick, 0, edgeTick} {
			t := pt.at.Add(d)
			if t.After(x.now) && !slices.ContainsFunc(out, func(e edge) bool { return e.at.Equal(t) }) {
				out = append(out, edge{pt.name + []string{"-1ms", "", "+1ms"}[i], t})
			}
		}
	}
	return out
}

// renewalEdges are the edges of the end of p's renewal window (TTL −
// Margin after the send of its last successful acquisition or renewal,
// the default Margin being TTL/3), where the guard starts refusing
// writes. In the server's time.
func (p *exploreProc) renewalEdges() []edge {
	if p.renewed.IsZero() {
		return nil
	}
	return p.edges(instant{"renewal window", p.renewed.Add(-p.skew).Add(exploreTTL - exploreTTL/3)})
}

// writeEdges are the edges of the lease's expiry as the store granted it
// to p's epoch and of the deadline of ctx (the write guard's), which a
// request about to leave may straddle. In the server's time.
func (p *exploreProc) writeEdges(ctx context.Context) []edge {
	var points []instant
	if e, ok := p.x.expiry[p.epoch]; ok {
		points = append(points, instant{"lease expiry", e})
	}
	if dl, ok := ctx.Deadline(); ok {
		points = append(points, instant{"guard deadline", dl.Add(-p.skew)})
	}
	return p.edges(points...)
}

// racePoint names the store calls before which a foreign source write
// may land during an act, the renewal ticker fire or the clock step onto
// a deadline: a batch's first reads, the rebuild's cluster time and
// scan, and every guarded write (before every read, the schedules would
// multiply for interleavings these mostly cover).
var racePoint = map[string]bool{"LookupKeys": true, "Submissions": true, "ClusterTime": true, "ScanSubmissions": true,
	"Apply": true, "RecordKeys": true, "SaveCheckpoint": true}

// injected counts a fault injected into p.
func (p *exploreProc) injected() {
	x := p.x
	x.faults++
	if x.writes > 0 {
		x.reached(pathFaultAndWrite)
	}
	if p.rebuilding {
		x.reached(pathRebuildFault)
	}
}

// at is the choice point before each store call.
func (p *exploreProc) at(op string) error {
	x := p.x
	if p.dead || x.violation != "" {
		return p.die()
	}
	p.ops++
	if p.ops > 300 {
		x.fail("no progress: %s made %d store calls in one act", p.name, p.ops)
		return p.die()
	}
	type option struct {
		name string
		do   func() error
	}
	opts := []option{{"proceed", func() error { return nil }}}
	if x.faults < x.b.Faults && x.crashes < x.b.Crashes && !x.b.Transient {
		opts = append(opts, option{"crash", func() error {
			p.injected()
			x.crashes++
			x.logf("%s crashes before %s", p.name, op)
			return p.die()
		}})
	}
	if x.faults < x.b.Faults {
		opts = append(opts, option{"transient", func() error {
			p.injected()
			p.failed = true
			x.logf("%s: %s fails (transient: a network error)", p.name, op)
			return watch.WithClass(watch.Transient, fmt.Errorf("%s: injected network error", op))
		}})
	}
	if x.faults < x.b.Faults && !x.b.Transient {
		opts = append(opts, option{"unauthorized", func() error {
			// The policy exits on it (a privilege revoked): the term
			// ends through the engine's and the Leader's exit paths
			// (what is saved on the way out, the lease released), then
			// the process is gone.
			p.injected()
			p.exits, p.failed = true, true
			x.logf("%s: %s fails (unauthorized: the process will exit)", p.name, op)
			return watch.WithClass(watch.Unauthorized, fmt.Errorf("%s: injected Unauthorized (13)", op))
		}})
	}
	if racePoint[op] && x.writes < x.b.Writes {
		opts = append(opts, option{"foreign write", func() error {
			x.countWrite()
			x.logf("a source write lands before %s's %s:", p.name, op)
			x.nested++
			x.sourceWrite()
			x.nested--
			return nil
		}})
	}
	if racePoint[op] && x.nested == 0 && p.inTerm {
		if x.renewals < x.b.Renewals {
			opts = append(opts, option{"renewal tick", func() error {
				// The Leader's ticker runs on the bubble's clock: sleeping
				// one renewal interval fires it once, and Wait returns
				// once the Leader has handled the tick (renewed, or
				// stopped the engine).
				x.renewals++
				x.reached(pathTick)
				x.logf("%s's renewal ticker fires before %s", p.name, op)
				time.Sleep(exploreTTL / 3)
				synctest.Wait()
				return nil
			}})
		}
		if x.edges < x.b.Edges {
			for _, e := range p.renewalEdges() {
				opts = append(opts, option{"edge", func() error {
					x.edges++
					x.reached(pathEdgePrefix + e.name)
					x.logf("the clock moves onto %s before %s's %s (+%s)", e.name, p.name, op, e.at.Sub(x.now))
					x.now = e.at
					return nil
				}})
			}
		}
	}
	return opts[x.choose(len(opts))].do()
}

func (p *exploreProc) die() error {
	p.dead = true
	if p.cancel != nil {
		p.cancel()
	}
	return errCrashed
}

// send is the choice point of a guarded write, after the write guard
// passed: it may stall (the clock passes the lease's expiry and the other
// instance acts) before the request leaves, when the guard's deadline
// still cuts it off, or with the request in flight, when nothing on the
// client can; or the request may leave only when the clock is on a
// deadline or one tick either side of it. It checks fencing when the
// request leaves.
func (p *exploreProc) send(ctx context.Context, op string) error {
	name, _, _ := strings.Cut(op, "(")
	if err := p.at(name); err != nil {
		return err
	}
	x := p.x
	stall := 0
	var edges []edge
	if x.edges < x.b.Edges && x.nested == 0 {
		edges = p.writeEdges(ctx)
	}
	n := 1 + len(edges)
	if x.faults < x.b.Faults && x.nested == 0 && !x.b.Transient {
		n += 2
	}
	switch c := x.choose(n); {
	case c == 0:
	case c <= len(edges):
		e := edges[c-1]
		x.edges++
		x.reached(pathEdgePrefix + e.name)
		x.logf("%s's %s leaves only when the clock is on %s (+%s)", p.name, op, e.name, e.at.Sub(x.now))
		x.now = e.at
	default:
		stall = c - len(edges)
	}
	// A request leaves only while its context's deadline (the guard's,
	// or the bound of a save on the way out) has not passed.
	cutOff := func() error {
		if dl, ok := ctx.Deadline(); ok && !p.local().Before(dl) {
			x.reached(pathDeadlineCutOff)
			x.logf("%s: %s cut off by the write guard's deadline", p.name, op)
			return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
		}
		return nil
	}
	if stall == 2 {
		if err := cutOff(); err != nil {
			return err
		}
		p.checkSend(op)
	}
	if stall > 0 {
		p.injected()
		other := map[string]string{"A": "B", "B": "A", "R": "A"}[p.name[:1]]
		x.logf("%s stalls after the write guard passed, %s (+%s); %s acts", p.name,
			map[int]string{1: "before sending " + op, 2: "with " + op + " in flight"}[stall], exploreTTL+time.Minute, other)
		x.now = x.now.Add(exploreTTL + time.Minute)
		x.nested++
		x.act(other)
		x.nested--
		if x.violation != "" {
			return p.die()
		}
	}
	if stall != 2 {
		if err := cutOff(); err != nil {
			return err
		}
		p.checkSend(op)
	}
	return nil
}

// checkSend: no write of an earlier epoch leaves a client once a later
// epoch wrote (the guard stops writes before the lease can expire, and a
// later epoch exists only after it expired), and none leaves at or after
// the expiry the store granted its epoch.
func (p *exploreProc) checkSend(op string) {
	x := p.x
	if p.epoch < x.maxWritten {
		x.fail("fencing: %s of epoch %d sent after epoch %d wrote", op, p.epoch, x.maxWritten)
	}
	if e, ok := x.expiry[p.epoch]; ok && !x.now.Before(e) {
		x.fail("fencing: %s of epoch %d sent %s after its lease expired (the server's clock)", op, p.epoch, x.now.Sub(e))
	}
	x.maxWritten = max(x.maxWritten, p.epoch)
}

// replyLost is the choice point after a write landed: its reply may be
// lost (a transient error), so the engine retries a write that landed.
func (p *exploreProc) replyLost(op string, err error) error {
	x := p.x
	if err != nil || x.faults >= x.b.Faults || x.b.Transient || x.nested > 0 || p.dead || x.violation != "" || x.choose(2) == 0 {
		return err
	}
	p.injected()
	p.failed = true
	x.reached(pathLandedErr)
	x.logf("%s: %s landed, its reply is lost (transient: a network error)", p.name, op)
	return watch.WithClass(watch.Transient, fmt.Errorf("%s: injected network error after landing", op))
}

// landed attributes the events a write emitted to its term.
func (p *exploreProc) landed() {
	x := p.x
	for len(x.ownBy) < x.st.OplogLen() {
		x.ownBy = append(x.ownBy, p.term())
	}
}

func (p *exploreProc) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	op := fmt.Sprintf("Apply(%d users, %d entries)", len(w.Users), len(w.Entries))
	if err := p.send(ctx, op); err != nil {
		return bson.Timestamp{}, err
	}
	x := p.x
	if x.faults < x.b.Faults && x.nested == 0 && !x.b.Transient && x.choose(2) == 1 {
		// Refused for good (a document the server will not take): the
		// policy reports and moves past it.
		p.injected()
		x.refused = true
		x.reached(pathRefused)
		x.logf("%s (epoch %d): %s refused for good", p.name, p.epoch, op)
		return bson.Timestamp{}, fmt.Errorf("%s: %w (injected)", op, watch.ErrWriteRejected)
	}
	at, err := p.Store.Apply(ctx, w)
	p.landed()
	x.logf("%s (epoch %d): %s lands: %v", p.name, p.epoch, op, errText(err))
	return at, p.replyLost(op, err)
}

func (p *exploreProc) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	op := fmt.Sprintf("RecordKeys(%d)", len(keys))
	if err := p.send(ctx, op); err != nil {
		return err
	}
	err := p.Store.RecordKeys(ctx, keys)
	p.x.logf("%s (epoch %d): %s lands: %v", p.name, p.epoch, op, errText(err))
	return p.replyLost(op, err)
}

func (p *exploreProc) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	pos := memstore.CheckpointPosition(cp)
	op := fmt.Sprintf("SaveCheckpoint(event %d, epoch %d)", pos, cp.Epoch)
	if err := p.send(ctx, op); err != nil {
		return err
	}
	err := p.Store.SaveCheckpoint(ctx, cp)
	p.x.logf("%s: %s: %v", p.name, op, errText(err))
	if err == nil {
		if p.failed {
			p.x.reached(pathExitSave)
			p.failed = false
		}
		p.checkSave(cp)
	}
	return p.replyLost(op, err)
}

// checkSave checks a checkpoint that was accepted: fenced by its epoch,
// never moving back but to a rebuild's start time, recoverable (no loss),
// and, when every event after it is this term's own echo, the derived
// values equal the reference's (no loss, no double count).
func (p *exploreProc) checkSave(cp resume.Checkpoint) {
	x := p.x
	l, _, _ := x.st.Current(context.Background())
	if cp.Epoch != l.Epoch {
		x.fail("fencing: a checkpoint of epoch %d accepted while epoch %d holds the lease", cp.Epoch, l.Epoch)
		return
	}
	pos := memstore.CheckpointPosition(cp)
	if pos < x.lastPos && (len(cp.Token) > 0 || cp.StartAt.IsZero()) {
		x.fail("checkpoint moved back from event %d to %d, not to a rebuild's start time", x.lastPos, pos)
		return
	}
	x.lastPos = pos
	if x.c.replaying() || x.refused {
		return
	}
	if d := x.recoverShadow(); len(d) > 0 {
		x.fail("no loss: recovering from the checkpoint at event %d leaves %d derived values unlike the reference, first: %s", pos, len(d), d[0])
		return
	}
	for i := pos; i < len(x.ownBy); i++ {
		if x.ownBy[i] != p.term() {
			return
		}
	}
	if d := reference.Check(refDB(x.st.Docs())); len(d) > 0 {
		x.fail("batch done: the checkpoint at event %d covers every source write, yet %d derived values differ from the reference, first: %s", pos, len(d), d[0])
	}
}

func (p *exploreProc) LoadCheckpoint(ctx context.Context) (resume.Checkpoint, bool, error) {
	if err := p.at("LoadCheckpoint"); err != nil {
		return resume.Checkpoint{}, false, err
	}
	return p.Store.LoadCheckpoint(ctx)
}

func (p *exploreProc) Acquire(ctx context.Context, owner string, ttl time.Duration) (l resume.Lease, ok bool, err error) {
	if p.runMode {
		// Leader.Run stands by after a lease it did not get: the act ends.
		defer func() {
			if !ok && p.cancel != nil {
				p.cancel()
			}
		}()
	}
	sent := p.local()
	if err := p.at("Acquire"); err != nil {
		return resume.Lease{}, false, err
	}
	l, ok, err = p.Store.Acquire(ctx, owner, ttl)
	if ok {
		if p.terms > 0 {
			p.x.reached(pathReacquire)
		}
		p.epoch, p.inTerm, p.renewed = l.Epoch, true, sent
		p.terms++
		p.x.expiry[l.Epoch] = l.Expires
		p.x.logf("%s acquires the lease, epoch %d", p.name, l.Epoch)
	} else if err == nil {
		p.x.logf("%s: the lease is held (epoch %d)", p.name, l.Epoch)
	}
	return l, ok, err
}

// Renew is the choice point of a renewal (the Leader's term loop calls
// it at a tick): it lands, fails, lands with its reply slow (the clock
// moves past the guard's margin before the Leader learns of it), or
// lands late, after the lease expired and the other instance acted.
func (p *exploreProc) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	x := p.x
	sent := p.local()
	if p.dead || x.violation != "" {
		return resume.Lease{}, false, p.die()
	}
	// The outcomes are the renewals budget's: a tick is chosen with them.
	slow := false
	c := x.choose(4)
	switch c {
	case 1:
		x.reached(pathRenewFails)
		x.logf("%s: the renewal fails (transient: a network error)", p.name)
		return resume.Lease{}, false, watch.WithClass(watch.Transient, errors.New("renew: injected network error"))
	case 2:
		slow = true
	case 3:
		other := map[string]string{"A": "B", "B": "A", "R": "A"}[p.name[:1]]
		if e := x.expiry[epoch]; e.After(x.now) {
			x.now = e
		}
		x.logf("%s's renewal is in flight until its lease expired; %s acts", p.name, other)
		x.nested++
		x.act(other)
		x.nested--
		if x.violation != "" {
			return resume.Lease{}, false, p.die()
		}
	}
	l, ok, err := p.Store.Renew(ctx, owner, epoch, ttl)
	switch {
	case ok:
		x.expiry[epoch] = l.Expires
		p.renewed = sent
		x.reached(pathRenewOK)
		x.logf("%s renews the lease, epoch %d", p.name, epoch)
	case err == nil:
		if c == 3 {
			x.reached(pathRenewRefused)
		}
		x.logf("%s: the renewal is refused (epoch %d holds the lease)", p.name, l.Epoch)
	}
	if slow {
		x.reached(pathRenewSlow)
		x.now = x.now.Add(exploreTTL / 4)
		x.logf("%s: the renewal's reply arrives %s later", p.name, exploreTTL/4)
	}
	return l, ok, err
}

func (p *exploreProc) Release(ctx context.Context, owner string, epoch int64) error {
	p.inTerm = false
	if p.dead {
		return errCrashed // a dead process releases nothing: its lease runs out
	}
	p.x.reached(pathRelease)
	p.x.logf("%s releases the lease, epoch %d", p.name, epoch)
	return p.Store.Release(ctx, owner, epoch)
}

func (p *exploreProc) Open(ctx context.Context, at watch.Position) (watch.Stream, error) {
	p.opened, p.rebuilding = true, false // a rebuild from here on is the stream's
	if err := p.at("Open"); err != nil {
		return nil, err
	}
	s, err := p.Store.Open(ctx, at)
	if err != nil {
		p.x.logf("%s: the stream cannot open: %v", p.name, err)
		return nil, err
	}
	p.x.logf("%s opens the stream after event %d", p.name, max(memstore.CheckpointPosition(resume.Checkpoint{Token: at.Token, StartAt: at.StartAt}), 0))
	return &exploreStream{Stream: s, p: p}, nil
}

type exploreStream struct {
	watch.Stream
	p     *exploreProc
	quiet int // quiet polls in a row
}

// exploreAwait is how long a quiet poll waits (the getMore's await time),
// and the engine's BatchMaxWait: a batch of what may be the engine's own
// echoes waits one quiet poll for more events.
const exploreAwait = time.Second

// Next ends the act at the third quiet poll in a row (the first two let
// the engine close, process and save the batch it read): the engine's
// context is cancelled and Run returns.
func (s *exploreStream) Next(ctx context.Context) (watch.Event, bool, error) {
	if err := s.p.at("Next"); err != nil {
		return watch.Event{}, false, err
	}
	ev, ok, err := s.Stream.Next(ctx)
	if ok && err == nil {
		s.p.x.logf("%s: stream delivers %s of %s %s (fields %v)", s.p.name, ev.Change.Op, ev.Change.Collection, docID(ev), ev.Change.Fields)
	}
	if ok || err != nil {
		s.quiet = 0
		return ev, ok, err
	}
	s.p.x.now = s.p.x.now.Add(exploreAwait)
	if s.quiet++; s.quiet == 3 && s.p.cancel != nil {
		s.p.cancel()
	}
	return ev, ok, err
}

func docID(ev watch.Event) string {
	c := ev.Change
	switch {
	case !c.SubmissionID.IsZero():
		return short(c.SubmissionID)
	case c.UserID != "":
		return c.UserID
	case !c.HomeworkID.IsZero():
		return "hw"
	case c.ProblemID != 0:
		return strconv.FormatInt(c.ProblemID, 10)
	}
	return ""
}

// Reads: one choice point each.

func (p *exploreProc) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, p, r)
}

func (p *exploreProc) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	if err := p.at("Submissions"); err != nil {
		return nil, nil, err
	}
	return p.Store.Submissions(ctx, users, pairs)
}

func (p *exploreProc) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	if err := p.at("UserStats"); err != nil {
		return nil, nil, err
	}
	return p.Store.UserStats(ctx, users)
}

func (p *exploreProc) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	if err := p.at("SubmissionsByID"); err != nil {
		return nil, nil, err
	}
	return p.Store.SubmissionsByID(ctx, ids)
}

func (p *exploreProc) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	if err := p.at("Users"); err != nil {
		return nil, err
	}
	return p.Store.Users(ctx, names)
}

func (p *exploreProc) Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	if err := p.at("Problems"); err != nil {
		return nil, nil, err
	}
	return p.Store.Problems(ctx, ids)
}

func (p *exploreProc) ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error) {
	if err := p.at("ProblemsListing"); err != nil {
		return nil, err
	}
	return p.Store.ProblemsListing(ctx, homeworks)
}

func (p *exploreProc) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	if err := p.at("Homeworks"); err != nil {
		return nil, nil, err
	}
	return p.Store.Homeworks(ctx, ids, users)
}

func (p *exploreProc) EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]watch.EntryRef, []*materialize.DecodeError, error) {
	if err := p.at("EntryKeys"); err != nil {
		return nil, nil, err
	}
	return p.Store.EntryKeys(ctx, homeworks)
}

func (p *exploreProc) EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error) {
	if err := p.at("EntriesForProblems"); err != nil {
		return nil, err
	}
	return p.Store.EntriesForProblems(ctx, problems)
}

func (p *exploreProc) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	if err := p.at("LookupKeys"); err != nil {
		return nil, err
	}
	return p.Store.LookupKeys(ctx, ids)
}

func (p *exploreProc) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	if err := p.at("ClusterTime"); err != nil {
		return bson.Timestamp{}, err
	}
	if p.opened && !p.rebuilding && p.name[0] != 'R' {
		p.rebuilding = true
		p.x.reached(pathStreamRebuild)
	}
	t, err := p.Store.ClusterTime(ctx)
	p.x.logf("%s reads the cluster time: event %d", p.name, p.x.st.OplogLen())
	return t, err
}

func (p *exploreProc) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	if err := p.at("ScanSubmissions"); err != nil {
		return err
	}
	x := p.x
	x.logf("%s scans the submissions (oplog at event %d)", p.name, x.st.OplogLen())
	first := true
	return p.Store.ScanSubmissions(ctx, func(s materialize.Submission) error {
		if first && x.writes < x.b.Writes && x.nested == 0 && !p.dead && x.violation == "" && x.choose(2) == 1 {
			x.countWrite()
			x.reached(pathMidScan)
			x.logf("a source write lands in the middle of %s's scan:", p.name)
			x.nested++
			x.sourceWrite()
			x.nested--
		}
		first = false
		return fn(s)
	}, bad)
}

func (p *exploreProc) AllProblems(ctx context.Context) ([]*materialize.Problem, []*materialize.DecodeError, error) {
	if err := p.at("AllProblems"); err != nil {
		return nil, nil, err
	}
	return p.Store.AllProblems(ctx)
}

func (p *exploreProc) AllHomeworks(ctx context.Context) ([]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	if err := p.at("AllHomeworks"); err != nil {
		return nil, nil, err
	}
	return p.Store.AllHomeworks(ctx)
}

func (p *exploreProc) AllUsers(ctx context.Context) (map[string]watch.StoredUser, []*materialize.DecodeError, error) {
	if err := p.at("AllUsers"); err != nil {
		return nil, nil, err
	}
	return p.Store.AllUsers(ctx)
}

// exploreResult is what one exploration found and covered.
type exploreResult struct {
	schedules, pruned, states, maxDepth, maxCrashes, crashes int
	violation                                                string
	choices                                                  []int
	trace                                                    []string
	elapsed                                                  time.Duration
	reach                                                    map[string]int
	// The differential check of pruning: pruned states explored again
	// without pruning, the schedules that took, and the states they
	// reached that the pruned exploration never fingerprinted.
	diffChecked, diffSchedules, diffNovel int
	diffFirstNovel                        string
}

// inBubble runs fn in a synctest bubble: the Leader's renewal ticker and
// every real-clock timer run on the bubble's clock, which moves only when
// the explorer sleeps (a renewal tick), so a tick lands where the
// explorer chooses and synctest.Wait tells when the Leader handled it.
func inBubble(t *testing.T, fn func()) {
	synctest.Test(t, func(*testing.T) { fn() })
}

// explore enumerates every choice sequence within b, depth first, and
// stops at the first violation (shortest: at the violation of fewest
// choices among every sequence within b). With diff > 0 it then explores
// again, without pruning, the subtrees of up to diff pruned states
// (spread over the exploration): each state they reach must be one the
// pruned exploration reached (a fingerprint that leaves out a field that
// decides what happens next shows as a new state), and none may violate
// a property.
func explore(t *testing.T, b exploreBound, shortest bool, diff int) exploreResult {
	start := time.Now()
	seen := map[[32]byte]bool{}
	res := exploreResult{reach: map[string]int{}}
	var prefix []int
	var pruned [][]int
	for {
		s := &script{prefix: prefix}
		x := newExploreWorld(s, b, seen)
		var err error
		inBubble(t, func() { err = x.run() })
		res.schedules++
		if errors.Is(err, errPruned) {
			res.pruned++
			pruned = append(pruned, slices.Clone(s.taken))
		}
		res.add(x, s)
		if x.violation != "" && (res.violation == "" || len(s.taken) < len(res.choices)) {
			res.violation, res.choices, res.trace = x.violation, append([]int(nil), s.taken...), x.trace
			if !shortest {
				break
			}
		}
		var ok bool
		if prefix, ok = s.next(); !ok {
			break
		}
	}
	for i := 0; diff > 0 && res.violation == "" && i < len(pruned); i += max(1, len(pruned)/diff) {
		res.diffChecked++
		floor := len(pruned[i])
		prefix := pruned[i]
		for {
			s := &script{prefix: prefix, floor: floor}
			x := newExploreWorld(s, b, nil)
			x.known = seen
			inBubble(t, func() { _ = x.run() })
			res.diffSchedules++
			if x.novel != "" && res.diffFirstNovel == "" {
				res.diffFirstNovel = fmt.Sprintf("after choices %s: %s", formatChoices(s.taken), x.novel)
			}
			if x.novel != "" {
				res.diffNovel++
			}
			if x.violation != "" {
				res.violation, res.choices, res.trace = "without pruning: "+x.violation, append([]int(nil), s.taken...), x.trace
				break
			}
			var ok bool
			if prefix, ok = s.next(); !ok {
				break
			}
		}
	}
	res.elapsed = time.Since(start)
	return res
}

func (res *exploreResult) add(x *exploreWorld, s *script) {
	res.states += x.states
	res.maxDepth = max(res.maxDepth, len(s.taken))
	res.maxCrashes = max(res.maxCrashes, x.crashes)
	res.crashes += x.crashes
	for k, v := range x.reach {
		res.reach[k] += v
	}
}

// replay runs one choice sequence and returns its world.
func replay(t *testing.T, b exploreBound, choices []int) (*exploreWorld, *script) {
	s := &script{prefix: choices, replay: true}
	x := newExploreWorld(s, b, nil)
	inBubble(t, func() { _ = x.run() })
	return x, s
}

// claims lists the paths an exploration within b must reach: TestExplore
// fails when one of them was reached 0 times.
func (b exploreBound) claims() []string {
	var c []string
	add := func(cond bool, paths ...string) {
		if cond {
			c = append(c, paths...)
		}
	}
	add(b.Steps >= 2, pathRelease)
	add(b.Writes >= 2, pathTwoWrites)
	add(b.Writes >= 1 && b.Faults >= 1, pathFaultAndWrite, pathExitSave)
	add(b.Writes >= 1 && b.Steps >= 2, pathMidScan)
	add(b.Faults >= 1 && !b.Transient, pathLandedErr, pathRefused)
	add(b.Faults >= 1, pathStreamRebuild)
	// The stream's own rebuild: after the oplog rolled over (a fault),
	// or for an event it cannot resolve (a source write).
	add(b.Faults >= 2 || b.Writes >= 1 && b.Faults >= 1, pathRebuildFault)
	add(b.Crashes >= 1, pathRestart)
	add(b.Renewals >= 1, pathTick, pathRenewOK, pathRenewFails, pathRenewSlow, pathRenewRefused, pathReacquire)
	add(b.Edges >= 1, pathEdgePrefix+"lease expiry-1ms", pathEdgePrefix+"lease expiry", pathEdgePrefix+"lease expiry+1ms",
		pathEdgePrefix+"guard deadline-1ms", pathEdgePrefix+"guard deadline", pathEdgePrefix+"guard deadline+1ms", pathDeadlineCutOff)
	add(b.Edges >= 1 && b.Renewals >= 1, pathEdgePrefix+"renewal window-1ms", pathEdgePrefix+"renewal window", pathEdgePrefix+"renewal window+1ms")
	return c
}

// reachTable renders res.reach, the paths b claims first.
func reachTable(b exploreBound, res exploreResult) string {
	var sb strings.Builder
	claimed := b.claims()
	keys := slices.Sorted(maps.Keys(res.reach))
	for _, k := range claimed {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return strings.Compare(a, b) })
	for _, k := range keys {
		mark := " "
		if slices.Contains(claimed, k) {
			mark = "*"
		}
		fmt.Fprintf(&sb, "  %s %8d  %s\n", mark, res.reach[k], k)
	}
	return sb.String()
}

// The bounds `make test` explores, each exhaustively: source writes and
// their races with every act (no faults); every fault with the clocks
// skewed; a transient fault with a source write; and renewals (each
// outcome) with a clock step onto a deadline. make explore runs larger
// bounds (the Makefile's EXPLORE_BOUND). MATERIALIZER_EXPLORE_BOUND
// overrides (bounds separated by ';').
const defaultExploreBounds = "steps=3,writes=1,echoes=true;steps=3,faults=1,crashes=1,skew=true;steps=1,writes=1,faults=1,transient=true;steps=2,renewals=1,edges=1"

func exploreBoundsFromEnv(t *testing.T) []exploreBound {
	spec := defaultExploreBounds
	if s := os.Getenv("MATERIALIZER_EXPLORE_BOUND"); s != "" {
		spec = s
	}
	var out []exploreBound
	for _, part := range strings.Split(spec, ";") {
		b, err := parseBound(part, exploreBound{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Echoes && b.Faults > 0 {
			t.Fatalf("bound %s: echoes=true needs faults=0 (dropping every echo drops a deposed instance's late write too)", b)
		}
		if b.Steps > 0 {
			out = append(out, b)
		}
	}
	return out
}

// exploreDiffSamples is how many pruned states of each bound TestExplore
// explores again without pruning (MATERIALIZER_EXPLORE_DIFF overrides).
const exploreDiffSamples = 10

// TestExplore enumerates every schedule of two instances and an online
// rebuild within each bound and checks the protocol's properties at every
// state, then the pruning (explore's diff). It prints how often each path
// was reached and fails when a path the bound claims was not.
// MATERIALIZER_EXPLORE_REPLAY=<choices> replays one sequence of the
// (first) bound and prints its trace; MATERIALIZER_EXPLORE_SHORTEST=1
// searches each whole bound for its shortest counterexample.
func TestExplore(t *testing.T) {
	bounds := exploreBoundsFromEnv(t)
	if r := os.Getenv("MATERIALIZER_EXPLORE_REPLAY"); r != "" {
		choices, err := parseChoices(r)
		if err != nil {
			t.Fatal(err)
		}
		x, s := replay(t, bounds[0], choices)
		t.Logf("replay %s (bound %s), %d choices:\n%s", formatChoices(s.taken), bounds[0], len(s.taken), strings.Join(x.trace, "\n"))
		if x.violation != "" {
			t.Fatalf("violation: %s", x.violation)
		}
		return
	}
	diff := exploreDiffSamples
	if v := os.Getenv("MATERIALIZER_EXPLORE_DIFF"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("MATERIALIZER_EXPLORE_DIFF: %v", err)
		}
		diff = n
	}
	shortest := os.Getenv("MATERIALIZER_EXPLORE_SHORTEST") != ""
	for _, b := range bounds {
		t.Run(b.String(), func(t *testing.T) {
			t.Parallel()
			res := explore(t, b, shortest, diff)
			line := fmt.Sprintf("explore (%s): %d schedules, %d distinct states, %d pruned at a state seen, max depth %d choices, crashes per schedule max %d mean %.2f; pruning: %d pruned states explored again without it (%d schedules), %d new states; %.1fs",
				b, res.schedules, res.states, res.pruned, res.maxDepth, res.maxCrashes, float64(res.crashes)/float64(res.schedules),
				res.diffChecked, res.diffSchedules, res.diffNovel, res.elapsed.Seconds())
			if res.violation != "" {
				t.Fatalf("%s\nviolation: %s\nchoices (%d): %s\nreplay: MATERIALIZER_EXPLORE_BOUND='%s' MATERIALIZER_EXPLORE_REPLAY=%s go test ./watch/ -run '^TestExplore$' -v\ntrace:\n%s",
					line, res.violation, len(res.choices), formatChoices(res.choices), b, formatChoices(res.choices), strings.Join(res.trace, "\n"))
			}
			t.Logf("%s\npaths reached (* claimed by this bound):\n%s", line, reachTable(b, res))
			for _, path := range b.claims() {
				if res.reach[path] == 0 {
					t.Errorf("path %q, claimed by this bound, reached 0 times: the harness no longer reaches it", path)
				}
			}
			if res.diffNovel > 0 {
				t.Errorf("pruning is unsound: exploring %d pruned states again without pruning reached %d states the pruned exploration never did; first %s",
					res.diffChecked, res.diffNovel, res.diffFirstNovel)
			}
		})
	}
}

// stateKeyCovers names every field of the explorer's world and of its
// processes and, for each, how exploreWorld.stateKey covers it or why a
// state that differs only in it has the same futures (explore prunes
// states of equal keys). A field added to either struct fails
// TestExploreKeyCoversTheWorld until it is named here; the differential
// check (explore's diff) tests the reasons on a sample.
var stateKeyCovers = map[string]string{
	"exploreWorld.st":         "covered: memstore.Fingerprint (TestFingerprintCoversEveryField), the lease rendered by holder",
	"exploreWorld.now":        "covered: relative, as the holder's time left; nothing else reads the absolute clock",
	"exploreWorld.writes":     "covered",
	"exploreWorld.faults":     "covered",
	"exploreWorld.crashes":    "covered",
	"exploreWorld.renewals":   "covered",
	"exploreWorld.edges":      "covered",
	"exploreWorld.refused":    "covered",
	"exploreWorld.skew":       "covered",
	"exploreWorld.subs":       "covered: its length names the next submission; the documents are the store's",
	"exploreWorld.maxWritten": "covered",
	"exploreWorld.lastPos":    "covered",
	"exploreWorld.ownBy": "left out: checkSave compares it with the saving term, and every term after this state is new " +
		"(a later epoch), so only how many events there are (the store's) matters",
	"exploreWorld.procs":       "covered: whether the lease holder's process lives; every act builds its Leader and engine anew",
	"exploreWorld.expiry":      "left out: read for the epoch a term acquired or renewed in the same act, never for an older one",
	"exploreWorld.incarnation": "left out: names processes in traces; a restart's behaviour does not depend on the count",
	"exploreWorld.hw":          "left out: the same in every run",
	"exploreWorld.c":           "left out: the chooser, the search itself",
	"exploreWorld.b":           "left out: the same in every run of an exploration",
	"exploreWorld.trace":       "left out: the log",
	"exploreWorld.seen":        "left out: the search's bookkeeping",
	"exploreWorld.known":       "left out: the search's bookkeeping",
	"exploreWorld.novel":       "left out: the search's bookkeeping",
	"exploreWorld.reach":       "left out: counters",
	"exploreWorld.violation":   "left out: a run stops at it",
	"exploreWorld.nested":      "left out: 0 between top-level steps",
	"exploreWorld.states":      "left out: a counter",
	"exploreWorld.metrics":     "left out: a sink no decision reads",

	"exploreProc.Store":      "covered: the world's store",
	"exploreProc.x":          "left out: the world",
	"exploreProc.id":         "covered: compared with the lease's owner",
	"exploreProc.skew":       "covered: the world's skew",
	"exploreProc.dead":       "covered for the lease holder; for another process only its name in traces differs",
	"exploreProc.name":       "left out: in traces and ownBy (covered there)",
	"exploreProc.exits":      "left out: the process is dead at the end of the act that set it",
	"exploreProc.epoch":      "left out: reset at each act",
	"exploreProc.ops":        "left out: reset at each act",
	"exploreProc.terms":      "left out: reset at each act",
	"exploreProc.opened":     "left out: reset at each act",
	"exploreProc.rebuilding": "left out: reset at each act",
	"exploreProc.runMode":    "left out: set at each act",
	"exploreProc.cancel":     "left out: nil between acts",
	"exploreProc.inTerm":     "left out: false after the Release that ends each term; a process that did not release is dead",
	"exploreProc.renewed":    "left out: set at each acquisition",
	"exploreProc.failed":     "left out: counts a path (reach), decides nothing",
}

func TestExploreKeyCoversTheWorld(t *testing.T) {
	mtest.FieldsNamed(t, stateKeyCovers, map[string]reflect.Type{"exploreWorld.": reflect.TypeFor[exploreWorld](), "exploreProc.": reflect.TypeFor[exploreProc]()})
}
