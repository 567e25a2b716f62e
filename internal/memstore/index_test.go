package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// scanSubmissions is Submissions as a scan of the whole collection (the
// store's reads before the index): the reference the index must match.
func scanSubmissions(s *Store, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError) {
	uset := map[string]bool{}
	for _, u := range users {
		uset[u] = true
	}
	pset := map[materialize.Pair]bool{}
	for _, p := range pairs {
		pset[p] = true
	}
	var out []materialize.Submission
	var bad []*materialize.DecodeError
	for _, raw := range s.Collection(materialize.CollSubmission) {
		sub, err := materialize.DecodeSubmission(raw)
		if err != nil {
			if userMatches(raw, func(u string) bool { return uset[u] }) {
				bad = append(bad, err.(*materialize.DecodeError))
			}
			continue
		}
		if uset[sub.User] || pset[materialize.Pair{User: sub.User, Problem: sub.Problem}] {
			out = append(out, sub)
		}
	}
	return out, bad
}

// userMatches reports whether a query on user matches doc for a name
// named reports: its user string is named, or (the server's equality
// descending into arrays) an element of its array user.
func userMatches(doc bson.Raw, named func(string) bool) bool {
	v := doc.Lookup("user")
	if u, ok := v.StringValueOK(); ok {
		return named(u)
	}
	if arr, ok := v.ArrayOK(); ok {
		vals, _ := arr.Values()
		for _, el := range vals {
			if u, ok := el.StringValueOK(); ok && named(u) {
				return true
			}
		}
	}
	return false
}

func scanUserStats(s *Store, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError) {
	tally := map[string]*materialize.UserTally{}
	for _, u := range users {
		tally[u] = new(materialize.UserTally)
	}
	var bad []*materialize.DecodeError
	for _, raw := range s.Collection(materialize.CollSubmission) {
		sub, err := materialize.DecodeSubmission(raw)
		if err != nil {
			if userMatches(raw, func(u string) bool { return tally[u] != nil }) {
				bad = append(bad, err.(*materialize.DecodeError))
			}
			continue
		}
		if t := tally[sub.User]; t != nil {
			t.Add(&sub)
		}
	}
	out := map[string]materialize.UserStats{}
	for u, t := range tally {
		out[u] = t.Stats()
	}
	return out, bad
}

// TestSubmissionIndexMatchesScan: after random inserts, updates (moving
// submissions between users and problems, making them undecodable and
// decodable again), replaces and deletes (and re-inserts of a deleted
// _id), Submissions and UserStats return exactly what a scan of the
// whole collection returns, in the same order.
func TestSubmissionIndexMatchesScan(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	users := []string{"a", "b", "c.d", "e"}
	doc := func(id bson.ObjectID) bson.Raw {
		d := bson.D{{Key: "_id", Value: id}}
		switch rng.IntN(10) {
		case 0:
			d = append(d, bson.E{Key: "user", Value: int32(3)}) // not a string
		case 1: // no user
		case 2: // an array: queries on user match it by its string elements
			d = append(d, bson.E{Key: "user", Value: bson.A{users[rng.IntN(len(users))], int32(1), users[rng.IntN(len(users))]}})
		default:
			d = append(d, bson.E{Key: "user", Value: users[rng.IntN(len(users))]})
		}
		switch rng.IntN(10) {
		case 0:
			d = append(d, bson.E{Key: "problem", Value: "7"}) // not an integer
		case 1:
			d = append(d, bson.E{Key: "problem", Value: float64(rng.IntN(3) + 1)})
		default:
			d = append(d, bson.E{Key: "problem", Value: int32(rng.IntN(3) + 1)})
		}
		if rng.IntN(12) != 0 {
			d = append(d, bson.E{Key: "timestamp", Value: bson.NewDateTimeFromTime(time.Unix(int64(rng.IntN(1000)), 0))})
		}
		d = append(d, bson.E{Key: "status", Value: int32(rng.IntN(3) - 1)}, bson.E{Key: "score", Value: int32(rng.IntN(101))},
			bson.E{Key: "languageType", Value: int32(rng.IntN(4))})
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s := New()
	var ids []bson.ObjectID
	live := map[bson.ObjectID]bool{}
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(ids) == 0:
			id := bson.NewObjectID()
			ids = append(ids, id)
			must(t, s.Insert(materialize.CollSubmission, doc(id)))
			live[id] = true
		case op < 7:
			id := ids[rng.IntN(len(ids))]
			if live[id] {
				must(t, s.Update(materialize.CollSubmission, doc(id), []string{"user", "problem", "status"}))
			}
		case op < 8:
			id := ids[rng.IntN(len(ids))]
			if live[id] {
				must(t, s.Replace(materialize.CollSubmission, doc(id)))
			}
		default:
			id := ids[rng.IntN(len(ids))]
			if live[id] {
				must(t, s.Delete(materialize.CollSubmission, id))
				live[id] = false
			} else {
				must(t, s.Insert(materialize.CollSubmission, doc(id)))
				live[id] = true
			}
		}
		if step%50 != 0 {
			continue
		}
		var qu []string
		var qp []materialize.Pair
		for _, u := range users {
			if rng.IntN(2) == 0 {
				qu = append(qu, u)
			}
			if rng.IntN(2) == 0 {
				qp = append(qp, materialize.Pair{User: u, Problem: int64(rng.IntN(3) + 1)})
			}
		}
		got, gotBad, err := s.Submissions(ctx, qu, qp)
		must(t, err)
		want, wantBad := scanSubmissions(s, qu, qp)
		if !reflect.DeepEqual(got, want) || fmt.Sprint(gotBad) != fmt.Sprint(wantBad) {
			t.Fatalf("step %d: Submissions(%v, %v) = %d subs, %d bad; the scan gives %d, %d", step, qu, qp, len(got), len(gotBad), len(want), len(wantBad))
		}
		gs, gsBad, err := s.UserStats(ctx, qu)
		must(t, err)
		ws, wsBad := scanUserStats(s, qu)
		if !reflect.DeepEqual(gs, ws) || fmt.Sprint(gsBad) != fmt.Sprint(wsBad) {
			t.Fatalf("step %d: UserStats(%v) = %+v (%d bad); the scan gives %+v (%d bad)", step, qu, gs, len(gsBad), ws, len(wsBad))
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
