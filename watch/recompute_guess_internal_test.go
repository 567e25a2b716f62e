package watch

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestHomeworkGuessBounded: the guess holds at most maxGuessProblems
// problems (a new one replaces an old one), no list longer than
// maxGuessHomeworks, forgets a problem a read did not return, and a nil
// guess names nothing.
func TestHomeworkGuessBounded(t *testing.T) {
	h := func(i int) bson.ObjectID { return bson.ObjectID{9: byte(i >> 16), 10: byte(i >> 8), 11: byte(i)} }
	problem := func(id int64, hws ...bson.ObjectID) *materialize.Problem {
		return &materialize.Problem{ID: id, Homeworks: hws}
	}
	guessed := func(g *homeworkGuess, ps ...int64) map[bson.ObjectID]struct{} {
		m := map[bson.ObjectID]struct{}{}
		g.homeworks(ps, m)
		return m
	}

	var none *homeworkGuess
	none.learn([]int64{1}, map[int64]*materialize.Problem{1: problem(1, h(1))})
	if m := guessed(none, 1); len(m) != 0 {
		t.Errorf("a nil guess named %v", m)
	}

	g := &homeworkGuess{}
	for i := range maxGuessProblems + 100 {
		id := int64(i)
		g.learn([]int64{id}, map[int64]*materialize.Problem{id: problem(id, h(i))})
		if len(g.byProblem) > maxGuessProblems {
			t.Fatalf("%d problems held, at most %d", len(g.byProblem), maxGuessProblems)
		}
	}
	last := int64(maxGuessProblems + 99)
	if m := guessed(g, last); len(m) != 1 {
		t.Errorf("the problem learnt last guesses %v, want its homework", m)
	}

	long := make([]bson.ObjectID, maxGuessHomeworks+1)
	for i := range long {
		long[i] = h(1<<20 + i)
	}
	g.learn([]int64{last}, map[int64]*materialize.Problem{last: problem(last, long...)})
	if m := guessed(g, last); len(m) != 0 {
		t.Errorf("a list of %d homeworks kept (%d guessed), at most %d", len(long), len(m), maxGuessHomeworks)
	}
	g.learn([]int64{last}, map[int64]*materialize.Problem{last: problem(last, long[:maxGuessHomeworks]...)})
	if m := guessed(g, last); len(m) != maxGuessHomeworks {
		t.Errorf("%d of a list of %d guessed", len(m), maxGuessHomeworks)
	}
	g.learn([]int64{last}, nil) // deleted, or undecodable
	if m := guessed(g, last); len(m) != 0 {
		t.Errorf("a problem the read did not return still guesses %v", m)
	}
}
