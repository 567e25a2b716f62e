package mongodb

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

// The cases of TestMQLAgainstMingo: every statement the adapter sends,
// built by its builder, over generated documents. The shapes are those
// MongoDB 4.4-8.0 produce: change events with and without wallTime,
// updateDescription.truncatedArrays and disambiguatedPaths; numbers as
// int, long and double; fields missing and null; names with '.' and a
// leading '$'; documents Back-End never writes (arrays and symbols where
// it writes strings, strings where it writes numbers). Integer-like keys
// ("1", "3") are listed in ascending order, before the others, as
// JavaScript objects keep them.

// mqlSeeds is how many random inputs each generated family gets.
const mqlSeeds = 150

func mqlCases(t *testing.T) []mqlCase {
	var cases []mqlCase
	cases = append(cases, mqlStreamCases()...)
	cases = append(cases, mqlReadCases(t)...)
	cases = append(cases, mqlWriteCases()...)
	cases = append(cases, mqlKeyCases()...)
	cases = append(cases, mqlLeaseCases()...)
	return cases
}

// mqlNumber is n as an int, a long or a double.
func mqlNumber(r *rand.Rand, n int) any {
	switch r.IntN(3) {
	case 0:
		return int32(n)
	case 1:
		return int64(n)
	}
	return float64(n)
}

var mqlUsers = []string{"a", "b", "c.d", "$e"}

// mqlEvent is a change event as the server emits it before the stream's
// pipeline: the fields every event has, wallTime on 6.0+.
func mqlEvent(r *rand.Rand, op, coll string, kv ...bson.E) bson.D {
	d := bson.D{{Key: "_id", Value: bson.D{{Key: "_data", Value: fmt.Sprintf("82%014X", r.Uint64()>>8)}}},
		{Key: "operationType", Value: op},
		{Key: "clusterTime", Value: bson.Timestamp{T: 1_800_000_000 + uint32(r.IntN(100)), I: uint32(1 + r.IntN(5))}}}
	if r.IntN(2) == 0 {
		d = append(d, bson.E{Key: "wallTime", Value: bson.DateTime(1_800_000_000_000 + int64(r.IntN(1000)))})
	}
	if coll != "" {
		d = append(d, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: coll}}})
	}
	return append(d, kv...)
}

