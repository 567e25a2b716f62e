package watch

import (
	"slices"
	"testing"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestMovedPairs: the pairs a submission may have entered through updates
// that set one half of its pair, given the pairs it had: each move's half
// with every other half known, until no move adds one.
func TestMovedPairs(t *testing.T) {
	p := func(u string, prob int64) materialize.Pair { return materialize.Pair{User: u, Problem: prob} }
	toUser := func(u string) materialize.Move { return materialize.Move{User: u, HasUser: true} }
	toProblem := func(prob int64) materialize.Move { return materialize.Move{Problem: prob, HasProblem: true} }
	cases := []struct {
		name  string
		moves []materialize.Move
		had   []materialize.Pair
		want  []materialize.Pair
	}{
		{"no move", nil, []materialize.Pair{p("alice", 7)}, nil},
		{"to bob, problem kept", []materialize.Move{toUser("bob")}, []materialize.Pair{p("alice", 7)}, []materialize.Pair{p("bob", 7)}},
		{"to problem 8, user kept", []materialize.Move{toProblem(8)}, []materialize.Pair{p("alice", 7)}, []materialize.Pair{p("alice", 8)}},
		{"to bob with every problem it had", []materialize.Move{toUser("bob")}, []materialize.Pair{p("alice", 7), p("carol", 8)},
			[]materialize.Pair{p("bob", 7), p("bob", 8)}},
		{"to bob, then to problem 8: bob's pair of 8 too", []materialize.Move{toUser("bob"), toProblem(8)}, []materialize.Pair{p("alice", 7)},
			[]materialize.Pair{p("bob", 7), p("alice", 8), p("bob", 8)}},
		{"a pair it had is not returned", []materialize.Move{toUser("alice")}, []materialize.Pair{p("alice", 7)}, nil},
		{"no pair known: nothing to pair the half with", []materialize.Move{toUser("bob")}, nil, nil},
		{"both halves", []materialize.Move{{User: "bob", Problem: 9, HasUser: true, HasProblem: true}}, nil, []materialize.Pair{p("bob", 9)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := movedPairs(c.moves, c.had)
			slices.SortFunc(got, cmpPair)
			want := slices.Clone(c.want)
			slices.SortFunc(want, cmpPair)
			if !slices.Equal(got, want) {
				t.Errorf("movedPairs(%v, %v) = %v, want %v", c.moves, c.had, got, want)
			}
		})
	}
}
