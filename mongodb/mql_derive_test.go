package mongodb

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// mqlDeriveSeeds is how many random databases TestMQLDerivedValues runs.
const mqlDeriveSeeds = 40

// TestMQLDerivedValues runs the daemon over generated Back-End-shaped
// databases with mingo answering every command the adapter's DB methods
// send (connectMingo: the production builders, sent by the driver): a
// rebuild, then batches of change events (each event through
// watch.Pipeline under mingo, then watch.DecodeEvent and
// Engine.ProcessBatch; every other database with Read's one aggregate
// refused as too large, so each part is read by its own method; a batch
// whose derived write failed replayed by a new Engine). After
// the rebuild and after each batch every derived value must be
// internal/reference's, an independent derivation from the documents:
// a wrong operator, field name, threshold or $in list in a builder gives
// a wrong value here, where comparing two engines running the same
// statement cannot see it. Every write must change only derived fields,
// add or remove no studentStatus key, and store its numbers as Back-End
// does (int32 when they fit). `make test-mql` runs it.
func TestMQLDerivedValues(t *testing.T) {
	skipWithoutMingo(t)
	ctx := context.Background()
	srv := &mingoServer{t: t, mingo: startMingo(t), ours: os.Getenv("MATERIALIZER_TEST_MQL_OURS") != ""}
	d := connectMingo(t, srv)
	var batches, events, undecodable, writes, removed, replayed int
	srv.onWrite = func(coll string, before, after []bson.D) {
		writes++
		checkWrite(t, coll, before, after)
	}
	// Back-End removing the entry an entry write names between the
	// daemon's read and its write: the write must not add it back
	// (checkWrite). Its change event joins the next batch.
	// Which writes meet it is decided by the statement, not by the order
	// of a batch's writes (map order), so every run removes the same.
	var pending []bson.D
	var race *rand.Rand
	var raceSeed int
	srv.beforeUpdate = func(coll string, q bson.D, u any) {
		h := fnv.New32a()
		fmt.Fprint(h, raceSeed, q, u)
		if coll != materialize.CollHomework || h.Sum32()%4 != 0 {
			return
		}
		if raw := mqlRemoveEntry(race, srv.colls, lookupD(q, "_id"), u); raw != nil {
			removed++
			pending = append(pending, raw)
		}
	}
	for seed := range mqlDeriveSeeds {
		r := rand.New(rand.NewPCG(uint64(seed), 43))
		race = rand.New(rand.NewPCG(uint64(seed), 47))
		raceSeed = seed
		pending = nil
		srv.colls = mqlDeriveDB(r)
		srv.refuseRead = seed%2 == 1
		if _, err := watch.Rebuild(ctx, d, materialize.NewDeriver(), watch.RebuildOptions{}); err != nil {
			t.Fatalf("seed %d: rebuild: %v", seed, err)
		}
		if diffs := reference.Check(mqlRefDB(srv.colls)); len(diffs) > 0 {
			t.Fatalf("seed %d: after the rebuild, %d derived values differ from the reference:\n  %s", seed, len(diffs), strings.Join(diffs, "\n  "))
		}
		eng := &watch.Engine{Store: d}
		for b := range 6 {
			var evs []watch.Event
			raws := pending
			pending = nil
			for range 1 + r.IntN(3) {
				raws = append(raws, mqlSourceChange(r, srv.colls))
			}
			for _, raw := range raws {
				res, err := srv.run(mqlCase{name: "stream", kind: "aggregate", docs: []bson.D{raw}, stages: watch.Pipeline()})
				if err != nil || res.err != "" {
					t.Fatalf("seed %d: watch.Pipeline: %v %s", seed, err, res.err)
				}
				for _, out := range res.docs {
					ev, err := watch.DecodeEvent(rawOf(out))
					if err != nil {
						undecodable++ // a submission with a string _id: the stream's fault policy, not a read
						continue
					}
					evs = append(evs, ev)
				}
			}
			events += len(evs)
			// One batch in four, its first derived write fails after the
			// key index recorded its pairs: a restarted process (a new
			// Engine) gets the batch again, as the stream redelivers
			// every event after the saved token.
			if r.IntN(4) == 0 {
				srv.failWrites = 1
			}
			err := eng.ProcessBatch(ctx, evs)
			if err != nil && srv.failWrites == 0 {
				replayed++
				eng = &watch.Engine{Store: d}
				err = eng.ProcessBatch(ctx, evs)
			}
			srv.failWrites = 0
			if err != nil {
				t.Fatalf("seed %d batch %d: %v", seed, b, err)
			}
			batches++
			if diffs := reference.Check(mqlRefDB(srv.colls)); len(diffs) > 0 {
				t.Fatalf("seed %d batch %d: %d derived values differ from the reference:\n  %s\nevents: %v", seed, b, len(diffs), strings.Join(diffs, "\n  "), evs)
			}
		}
	}
	fmt.Printf("mql: %d databases rebuilt, %d batches of %d events processed (%d undecodable skipped; %d replayed after a failed write), %d writes (%d entries removed just before their write), over mingo; derived values as the reference's\n",
		mqlDeriveSeeds, batches, events, undecodable, replayed, writes, removed)
	var answered []string
	for _, k := range sortedKeys(srv.answered) {
		answered = append(answered, fmt.Sprintf("%s %d", k, srv.answered[k]))
	}
	fmt.Printf("mql: commands mingo answered: %s\n", strings.Join(answered, ", "))
	// Every kind of statement the adapter sends for derived values: a
	// generator that stops reaching one fails here.
	for _, k := range []string{"find submission", "find problem", "find user", "aggregate homework", "aggregate submission",
		"aggregate submission (refused: too large)",
		"update user", "update homework", "update homework (pipeline statements)", "update user (failed)",
		"find " + DefaultKeysCollection, "update " + DefaultKeysCollection} {
		if srv.answered[k] == 0 {
			t.Errorf("no %s command was sent", k)
		}
	}
}

