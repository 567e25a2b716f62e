package explain

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// Source is the reads Read makes: part of watch.Source, with its
// contract (mongodb.DB implements it).
type Source interface {
	Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error)
	Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error)
	Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error)
	EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error)
	Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error)
}

// Input is what explaining one (user, problem) pair reads: the user's
// submissions and document, the problem, and the homeworks that matter to
// the pair restricted to the user. Its size is bounded by the user's
// submissions and the problem's homeworks, never by the database's.
type Input struct {
	User    string
	Problem int64
	// Submissions are the user's readable submissions, to every problem
	// (the user's counts read them all), in no particular order.
	Submissions []materialize.Submission
	// HasUser is true when a user document exists; StoredUser is then its
	// stored derived fields.
	HasUser    bool
	StoredUser watch.StoredUser
	// ProblemDoc is the problem, nil when no readable one exists.
	ProblemDoc *materialize.Problem
	// Homeworks are the readable homeworks the problem lists or that hold
	// an entry studentStatus.<User>.<Problem>, with Students and Stored
	// restricted to User.
	Homeworks map[bson.ObjectID]*watch.HomeworkDoc
	// HasEntry is true when some homework holds the user's entry for the
	// problem; Held when some homework holds any user's entry for it.
	HasEntry, Held bool
	// Malformed are the unreadable documents met, in reading order:
	// submissions, the problem, homeworks, then the user's values in
	// homeworks (by homework _id).
	Malformed []*materialize.DecodeError
}

// Read reads from src what explaining (user, problem) reads, in five
// queries of a few documents each.
func Read(ctx context.Context, src Source, user string, problem int64) (*Input, error) {
	p := &Input{User: user, Problem: problem}
	subs, bad, err := src.Submissions(ctx, []string{user}, nil)
	if err != nil {
		return nil, fmt.Errorf("read submissions: %w", err)
	}
	p.Submissions = subs
	p.Malformed = append(p.Malformed, bad...)
	users, err := src.Users(ctx, []string{user})
	if err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	p.StoredUser, p.HasUser = users[user]
	problems, bad, err := src.Problems(ctx, []int64{problem})
	if err != nil {
		return nil, fmt.Errorf("read problems: %w", err)
	}
	p.Malformed = append(p.Malformed, bad...)
	p.ProblemDoc = problems[problem]
	holders, err := src.EntriesForProblems(ctx, []int64{problem})
	if err != nil {
		return nil, fmt.Errorf("read entries of problem: %w", err)
	}
	p.Held = len(holders[problem]) > 0
	var ids []bson.ObjectID
	if p.ProblemDoc != nil {
		ids = append(ids, p.ProblemDoc.Homeworks...)
	}
	for _, hu := range holders[problem] {
		if hu.User == user {
			ids = append(ids, hu.Homework)
			p.HasEntry = true
		}
	}
	ids = sortedIDs(ids)
	p.Homeworks = map[bson.ObjectID]*watch.HomeworkDoc{}
	if len(ids) > 0 {
		if p.Homeworks, bad, err = src.Homeworks(ctx, ids, []string{user}); err != nil {
			return nil, fmt.Errorf("read homeworks: %w", err)
		}
		p.Malformed = append(p.Malformed, bad...)
		p.Malformed = append(p.Malformed, skipped(p.Homeworks)...)
	}
	return p, nil
}

// sortedIDs sorts ids and drops repeats.
func sortedIDs(ids []bson.ObjectID) []bson.ObjectID {
	slices.SortFunc(ids, func(a, b bson.ObjectID) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(ids)
}

// skipped lists the homeworks' unreadable user values, by homework _id.
func skipped(hws map[bson.ObjectID]*watch.HomeworkDoc) []*materialize.DecodeError {
	ids := make([]bson.ObjectID, 0, len(hws))
	for id := range hws {
		ids = append(ids, id)
	}
	var out []*materialize.DecodeError
	for _, id := range sortedIDs(ids) {
		out = append(out, hws[id].Skipped...)
	}
	return out
}