// mqlUpdatedFields returns an update's updatedFields of a document of
// coll, and the dotted names of those whose path is ambiguous (a user
// name with a '.').
func mqlUpdatedFields(r *rand.Rand, coll string) (bson.D, []string) {
	var d bson.D
	var ambiguous []string
	add := func(k string, v any) {
		if lookupD(d, k) == missing {
			d = append(d, bson.E{Key: k, Value: v})
		}
	}
	entry := func() any {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return mqlNumber(r, r.IntN(101))
		}
		return bson.D{{Key: "score", Value: mqlNumber(r, r.IntN(101))}, {Key: "problemStatus", Value: nil},
			{Key: "submissionIds", Value: bson.A{"65a0"}}}
	}
	small := func() any {
		switch r.IntN(6) {
		case 0:
			return nil
		case 1:
			return true
		case 2:
			return "x"
		}
		return mqlNumber(r, r.IntN(1000))
	}
	switch coll {
	case materialize.CollSubmission:
		for range 1 + r.IntN(4) {
			switch r.IntN(7) {
			case 0:
				add("status", mqlNumber(r, r.IntN(3)-1))
			case 1:
				add("score", mqlNumber(r, r.IntN(101)))
			case 2:
				u := mqlUsers[r.IntN(len(mqlUsers))]
				add("user", []any{u, bson.A{u}, bson.Symbol(u), nil, int32(1)}[r.IntN(5)])
			case 3:
				add("problem", []any{int32(3), int64(4), float64(5), float64(2.5), "3", nil}[r.IntN(6)])
			case 4:
				add("tasks.0.cases", bson.A{bson.D{{Key: "status", Value: int32(0)}}})
			case 5:
				add("code", "print(1)")
			default:
				add("tasks", bson.A{})
			}
		}
	case materialize.CollHomework:
		switch r.IntN(3) {
		case 0: // the daemon's own write, or a foreign one of an entry
			u := mqlUsers[r.IntN(len(mqlUsers))]
			p := []string{"1", "3", "x"}[r.IntN(3)]
			k := "studentStatus." + u + "." + p
			add(k, entry())
			if r.IntN(3) == 0 {
				add("studentStatus."+mqlUsers[r.IntN(len(mqlUsers))]+".1", entry())
			}
			for _, e := range d {
				if n := len(splitDots(e.Key)); n != 3 {
					ambiguous = append(ambiguous, e.Key)
				}
			}
		case 1: // many small fields: the names cap decides
			if r.IntN(2) == 0 {
				for i, v := range mqlExcessValues(r, watch.MaxNamesExcess+r.IntN(9)-4) {
					add("studentStatus.u"+strconv.Itoa(i)+".1", v)
				}
				break
			}
			n := 10 + r.IntN(60)
			for i := range n {
				add("studentStatus.u"+strconv.Itoa(i)+".1", small())
			}
		default:
			add("penalty", "score = score")
			if r.IntN(2) == 0 {
				add("duration", bson.D{{Key: "start", Value: bson.DateTime(1)}, {Key: "end", Value: bson.DateTime(2)}})
			}
		}
	case materialize.CollUser:
		fields := []string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs, "email", "displayedName"}
		for range 1 + r.IntN(5) {
			f := fields[r.IntN(len(fields))]
			switch f {
			case materialize.FieldACProblemIDs:
				add(f, bson.A{mqlNumber(r, 1), mqlNumber(r, 2)})
			case "email", "displayedName":
				add(f, "x@y")
			default:
				add(f, mqlNumber(r, r.IntN(50)))
			}
		}
	case materialize.CollProblem:
		add("homeworks", bson.A{bson.ObjectID{0x65, byte(r.IntN(3))}})
		if r.IntN(2) == 0 {
			add("problemName", "p")
		}
		if r.IntN(3) == 0 {
			for i := range 30 + r.IntN(20) {
				add("testCase.tasks."+strconv.Itoa(i), small())
			}
		}
	default:
		add("title", "t")
	}
	return d, ambiguous
}