func mqlRefDB(colls map[string][]bson.D) reference.DB {
	raws := func(coll string) []bson.Raw {
		var out []bson.Raw
		for _, d := range colls[coll] {
			out = append(out, rawOf(d))
		}
		return out
	}
	return reference.DB{Users: raws(materialize.CollUser), Problems: raws(materialize.CollProblem),
		Homeworks: raws(materialize.CollHomework), Submissions: raws(materialize.CollSubmission)}
}

// mqlDeriveDB is a random database: mqlReadDB's odd shapes, as many
// submissions again of the types Back-End writes, homeworks ending among
// the submissions (late ones take the penalty) and entries keyed by
// every problem.
func mqlDeriveDB(r *rand.Rand) map[string][]bson.D {
	hws := []bson.ObjectID{{0x65, 1}, {0x65, 2}, {0x65, 3}}
	db := mqlReadDB(r, mqlUsers, hws)
	for i := range 10 + r.IntN(40) {
		db[materialize.CollSubmission] = append(db[materialize.CollSubmission], mqlDedupe(randomSubmission(r, 100+i, mqlUsers, true)))
	}
	for i, h := range db[materialize.CollHomework] {
		if r.IntN(2) == 0 {
			continue
		}
		end := bson.DateTime(1_700_000_000_000 + int64(r.IntN(6))*1000)
		h = setField(h, "duration", bson.D{{Key: "start", Value: bson.DateTime(1)}, {Key: "end", Value: end}})
		h = setField(h, "penalty", []string{"score = score * 0.5", "score = score - overtime", "score = 0", "score = 1 // 0"}[r.IntN(4)])
		if ss, ok := lookupD(h, "studentStatus").(bson.D); ok {
			for j, u := range ss {
				if ud, ok := u.Value.(bson.D); ok {
					for _, p := range []string{"2", "4", "5"} {
						if r.IntN(2) == 0 {
							ud = setField(ud, p, bson.D{{Key: "score", Value: mqlNumber(r, r.IntN(101))}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}}})
						}
					}
					ss[j].Value = jsOrder(ud)
				}
			}
			h = setField(h, "studentStatus", ss)
		}
		db[materialize.CollHomework][i] = h
	}
	return db
}

