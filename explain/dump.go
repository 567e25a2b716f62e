package explain

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/dump"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// ReadDump reads from the mongodump directory d what explaining (user,
// problem) reads, as Read would read it from a database the dump was
// restored into: each source collection is streamed once (dump.Dir.Each,
// every document validated), in dump.Sources order, keeping only the
// pair's documents, so memory is bounded by the user's submissions and
// the homeworks the pair reads (restricted to the user), not by the dump.
// A document repeated under one _id (mongodump writes none; an edited
// dump might) counts as its last copy, listed where the _id first
// appeared. A document without _id is an error, as a database would
// refuse it.
func ReadDump(ctx context.Context, d dump.Dir, user string, problem int64) (*Input, error) {
	r := &dumpReader{
		user: user, problem: problem, pk: materialize.ProblemKey(problem), userKey: key(user),
		subs: latest[subVersion]{}, problems: latest[problemVersion]{},
		listed: map[bson.ObjectID]bool{}, held: map[bson.ObjectID]bool{}, mine: map[bson.ObjectID]bool{},
		hws: map[bson.ObjectID]homeworkVersion{},
	}
	for _, coll := range dump.Sources {
		see := map[string]func(int, string, bson.RawValue, bson.Raw){
			materialize.CollUser:       r.user1,
			materialize.CollProblem:    r.problem1,
			materialize.CollHomework:   r.homework1,
			materialize.CollSubmission: r.submission1,
		}[coll]
		if coll == materialize.CollHomework && r.prob != nil {
			for _, id := range r.prob.Homeworks {
				r.listed[id] = true
			}
		}
		n := 0
		noID := false
		err := d.Each(coll, true, func(doc bson.Raw) error {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if noID {
				return nil // refused below; the file is still read to its end, to report a corrupt one first
			}
			id, err := doc.LookupErr("_id")
			if err != nil {
				noID = true
				return nil
			}
			see(n, docKey(id), id, doc)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if noID {
			return nil, fmt.Errorf("load dump: load %s: document without _id", coll)
		}
		if coll == materialize.CollProblem {
			for _, v := range r.problems.inOrder() {
				if v.bad != nil {
					r.probBad = append(r.probBad, v.bad)
				} else {
					r.prob = v.p
				}
			}
		}
	}
	return r.input(), nil
}

// dumpReader keeps what ReadDump has read of the pair so far.
type dumpReader struct {
	user     string
	problem  int64
	pk       string // the problem's studentStatus key
	userKey  string // the user document's _id key
	hasUser  bool
	stored   watch.StoredUser
	subs     latest[subVersion]
	problems latest[problemVersion]
	prob     *materialize.Problem
	probBad  []*materialize.DecodeError
	listed   map[bson.ObjectID]bool // problem.homeworks
	held     map[bson.ObjectID]bool // homeworks holding an entry for the problem
	mine     map[bson.ObjectID]bool // homeworks holding the user's entry for it
	hws      map[bson.ObjectID]homeworkVersion
}

type subVersion struct {
	s   materialize.Submission
	bad *materialize.DecodeError
}

type problemVersion struct {
	p   *materialize.Problem
	bad *materialize.DecodeError
}

type homeworkVersion struct {
	h   *watch.HomeworkDoc
	bad *materialize.DecodeError
}

// user1 reads one user document: the user's, when its _id is the name.
func (r *dumpReader) user1(_ int, k string, _ bson.RawValue, doc bson.Raw) {
	if k == r.userKey {
		st, ok := materialize.DecodeUserStats(doc)
		r.hasUser, r.stored = true, watch.StoredUser{Stats: st, OK: ok}
	}
}

// problem1 reads one problem document: one whose _id is the problemId,
// or an unreadable one whose _id reads as it.
func (r *dumpReader) problem1(n int, k string, id bson.RawValue, doc bson.Raw) {
	p, err := materialize.DecodeProblem(doc)
	if err != nil {
		want, ok := id.AsInt64OK()
		r.problems.see(k, n, problemVersion{bad: err.(*materialize.DecodeError)}, ok && want == r.problem)
		return
	}
	r.problems.see(k, n, problemVersion{p: &p}, p.ID == r.problem)
}

// homework1 reads one homework document: whether it holds an entry for
// the problem, the user's in particular, and, when the problem lists it
// or it holds the user's entry, the homework restricted to the user.
func (r *dumpReader) homework1(_ int, _ string, idv bson.RawValue, doc bson.Raw) {
	id, ok := idv.ObjectIDOK()
	if !ok {
		return // unreadable (the _id of a homework is an ObjectId) and never named
	}
	h, err := materialize.DecodeHomework(doc)
	held, mine := false, false
	if err == nil {
		for u, ps := range h.Students {
			if _, ok := ps[r.pk]; ok {
				held = true
				mine = mine || u == r.user
			}
		}
	}
	set(r.held, id, held)
	set(r.mine, id, mine)
	switch {
	case !r.listed[id] && !mine:
		delete(r.hws, id)
	case err != nil:
		r.hws[id] = homeworkVersion{bad: err.(*materialize.DecodeError)}
	default:
		r.hws[id] = homeworkVersion{h: restrict(h, doc, r.user)}
	}
}

// submission1 reads one submission document: the user's, or an
// unreadable one whose user field is the user.
func (r *dumpReader) submission1(n int, k string, _ bson.RawValue, doc bson.Raw) {
	s, err := materialize.DecodeSubmission(doc)
	if err != nil {
		u, ok := doc.Lookup("user").StringValueOK()
		r.subs.see(k, n, subVersion{bad: err.(*materialize.DecodeError)}, ok && u == r.user)
		return
	}
	r.subs.see(k, n, subVersion{s: s}, s.User == r.user)
}

func (r *dumpReader) input() *Input {
	p := &Input{User: r.user, Problem: r.problem, HasUser: r.hasUser, StoredUser: r.stored, ProblemDoc: r.prob,
		HasEntry: len(r.mine) > 0, Held: len(r.held) > 0, Homeworks: map[bson.ObjectID]*watch.HomeworkDoc{}}
	for _, v := range r.subs.inOrder() {
		if v.bad != nil {
			p.Malformed = append(p.Malformed, v.bad)
		} else {
			p.Submissions = append(p.Submissions, v.s)
		}
	}
	p.Malformed = append(p.Malformed, r.probBad...)
	var ids []bson.ObjectID
	if r.prob != nil {
		ids = append(ids, r.prob.Homeworks...)
	}
	for id := range r.mine {
		ids = append(ids, id)
	}
	for _, id := range sortedIDs(ids) {
		switch v, ok := r.hws[id]; {
		case !ok:
		case v.bad != nil:
			p.Malformed = append(p.Malformed, v.bad)
		default:
			p.Homeworks[id] = v.h
		}
	}
	p.Malformed = append(p.Malformed, skipped(p.Homeworks)...)
	return p
}

// restrict returns h, decoded from doc, with its students, stored entry
// values and skipped parts restricted to user, as watch.Source.Homeworks
// returns a homework for one user: among repeated user keys of
// studentStatus the last document wins. The values are copied out of doc.
func restrict(h materialize.Homework, doc bson.Raw, user string) *watch.HomeworkDoc {
	var students map[string]map[string]struct{}
	if h.Students != nil {
		students = map[string]map[string]struct{}{}
		if ps, ok := h.Students[user]; ok {
			students[user] = ps
		}
	}
	h.Students = students
	h.Skipped = slices.DeleteFunc(slices.Clone(h.Skipped), func(e *materialize.DecodeError) bool {
		return e.Field != materialize.FieldStudentStatus+"."+user
	})
	d := &watch.HomeworkDoc{Homework: h, Stored: map[string]map[string]bson.RawValue{}}
	if _, ok := students[user]; !ok {
		return d
	}
	ss, err := doc.LookupErr(materialize.FieldStudentStatus)
	if err != nil {
		return d
	}
	ssd, ok := ss.DocumentOK()
	if !ok {
		return d
	}
	elems, _ := ssd.Elements()
	for _, ue := range elems {
		if ue.Key() != user {
			continue
		}
		ud, ok := ue.Value().DocumentOK()
		if !ok {
			continue
		}
		pes, _ := ud.Elements()
		m := make(map[string]bson.RawValue, len(pes))
		for _, e := range pes {
			v := e.Value()
			m[e.Key()] = bson.RawValue{Type: v.Type, Value: bytes.Clone(v.Value)}
		}
		d.Stored[user] = m
	}
	return d
}

func set(m map[bson.ObjectID]bool, id bson.ObjectID, on bool) {
	if on {
		m[id] = true
	} else {
		delete(m, id)
	}
}

// key renders a string _id as docKey does.
func key(name string) string {
	t, data, _ := bson.MarshalValue(name)
	return docKey(bson.RawValue{Type: t, Value: data})
}

// docKey renders an _id value as a map key: its type and bytes, so that
// 7 and 7.0 are two documents, as they are to MongoDB's _id index.
func docKey(v bson.RawValue) string { return string(rune(v.Type)) + string(v.Value) }

// latest keeps, for each _id key whose documents matter, the last one,
// and the position the key first appeared at: a repeated _id replaces
// the document in place, as loading the dump into a database would.
type latest[V any] map[string]*version[V]

type version[V any] struct {
	first   int
	v       V
	matters bool
}

// see records document n (1-based) of key k, holding v; matters says
// whether the document is one to keep.
func (l latest[V]) see(k string, n int, v V, matters bool) {
	e, ok := l[k]
	switch {
	case ok && matters:
		e.v, e.matters = v, true
	case ok:
		var zero V
		e.v, e.matters = zero, false // kept for its position only
	case matters:
		l[k] = &version[V]{first: n, v: v, matters: true}
	}
}

// inOrder returns the values that matter, by first position.
func (l latest[V]) inOrder() []V {
	es := make([]*version[V], 0, len(l))
	for _, e := range l {
		if e.matters {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b *version[V]) int { return a.first - b.first })
	out := make([]V, len(es))
	for i, e := range es {
		out[i] = e.v
	}
	return out
}