// mqlExcessValues returns values whose names' excess over their fields
// (20 - the size of {v: value}, as watch.Pipeline counts it) sums to
// exactly target: events on either side of the names cap, and on it.
func mqlExcessValues(r *rand.Rand, target int) []any {
	excess := func(v any) int { return 20 - len(rawOf(bson.D{{Key: "v", Value: v}})) }
	var out []any
	left := target
	for left > 12 {
		v := []any{nil, true, int32(1), int64(2), float64(3), "x"}[r.IntN(6)]
		out = append(out, v)
		left -= excess(v)
	}
	switch {
	case left >= 8: // an int (8), a bool (11) or null (12), then a string
		for _, v := range []any{nil, true, int32(1)} {
			if excess(v) <= left {
				out = append(out, v)
				left -= excess(v)
				break
			}
		}
	}
	if left > 0 || r.IntN(2) == 0 {
		// a string of 7 - left bytes: {v: s} is 13 + len(s) bytes
		out = append(out, strings.Repeat("s", 7-left))
	}
	return out
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// mqlFullDocument is the document of an insert or replace.
func mqlFullDocument(r *rand.Rand, coll string, id any) bson.D {
	switch coll {
	case materialize.CollSubmission:
		d := bson.D{{Key: "_id", Value: id}}
		u := mqlUsers[r.IntN(len(mqlUsers))]
		if v := []any{u, u, bson.A{u}, bson.Symbol(u), nil, missing}[r.IntN(6)]; v != missing {
			d = append(d, bson.E{Key: "user", Value: v})
		}
		if v := []any{int32(3), int64(4), float64(5), nil, missing}[r.IntN(5)]; v != missing {
			d = append(d, bson.E{Key: "problem", Value: v})
		}
		return append(d, bson.E{Key: "status", Value: int32(0)}, bson.E{Key: "score", Value: mqlNumber(r, 100)}, bson.E{Key: "code", Value: "x"})
	case materialize.CollHomework:
		return bson.D{{Key: "_id", Value: id}, {Key: "homeworkName", Value: "h"},
			{Key: "studentStatus", Value: bson.D{{Key: "a", Value: bson.D{{Key: "1", Value: bson.D{{Key: "score", Value: int32(1)}}}}}}}}
	case materialize.CollUser:
		return bson.D{{Key: "_id", Value: id}, {Key: materialize.FieldSubmission, Value: mqlNumber(r, 3)}}
	}
	return bson.D{{Key: "_id", Value: id}, {Key: "x", Value: int32(1)}}
}

// mqlStreamCases runs watch.Pipeline over generated change events.
func mqlStreamCases() []mqlCase {
	colls := []string{materialize.CollSubmission, materialize.CollHomework, materialize.CollProblem, materialize.CollUser, "announcement"}
	var cases []mqlCase
	for seed := range 4 * mqlSeeds {
		r := rand.New(rand.NewPCG(uint64(seed), 23))
		coll := colls[r.IntN(len(colls))]
		var id any = bson.ObjectID{0x65, byte(seed)}
		if coll == materialize.CollUser {
			id = mqlUsers[r.IntN(len(mqlUsers))]
		}
		key := bson.E{Key: "documentKey", Value: bson.D{{Key: "_id", Value: id}}}
		var ev bson.D
		switch op := r.IntN(12); {
		case op < 5:
			updated, ambiguous := mqlUpdatedFields(r, coll)
			ud := bson.D{{Key: "updatedFields", Value: updated}}
			removed := bson.A{}
			if r.IntN(3) == 0 {
				removed = append(removed, []string{"user", "problem", "tasks.1", "studentStatus.b"}[r.IntN(4)])
			}
			ud = append(ud, bson.E{Key: "removedFields", Value: removed})
			if r.IntN(2) == 0 { // truncatedArrays: present or absent, as server versions differ
				ta := bson.A{}
				if r.IntN(3) == 0 {
					ta = append(ta, bson.D{{Key: "field", Value: "tasks"}, {Key: "newSize", Value: int32(r.IntN(3))}})
				}
				ud = append(ud, bson.E{Key: "truncatedArrays", Value: ta})
			}
			if len(ambiguous) > 0 && r.IntN(2) == 0 { // disambiguatedPaths: 6.1+ with showExpandedEvents, 8.2+ always
				dp := bson.D{}
				for _, k := range ambiguous {
					parts := splitDots(k)
					a := bson.A{parts[0], parts[1] + "." + parts[2]}
					for _, p := range parts[3:] {
						a = append(a, p)
					}
					dp = append(dp, bson.E{Key: k, Value: a})
				}
				ud = append(ud, bson.E{Key: "disambiguatedPaths", Value: dp})
			}
			ev = mqlEvent(r, "update", coll, key, bson.E{Key: "updateDescription", Value: ud})
			if r.IntN(4) == 0 { // fullDocument: updateLookup (not asked for, but a shape)
				ev = append(ev, bson.E{Key: "fullDocument", Value: mqlFullDocument(r, coll, id)})
			}
		case op < 7:
			ev = mqlEvent(r, []string{"insert", "replace"}[r.IntN(2)], coll, key, bson.E{Key: "fullDocument", Value: mqlFullDocument(r, coll, id)})
		case op < 8:
			ev = mqlEvent(r, "delete", coll, key)
		case op < 9:
			ev = mqlEvent(r, "drop", coll)
		case op < 10:
			ev = mqlEvent(r, "rename", coll, bson.E{Key: "to", Value: bson.D{{Key: "db", Value: "normal-oj"}, {Key: "coll", Value: coll + "_old"}}})
		case op < 11:
			ev = mqlEvent(r, "dropDatabase", "")
			ev = append(ev, bson.E{Key: "ns", Value: bson.D{{Key: "db", Value: "normal-oj"}}})
		default:
			ev = mqlEvent(r, "invalidate", "")
		}
		cases = append(cases, mqlCase{name: fmt.Sprintf("change stream %d (%s %s)", seed, lookupD(ev, "operationType"), coll),
			builder: "watch.Pipeline", kind: "aggregate", docs: []bson.D{ev}, stages: watch.Pipeline()})
	}
	return cases
}

// mqlDedupe drops repeated keys of d (a JavaScript object cannot hold
// them; the server's field lookup takes the first).
func mqlDedupe(d bson.D) bson.D {
	out := bson.D{}
	for _, e := range d {
		if lookupD(out, e.Key) == missing {
			out = append(out, e)
		}
	}
	return out
}

// mqlReadDB is randomReadDB without repeated keys.
func mqlReadDB(r *rand.Rand, users []string, hws []bson.ObjectID) evalDB {
	db := randomReadDB(r, users, hws)
	if r.IntN(3) == 0 { // studentStatus an array holding a document: a query's $type "object" passes it
		db[materialize.CollHomework] = append(db[materialize.CollHomework], mqlHomework(r, bson.ObjectID{0x65, 4}))
		odd := bson.D{{Key: "_id", Value: bson.ObjectID{0x65, 5}}, {Key: "studentStatus", Value: bson.A{
			bson.D{{Key: users[0], Value: bson.D{{Key: "1", Value: bson.D{{Key: "score", Value: int32(1)}}}}}}}}}
		db[materialize.CollHomework] = append(db[materialize.CollHomework], odd)
	}
	for coll, docs := range db {
		for i, d := range docs {
			docs[i] = mqlDedupe(d)
		}
		db[coll] = docs
	}
	return db
}

// mqlReadCases runs Read's one aggregate and every separate read over
// random databases.
func mqlReadCases(t *testing.T) []mqlCase {
	hws := []bson.ObjectID{{0x65, 1}, {0x65, 2}, {0x65, 3}}
	d, _, _ := mockDB(t)
	var cases []mqlCase
	for seed := range mqlSeeds {
		r := rand.New(rand.NewPCG(uint64(seed), 29))
		db := mqlReadDB(r, mqlUsers, hws)
		sub := func(vals []string) []string { return randomSubset(r, vals) }
		rd := &watch.Reads{Users: sub(append(append([]string{}, mqlUsers...), "nobody")), HomeworkUsers: sub(mqlUsers)}
		for range r.IntN(4) {
			rd.Pairs = append(rd.Pairs, materialize.Pair{User: mqlUsers[r.IntN(len(mqlUsers))], Problem: int64(1 + r.IntN(5))})
		}
		for id := range 7 {
			if r.IntN(2) == 0 {
				rd.Problems = append(rd.Problems, int64(id))
			}
		}
		for _, id := range append(append([]bson.ObjectID{}, hws...), bson.ObjectID{0x65, 4}, bson.ObjectID{0x65, 5}, bson.ObjectID{0x65, 9}) {
			if r.IntN(2) == 0 {
				rd.Homeworks = append(rd.Homeworks, id)
			}
		}
		if r.IntN(5) == 0 {
			rd.HomeworkUsers = nil
		}
		name := func(what string) string { return fmt.Sprintf("%s %d", what, seed) }
		if parts, ok := d.readParts(rd); ok && len(parts) > 0 {
			base := parts[0].coll.Name()
			cases = append(cases, mqlCase{name: name("Read"), builder: "readPipeline", kind: "aggregate",
				docs: db[base], colls: db, stages: readPipeline(parts), unordered: true})
		}
		subs := db[materialize.CollSubmission]
		cases = append(cases,
			mqlCase{name: name("ScanSubmissions"), builder: "scanSort+submissionProjection", kind: "find", docs: subs,
				filter: bson.D{}, proj: submissionProjection, sort: scanSort},
			mqlCase{name: name("AllProblems"), builder: "problemProjection", kind: "find", docs: db[materialize.CollProblem],
				filter: bson.D{}, proj: problemProjection},
			mqlCase{name: name("AllUsers"), builder: "userProjection", kind: "find", docs: db[materialize.CollUser],
				filter: bson.D{}, proj: userProjection})
		for i, f := range submissionFilters(sub(mqlUsers), rd.Pairs, 1+r.IntN(4)) {
			cases = append(cases, mqlCase{name: name("Submissions filter " + strconv.Itoa(i)), builder: "submissionFilters",
				kind: "find", docs: subs, filter: f, proj: submissionProjection})
		}
		if len(rd.Users) > 0 {
			cases = append(cases,
				mqlCase{name: name("UserStats"), builder: "userStatsPipeline", kind: "aggregate", docs: subs,
					stages: userStatsPipeline(rd.Users), unordered: true},
				mqlCase{name: name("Users"), builder: "idIn+userProjection", kind: "find", docs: db[materialize.CollUser],
					filter: idIn(rd.Users), proj: userProjection})
		}
		var ids []bson.ObjectID
		for _, s := range subs {
			if id, ok := lookupD(s, "_id").(bson.ObjectID); ok && r.IntN(3) == 0 {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			cases = append(cases, mqlCase{name: name("SubmissionsByID"), builder: "idIn", kind: "find", docs: subs, filter: idIn(ids)})
		}
		probs := db[materialize.CollProblem]
		if len(rd.Problems) > 0 {
			cases = append(cases, mqlCase{name: name("Problems"), builder: "idIn+problemProjection", kind: "find", docs: probs,
				filter: idIn(rd.Problems), proj: problemProjection})
		}
		if len(rd.Homeworks) > 0 {
			homeworks := db[materialize.CollHomework]
			cases = append(cases,
				mqlCase{name: name("ProblemsListing"), builder: "problemsListingFilter", kind: "find", docs: probs,
					filter: problemsListingFilter(rd.Homeworks), proj: problemProjection},
				mqlCase{name: name("Homeworks"), builder: "homeworkPipeline", kind: "aggregate", docs: homeworks,
					stages: homeworkPipeline(rd.Homeworks, rd.HomeworkUsers)},
				mqlCase{name: name("AllHomeworks"), builder: "homeworkPipeline", kind: "aggregate", docs: homeworks,
					stages: homeworkPipeline(nil, nil)},
				mqlCase{name: name("EntryKeys"), builder: "entryKeysPipeline", kind: "aggregate", docs: homeworks,
					stages: entryKeysPipeline(rd.Homeworks)})
			keys := sub([]string{"1", "2", "3", "x"})
			cases = append(cases, mqlCase{name: name("EntriesForProblems"), builder: "entriesForProblemsPipeline", kind: "aggregate",
				docs: homeworks, stages: entriesForProblemsPipeline(keys)})
		}
	}
	return cases
}

// mqlHomework is a homework as Back-End stores it, or an odd shape.
func mqlHomework(r *rand.Rand, id bson.ObjectID) bson.D {
	entry := func() any {
		switch r.IntN(5) {
		case 0:
			return nil
		case 1:
			return mqlNumber(r, 7)
		}
		return bson.D{{Key: "score", Value: mqlNumber(r, r.IntN(101))}, {Key: "problemStatus", Value: nil},
			{Key: "submissionIds", Value: bson.A{}}, {Key: "rawScore", Value: mqlNumber(r, 0)}}
	}
	ss := bson.D{}
	for _, u := range mqlUsers {
		switch r.IntN(5) {
		case 0:
		case 1:
			ss = append(ss, bson.E{Key: u, Value: []any{"not a document", nil, bson.A{}}[r.IntN(3)]})
		default:
			ud := bson.D{}
			for _, p := range []string{"1", "3", "x.y", "$z"} {
				if r.IntN(3) != 0 {
					ud = append(ud, bson.E{Key: p, Value: entry()})
				}
			}
			ss = append(ss, bson.E{Key: u, Value: ud})
		}
	}
	d := bson.D{{Key: "_id", Value: id}, {Key: "homeworkName", Value: "h"}}
	switch r.IntN(9) {
	case 0:
	case 1:
		d = append(d, bson.E{Key: "studentStatus", Value: int32(5)})
	case 2:
		d = append(d, bson.E{Key: "studentStatus", Value: nil})
	case 3: // a query path traverses it; an update path cannot
		d = append(d, bson.E{Key: "studentStatus", Value: bson.A{ss}})
	default:
		d = append(d, bson.E{Key: "studentStatus", Value: ss})
	}
	return d
}

// mqlWriteCases runs the writes Apply sends (userWrite, entryWrite by
// path and by pipeline) over generated documents.
func mqlWriteCases() []mqlCase {
	var cases []mqlCase
	for seed := range mqlSeeds {
		r := rand.New(rand.NewPCG(uint64(seed), 31))
		id := bson.ObjectID{0x65, 1}
		docs := []bson.D{mqlHomework(r, id)}
		if r.IntN(3) == 0 {
			docs = append(docs, mqlHomework(r, bson.ObjectID{0x65, 2}))
		}
		e := materialize.StartEntry()
		e.Score = int64(r.IntN(101))
		e.HasStatus = r.IntN(2) == 0
		e.ProblemStatus = int64(r.IntN(2))
		e.SubmissionIDs = []string{"65a1"}
		e.HasRaw = r.IntN(2) == 0
		e.RawScore = int64(r.IntN(101))
		w := watch.EntryWrite{Homework: id, User: mqlUsers[r.IntN(len(mqlUsers))], ProblemKey: []string{"1", "3", "x.y", "$z", "2"}[r.IntN(5)], Entry: e}
		f, u := entryWrite(w)
		cases = append(cases, mqlCase{name: fmt.Sprintf("entryWrite %d (%s, %s)", seed, w.User, w.ProblemKey), builder: "entryWrite",
			kind: "update", docs: docs, filter: f, update: u})
		pf, pu := entryWriteByPipeline(w)
		cases = append(cases, mqlCase{name: fmt.Sprintf("entryWriteByPipeline %d (%s, %s)", seed, w.User, w.ProblemKey), builder: "entryWriteByPipeline",
			kind: "update", docs: docs, filter: pf, update: pu})

		user := mqlUsers[r.IntN(len(mqlUsers))]
		var users []bson.D
		for _, name := range mqlUsers {
			if r.IntN(3) != 0 {
				d := bson.D{{Key: "_id", Value: name}, {Key: "username", Value: name}}
				if r.IntN(2) == 0 {
					d = append(d, bson.E{Key: materialize.FieldSubmission, Value: mqlNumber(r, 3)}, bson.E{Key: materialize.FieldACProblemIDs, Value: bson.A{int32(1)}})
				}
				users = append(users, d)
			}
		}
		stats := materialize.UserStats{Submission: int64(r.IntN(9)), ACSubmission: int64(r.IntN(3)), ACProblemIDs: []int64{}}
		for range r.IntN(3) {
			stats.ACProblemIDs = append(stats.ACProblemIDs, int64(r.IntN(5)))
		}
		uf, uu := userWrite(watch.UserWrite{User: user, Stats: stats})
		cases = append(cases, mqlCase{name: fmt.Sprintf("userWrite %d (%s)", seed, user), builder: "userWrite",
			kind: "update", docs: users, filter: uf, update: uu})
	}
	return cases
}

// mqlKeyCases runs RecordKeys' upsert and LookupKeys' read over key
// records whose pairs hold the problem as an int, a long or a double.
func mqlKeyCases() []mqlCase {
	var cases []mqlCase
	for seed := range mqlSeeds {
		r := rand.New(rand.NewPCG(uint64(seed), 37))
		var docs []bson.D
		var ids []bson.ObjectID
		for i := range 1 + r.IntN(3) {
			id := bson.ObjectID{0x66, byte(i)}
			ids = append(ids, id)
			if r.IntN(3) == 0 {
				continue // no record yet
			}
			pairs := bson.A{}
			for range r.IntN(3) {
				u := mqlUsers[r.IntN(2)]
				p := mqlNumber(r, 1+r.IntN(3))
				if r.IntN(6) == 0 {
					pairs = append(pairs, bson.D{{Key: "p", Value: p}, {Key: "u", Value: u}}) // another writer's field order
				} else {
					pairs = append(pairs, bson.D{{Key: "u", Value: u}, {Key: "p", Value: p}})
				}
			}
			docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "pairs", Value: pairs}})
		}
		var pairs []materialize.Pair
		for range 1 + r.IntN(3) {
			pairs = append(pairs, materialize.Pair{User: mqlUsers[r.IntN(2)], Problem: int64(1 + r.IntN(3))})
		}
		f, u := recordKeysWrite(ids[r.IntN(len(ids))], pairs)
		cases = append(cases,
			mqlCase{name: fmt.Sprintf("recordKeysWrite %d", seed), builder: "recordKeysWrite", kind: "update", docs: docs, filter: f, update: u, upsert: true},
			mqlCase{name: fmt.Sprintf("LookupKeys %d", seed), builder: "idIn", kind: "find", docs: docs, filter: idIn(ids[:1+r.IntN(len(ids))])})
	}
	return cases
}