// jsOrder orders d's keys as a JavaScript object holds them (integer-like
// keys ascending, first), so mingo's results keep the stored order.
func jsOrder(d bson.D) bson.D {
	isIndex := func(k string) bool {
		n, err := strconv.ParseUint(k, 10, 32)
		return err == nil && strconv.FormatUint(n, 10) == k
	}
	out := slices.Clone(d)
	slices.SortStableFunc(out, func(a, b bson.E) int {
		ia, ib := isIndex(a.Key), isIndex(b.Key)
		switch {
		case ia && ib:
			na, _ := strconv.Atoi(a.Key)
			nb, _ := strconv.Atoi(b.Key)
			return na - nb
		case ia:
			return -1
		case ib:
			return 1
		}
		return 0
	})
	return out
}

// setField sets k in d, in place when present, else appended.
func setField(d bson.D, k string, v any) bson.D {
	for i := range d {
		if d[i].Key == k {
			d[i].Value = v
			return d
		}
	}
	return append(d, bson.E{Key: k, Value: v})
}

// mqlSourceChange makes one change Back-End (or a foreign writer) could
// make to colls, applies it and returns the change event the server
// emits for it, before the stream's pipeline.
func mqlSourceChange(r *rand.Rand, colls map[string][]bson.D) bson.D {
	subs := colls[materialize.CollSubmission]
	ev := func(op, coll string, id any, kv ...bson.E) bson.D {
		return mqlEvent(r, op, coll, append([]bson.E{{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}}}, kv...)...)
	}
	updated := func(fields bson.D) bson.E {
		return bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: fields}, {Key: "removedFields", Value: bson.A{}}}}
	}
	switch k := r.IntN(10); {
	case k < 3 || len(subs) == 0: // a new submission, judged or not
		d := randomSubmission(r, 1000+r.IntN(1000), mqlUsers, r.IntN(4) != 0)
		d = mqlDedupe(d)
		colls[materialize.CollSubmission] = append(subs, d)
		return ev("insert", materialize.CollSubmission, lookupD(d, "_id"), bson.E{Key: "fullDocument", Value: d})
	case k < 6: // judged, rejudged, or moved to another problem or user
		i := r.IntN(len(subs))
		var fields bson.D
		switch r.IntN(4) {
		case 0:
			fields = bson.D{{Key: "problem", Value: mqlNumber(r, 1+r.IntN(5))}}
		case 1:
			fields = bson.D{{Key: "user", Value: mqlUsers[r.IntN(len(mqlUsers))]}}
		default:
			fields = bson.D{{Key: "status", Value: int32(r.IntN(3) - 1)}, {Key: "score", Value: []any{int32(100), int32(0), int32(60), int64(100)}[r.IntN(4)]}}
		}
		for _, f := range fields {
			subs[i] = setField(subs[i], f.Key, f.Value)
		}
		return ev("update", materialize.CollSubmission, lookupD(subs[i], "_id"), updated(fields))
	case k < 7: // deleted
		i := r.IntN(len(subs))
		id := lookupD(subs[i], "_id")
		colls[materialize.CollSubmission] = append(subs[:i:i], subs[i+1:]...)
		return ev("delete", materialize.CollSubmission, id)
	case k < 8 && len(colls[materialize.CollProblem]) > 0: // a problem added to or removed from homeworks
		ps := colls[materialize.CollProblem]
		i := r.IntN(len(ps))
		hw := bson.A{}
		for _, h := range []bson.ObjectID{{0x65, 1}, {0x65, 2}, {0x65, 3}} {
			if r.IntN(2) == 0 {
				hw = append(hw, h)
			}
		}
		ps[i] = setField(ps[i], "homeworks", hw)
		return ev("update", materialize.CollProblem, lookupD(ps[i], "_id"), updated(bson.D{{Key: "homeworks", Value: hw}}))
	default: // a homework's deadline or penalty changed, or a student added
		hs := colls[materialize.CollHomework]
		if len(hs) == 0 {
			return mqlEvent(r, "update", "announcement", bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: int32(1)}}}, updated(bson.D{{Key: "title", Value: "t"}}))
		}
		i := r.IntN(len(hs))
		var fields bson.D
		if ss, ok := lookupD(hs[i], "studentStatus").(bson.D); ok && r.IntN(2) == 0 {
			u := mqlUsers[r.IntN(2)] // safe path components: Back-End's own update
			if lookupD(ss, u) == missing {
				ud := bson.D{{Key: "1", Value: bson.D{{Key: "score", Value: int32(0)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}}}}}
				hs[i] = setField(hs[i], "studentStatus", append(ss, bson.E{Key: u, Value: ud}))
				fields = bson.D{{Key: "studentStatus." + u, Value: ud}}
			}
		}
		if fields == nil {
			dur := bson.D{{Key: "start", Value: bson.DateTime(1)}, {Key: "end", Value: bson.DateTime(1_700_000_000_000 + int64(r.IntN(6))*1000)}}
			hs[i] = setField(hs[i], "duration", dur)
			fields = bson.D{{Key: "duration", Value: dur}}
		}
		return ev("update", materialize.CollHomework, lookupD(hs[i], "_id"), updated(fields))
	}
}

// mqlRemoveEntry removes from homework id in colls the studentStatus
// entry an entry write's update u names (by path, {$set:
// {"studentStatus.u.p": ...}}, or by a pipeline's $literal user and
// problem key, in that order), and returns the change event.
func mqlRemoveEntry(r *rand.Rand, colls map[string][]bson.D, id, u any) bson.D {
	var user, pk string
	if set, ok := lookupD(asD(u), "$set").(bson.D); ok {
		for _, e := range set {
			if parts := strings.SplitN(e.Key, ".", 3); len(parts) == 3 && parts[0] == materialize.FieldStudentStatus {
				user, pk = parts[1], parts[2]
			}
		}
	}
	if user == "" {
		var lits []string
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case bson.D:
				for _, e := range x {
					if s, ok := e.Value.(string); ok && e.Key == "$literal" {
						lits = append(lits, s)
					}
					walk(e.Value)
				}
			case bson.A:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(u)
		if len(lits) < 2 {
			return nil
		}
		user, pk = lits[0], lits[1]
	}
	for i, h := range colls[materialize.CollHomework] {
		if !equal(lookupD(h, "_id"), id) {
			continue
		}
		ss, _ := lookupD(h, materialize.FieldStudentStatus).(bson.D)
		for j, u := range ss {
			ud, ok := u.Value.(bson.D)
			if u.Key != user || !ok {
				continue
			}
			kept := bson.D{}
			for _, p := range ud {
				if p.Key != pk {
					kept = append(kept, p)
				}
			}
			if len(kept) == len(ud) {
				return nil
			}
			ss[j].Value = kept
			colls[materialize.CollHomework][i] = setField(h, materialize.FieldStudentStatus, ss)
			return mqlEvent(r, "update", materialize.CollHomework,
				bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}},
				bson.E{Key: "updateDescription", Value: bson.D{{Key: "updatedFields", Value: bson.D{}},
					{Key: "removedFields", Value: bson.A{materialize.FieldStudentStatus + "." + user + "." + pk}}}})
		}
	}
	return nil
}

func asD(v any) bson.D {
	d, _ := v.(bson.D)
	return d
}