// mqlLeaseCases runs the lease's and the checkpoint's writes and reads
// over state documents: none, without a lease, with a lease expired,
// expiring now or later by the server's clock, of another owner, with
// the epoch an int, a long or a double.
func mqlLeaseCases() []mqlCase {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var cases []mqlCase
	for seed := range mqlSeeds {
		r := rand.New(rand.NewPCG(uint64(seed), 41))
		var docs []bson.D
		epoch := int64(1 + r.IntN(3))
		owners := []string{"a", "b", "$c"}
		if r.IntN(5) != 0 {
			d := bson.D{{Key: "_id", Value: stateID}}
			switch r.IntN(10) {
			case 0:
				d = append(d, bson.E{Key: fieldLease, Value: nil})
			case 1:
				d = append(d, bson.E{Key: fieldLease, Value: bson.D{{Key: "owner", Value: "a"}, {Key: "epoch", Value: int64(epoch)}}}) // no expires
			}
			if len(d) == 1 && r.IntN(4) != 0 {
				lease := bson.D{{Key: "owner", Value: owners[r.IntN(3)]}}
				if r.IntN(8) != 0 {
					lease = append(lease, bson.E{Key: "epoch", Value: mqlNumber(r, int(epoch))})
				}
				exp := now.Add(time.Duration(r.IntN(3)-1) * time.Second)
				if r.IntN(8) == 0 {
					exp = time.Time{} // released
				}
				lease = append(lease, bson.E{Key: "expires", Value: bson.NewDateTimeFromTime(exp)})
				d = append(d, bson.E{Key: fieldLease, Value: lease})
			}
			if r.IntN(2) == 0 {
				d = append(d, bson.E{Key: fieldCheckpoint, Value: resume.Checkpoint{StartAt: bson.Timestamp{T: 5, I: 1}, Epoch: epoch, SavedAt: now.Add(-time.Minute)}})
			}
			docs = append(docs, d)
		}
		owner := owners[r.IntN(3)]
		ep := epoch + int64(r.IntN(2))
		ttl := time.Duration(1+r.IntN(30)) * time.Second
		name := func(what string) string { return fmt.Sprintf("%s %d", what, seed) }
		af, au := acquireWrite(owner, ttl)
		nf, nu := renewWrite(owner, ep, ttl)
		rf, ru := releaseWrite(owner, ep)
		cp := resume.Checkpoint{Token: rawOf(bson.D{{Key: "_data", Value: "8263"}}), ClusterTime: bson.Timestamp{T: 9, I: 2}, SavedAt: now, Epoch: ep * int64(r.IntN(2)), Owner: owner}
		sf, su, upsert := saveCheckpointWrite(cp)
		lf, lp := stateRead(fieldLease)
		cf, cpj := stateRead(fieldCheckpoint)
		cases = append(cases,
			mqlCase{name: name("acquire"), builder: "acquireWrite", kind: "update", docs: docs, filter: af, update: au, upsert: true, now: now, computedNumbers: true},
			mqlCase{name: name("renew"), builder: "renewWrite", kind: "update", docs: docs, filter: nf, update: nu, now: now},
			mqlCase{name: name("release"), builder: "releaseWrite", kind: "update", docs: docs, filter: rf, update: ru, now: now},
			mqlCase{name: name("save checkpoint"), builder: "saveCheckpointWrite", kind: "update", docs: docs, filter: sf, update: su, upsert: upsert, now: now},
			mqlCase{name: name("current"), builder: "stateRead", kind: "find", docs: docs, filter: lf, proj: lp},
			mqlCase{name: name("load checkpoint"), builder: "stateRead", kind: "find", docs: docs, filter: cf, proj: cpj},
		)
	}
	return cases
}