// checkWrite fails t unless an update changed only derived values, as
// Back-End types them: user's submission, AC_submission (int32 when they
// fit) and AC_problem_ids (of int32), and existing studentStatus entries
// (score, problemStatus, rawScore int32 or null; submissionIds strings),
// no key added or removed there.
func checkWrite(t *testing.T, coll string, before, after []bson.D) {
	t.Helper()
	if coll != materialize.CollUser && coll != materialize.CollHomework {
		return // the daemon's own collections
	}
	if len(before) != len(after) {
		t.Errorf("write to %s: %d documents, then %d", coll, len(before), len(after))
		return
	}
	for i := range before {
		b, a := before[i], after[i]
		if reflect.DeepEqual(b, a) {
			continue
		}
		for _, e := range a {
			old := lookupD(b, e.Key)
			if reflect.DeepEqual(old, e.Value) {
				continue
			}
			switch {
			case coll == materialize.CollUser && (e.Key == materialize.FieldSubmission || e.Key == materialize.FieldACSubmission):
				if _, ok := e.Value.(int32); !ok {
					t.Errorf("user %v: %s written as %T %v, want an int32", lookupD(a, "_id"), e.Key, e.Value, e.Value)
				}
			case coll == materialize.CollUser && e.Key == materialize.FieldACProblemIDs:
				ids, _ := e.Value.(bson.A)
				for _, p := range ids {
					if _, ok := p.(int32); !ok {
						t.Errorf("user %v: AC_problem_ids element %T %v, want an int32", lookupD(a, "_id"), p, p)
					}
				}
			case coll == materialize.CollHomework && e.Key == materialize.FieldStudentStatus:
				checkEntriesWrite(t, lookupD(a, "_id"), old, e.Value)
			default:
				t.Errorf("write to %s %v changed %s: %v, then %v", coll, lookupD(a, "_id"), e.Key, old, e.Value)
			}
		}
		for _, e := range b {
			if lookupD(a, e.Key) == missing {
				t.Errorf("write to %s %v removed %s", coll, lookupD(a, "_id"), e.Key)
			}
		}
	}
}

func checkEntriesWrite(t *testing.T, id, before, after any) {
	t.Helper()
	b, _ := before.(bson.D)
	a, ok := after.(bson.D)
	if !ok || len(a) != len(b) {
		t.Errorf("homework %v: studentStatus %v, then %v", id, before, after)
		return
	}
	for i, u := range a {
		bu, _ := b[i].Value.(bson.D)
		au, ok := u.Value.(bson.D)
		if u.Key != b[i].Key || !ok || len(au) != len(bu) {
			if !reflect.DeepEqual(u, b[i]) {
				t.Errorf("homework %v: studentStatus.%s was %v, the write left %v (it may add or remove no entry)", id, u.Key, b[i].Value, u.Value)
			}
			continue
		}
		for j, p := range au {
			if p.Key != bu[j].Key {
				t.Errorf("homework %v: studentStatus.%s keys %v, then %v", id, u.Key, bu, au)
				break
			}
			if reflect.DeepEqual(p.Value, bu[j].Value) {
				continue
			}
			entry, _ := p.Value.(bson.D)
			for _, f := range entry {
				switch f.Key {
				case "score", "problemStatus", "rawScore":
					if _, ok := f.Value.(int32); !ok && !(f.Key == "problemStatus" && f.Value == nil) {
						t.Errorf("homework %v entry %s.%s: %s written as %T %v, want an int32", id, u.Key, p.Key, f.Key, f.Value, f.Value)
					}
				case "submissionIds":
					ids, _ := f.Value.(bson.A)
					for _, s := range ids {
						if _, ok := s.(string); !ok {
							t.Errorf("homework %v entry %s.%s: submissionIds element %T", id, u.Key, p.Key, s)
						}
					}
				default:
					t.Errorf("homework %v entry %s.%s: wrote field %s", id, u.Key, p.Key, f.Key)
				}
			}
		}
	}
}
