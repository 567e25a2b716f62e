package materialize_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// keyList renders a key set as sorted lines, for table comparisons.
func keyList(k *materialize.Keys) []string {
	var out []string
	for u := range k.Users {
		out = append(out, "user "+u)
	}
	for p, hs := range k.Pairs {
		var extra []string
		for h := range hs {
			extra = append(extra, h.Hex()[20:])
		}
		slices.Sort(extra)
		s := fmt.Sprintf("pair %s/%d", p.User, p.Problem)
		if len(extra) > 0 {
			s += " in " + strings.Join(extra, ",")
		}
		out = append(out, s)
	}
	for id, ps := range k.Submissions {
		out = append(out, fmt.Sprintf("submission %s %v", id.Hex()[20:], ps))
	}
	for id, ms := range k.Moves {
		out = append(out, fmt.Sprintf("moves %s %+v", id.Hex()[20:], ms))
	}
	for h := range k.Homeworks {
		out = append(out, "homework "+h.Hex()[20:])
	}
	for hu := range k.HomeworkUsers {
		out = append(out, "homework-user "+hu.Homework.Hex()[20:]+" "+hu.User)
	}
	for p := range k.Problems {
		out = append(out, fmt.Sprintf("problem %d", p))
	}
	if k.Rebuild {
		out = append(out, "rebuild")
	}
	slices.Sort(out)
	return out
}

// TestExtract is the spec's "Keys" table, with the changed-field
// narrowing: a changed path dirties a key when it equals a relevant path,
// is a parent of one (duration → duration.end) or a child of one
// (homeworks.3 → homeworks); other paths dirty nothing.
func TestExtract(t *testing.T) {
	sub := bson.ObjectID{11: 0x51}
	hw := bson.ObjectID{11: 0xa1}
	pair := materialize.Pair{User: "alice", Problem: 7}
	subChange := func(op materialize.Op, fields []string, hasPair bool) materialize.Change {
		c := materialize.Change{Collection: materialize.CollSubmission, Op: op, SubmissionID: sub, Fields: fields}
		if hasPair {
			c.Pair, c.HasPair = pair, true
		}
		return c
	}
	moved := func(m materialize.Move, fields ...string) materialize.Change {
		c := subChange(materialize.OpUpdate, fields, false)
		c.Move = m
		return c
	}
	hwChange := func(op materialize.Op, fields ...string) materialize.Change {
		c := materialize.Change{Collection: materialize.CollHomework, Op: op, HomeworkID: hw, Fields: fields}
		if op == materialize.OpUpdate && fields == nil {
			c.Fields = []string{}
		}
		return c
	}
	probChange := func(op materialize.Op, fields ...string) materialize.Change {
		c := materialize.Change{Collection: materialize.CollProblem, Op: op, ProblemID: 7, Fields: fields}
		if op == materialize.OpUpdate && fields == nil {
			c.Fields = []string{}
		}
		return c
	}
	userChange := func(op materialize.Op, fields ...string) materialize.Change {
		c := materialize.Change{Collection: materialize.CollUser, Op: op, UserID: "alice", Fields: fields}
		if op == materialize.OpUpdate && fields == nil {
			c.Fields = []string{}
		}
		return c
	}
	const (
		subKey   = "submission 0051 []"
		subPair  = "submission 0051 [{alice 7}]"
		hwKey    = "homework 00a1"
		probKey  = "problem 7"
		userKey  = "user alice"
		pairKey  = "pair alice/7"
		pairInHw = "pair alice/7 in 00a1"
	)
	cases := []struct {
		name string
		c    materialize.Change
		want []string
	}{
		// submissions
		{"submission insert with pair", subChange(materialize.OpInsert, nil, true), []string{pairKey, subPair, userKey}},
		{"submission replace with pair", subChange(materialize.OpReplace, nil, true), []string{pairKey, subPair, userKey}},
		{"submission delete (id only)", subChange(materialize.OpDelete, nil, false), []string{subKey}},
		{"submission update, fields unknown", subChange(materialize.OpUpdate, nil, false), []string{subKey}},
		{"submission update score", subChange(materialize.OpUpdate, []string{"score"}, false), []string{subKey}},
		{"submission update status", subChange(materialize.OpUpdate, []string{"status"}, false), []string{subKey}},
		{"submission update user", subChange(materialize.OpUpdate, []string{"user"}, false), []string{subKey}},
		{"submission update problem", subChange(materialize.OpUpdate, []string{"problem"}, false), []string{subKey}},
		{"submission moved to user bob", moved(materialize.Move{User: "bob", HasUser: true}, "user"),
			[]string{"moves 0051 [{User:bob Problem:0 HasUser:true HasProblem:false}]", subKey}},
		{"submission moved to problem 8", moved(materialize.Move{Problem: 8, HasProblem: true}, "problem", "status"),
			[]string{"moves 0051 [{User: Problem:8 HasUser:false HasProblem:true}]", subKey}},
		{"submission moved to bob/8: the pair, as an insert's", moved(materialize.Move{User: "bob", Problem: 8, HasUser: true, HasProblem: true}, "user", "problem"),
			[]string{"pair bob/8", "submission 0051 [{bob 8}]", "user bob"}},
		{"submission update timestamp", subChange(materialize.OpUpdate, []string{"timestamp"}, false), []string{subKey}},
		{"submission update languageType", subChange(materialize.OpUpdate, []string{"languageType"}, false), []string{subKey}},
		{"submission update lastSend only", subChange(materialize.OpUpdate, []string{"lastSend", "tasks", "runTime"}, false), nil},
		{"submission update tasks.0.status (child of tasks)", subChange(materialize.OpUpdate, []string{"tasks.0.status"}, false), nil},
		{"submission update scoreboard (prefix, not a path)", subChange(materialize.OpUpdate, []string{"scoreX", "statusY"}, false), nil},
		{"submission update nothing", subChange(materialize.OpUpdate, []string{}, false), nil},

		// homework configuration: the parent path and the child path
		{"homework insert", hwChange(materialize.OpInsert), []string{hwKey}},
		{"homework replace", hwChange(materialize.OpReplace), []string{hwKey}},
		{"homework delete", hwChange(materialize.OpDelete), []string{hwKey}},
		{"homework update, fields unknown", materialize.Change{Collection: materialize.CollHomework, Op: materialize.OpUpdate, HomeworkID: hw}, []string{hwKey}},
		{"homework update duration.end", hwChange(materialize.OpUpdate, "duration.end"), []string{hwKey}},
		{"homework update duration (parent of duration.end)", hwChange(materialize.OpUpdate, "duration"), []string{hwKey}},
		{"homework update duration.start only", hwChange(materialize.OpUpdate, "duration.start"), nil},
		{"homework update penalty", hwChange(materialize.OpUpdate, "penalty"), []string{hwKey}},
		{"homework update studentStatus whole", hwChange(materialize.OpUpdate, "studentStatus"), []string{hwKey}},
		{"homework update markdown, problemIds", hwChange(materialize.OpUpdate, "markdown", "problemIds", "problemIds.0"), nil},
		{"homework update penaltyX (prefix, not a path)", hwChange(materialize.OpUpdate, "penaltyX", "durationEnd"), nil},

		// homework studentStatus paths
		{"studentStatus.alice (a user added/removed)", hwChange(materialize.OpUpdate, "studentStatus.alice"), []string{"homework-user 00a1 alice"}},
		{"studentStatus.alice.7 (an entry, or user \"alice.7\")", hwChange(materialize.OpUpdate, "studentStatus.alice.7"), []string{"homework-user 00a1 alice.7", pairInHw}},
		{"studentStatus.alice.7.score (inside an entry)", hwChange(materialize.OpUpdate, "studentStatus.alice.7.score"), []string{pairInHw}},
		{"studentStatus.alice.7.submissionIds.3", hwChange(materialize.OpUpdate, "studentStatus.alice.7.submissionIds.3"), []string{pairInHw}},
		{"studentStatus.alice.07 (no problem id renders to it)", hwChange(materialize.OpUpdate, "studentStatus.alice.07"), []string{"homework-user 00a1 alice", "homework-user 00a1 alice.07"}},
		{"studentStatus.a.b.7 (dotted user: every reading)", hwChange(materialize.OpUpdate, "studentStatus.a.b.7"),
			[]string{"homework-user 00a1 a", "homework-user 00a1 a.b.7", "pair a.b/7 in 00a1"}},

		// problems
		{"problem insert", probChange(materialize.OpInsert), []string{probKey}},
		{"problem replace", probChange(materialize.OpReplace), []string{probKey}},
		{"problem delete", probChange(materialize.OpDelete), []string{probKey}},
		{"problem update homeworks", probChange(materialize.OpUpdate, "homeworks"), []string{probKey}},
		{"problem update homeworks.1 (child)", probChange(materialize.OpUpdate, "homeworks.1"), []string{probKey}},
		{"problem update ACUser, problemName", probChange(materialize.OpUpdate, "ACUser", "problemName"), nil},
		{"problem update homeworksX (prefix, not a path)", probChange(materialize.OpUpdate, "homeworksX"), nil},

		// users
		{"user insert", userChange(materialize.OpInsert), []string{userKey}},
		{"user replace", userChange(materialize.OpReplace), []string{userKey}},
		{"user update submission", userChange(materialize.OpUpdate, "submission"), []string{userKey}},
		{"user update AC_problem_ids.2 (child)", userChange(materialize.OpUpdate, "AC_problem_ids.2"), []string{userKey}},
		{"user update AC_submission", userChange(materialize.OpUpdate, "AC_submission"), []string{userKey}},
		{"user update email", userChange(materialize.OpUpdate, "email", "submissions"), nil},
		{"user delete", userChange(materialize.OpDelete), nil},

		// collection-level events
		{"drop submission", materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpDrop}, []string{"rebuild"}},
		{"drop another collection", materialize.Change{Collection: "course", Op: materialize.OpDrop}, nil},
		{"rename into homework", materialize.Change{Collection: "tmp", Op: materialize.OpRename, RenamedTo: materialize.CollHomework}, []string{"rebuild"}},
		{"rename between others", materialize.Change{Collection: "tmp", Op: materialize.OpRename, RenamedTo: "tmp2"}, nil},
		{"dropDatabase", materialize.Change{Op: materialize.OpDropDatabase}, []string{"rebuild"}},
		{"invalidate", materialize.Change{Op: materialize.OpInvalidate}, []string{"rebuild"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := materialize.Extract(c.c)
			got := keyList(k)
			if !slices.Equal(got, c.want) {
				t.Errorf("Extract = %q, want %q", got, c.want)
			}
			if k.Empty() != (len(c.want) == 0) {
				t.Errorf("Empty() = %v with keys %q", k.Empty(), got)
			}
		})
	}
}

// TestKeysMergeDropThenEvents: a drop or rename of a source collection
// asks for a rebuild however many events follow it in the same batch (the
// merged keys keep Rebuild, in either order), and the other events' keys
// are kept beside it; a drop or rename that concerns no source collection
// changes nothing the later events ask for.
func TestKeysMergeDropThenEvents(t *testing.T) {
	sub := bson.ObjectID{11: 0x51}
	pair := materialize.Pair{User: "alice", Problem: 7}
	insert := materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpInsert, SubmissionID: sub, Pair: pair, HasPair: true}
	user := materialize.Change{Collection: materialize.CollUser, Op: materialize.OpInsert, UserID: "bob"}
	for _, c := range []struct {
		name        string
		ddl         materialize.Change
		wantRebuild bool
	}{
		{"drop submission", materialize.Change{Collection: materialize.CollSubmission, Op: materialize.OpDrop}, true},
		{"drop homework", materialize.Change{Collection: materialize.CollHomework, Op: materialize.OpDrop}, true},
		{"rename problem away", materialize.Change{Collection: materialize.CollProblem, Op: materialize.OpRename, RenamedTo: "problem_old"}, true},
		{"rename into user", materialize.Change{Collection: "user_new", Op: materialize.OpRename, RenamedTo: materialize.CollUser}, true},
		{"drop another collection", materialize.Change{Collection: "course", Op: materialize.OpDrop}, false},
		{"rename between others", materialize.Change{Collection: "tmp", Op: materialize.OpRename, RenamedTo: "tmp2"}, false},
	} {
		for _, order := range []string{"ddl first", "ddl last", "ddl between"} {
			changes := map[string][]materialize.Change{
				"ddl first":   {c.ddl, insert, user},
				"ddl last":    {insert, user, c.ddl},
				"ddl between": {insert, c.ddl, user},
			}[order]
			k := materialize.NewKeys()
			for _, ch := range changes {
				k.Merge(materialize.Extract(ch))
			}
			if k.Rebuild != c.wantRebuild {
				t.Errorf("%s, %s: Rebuild = %v, want %v", c.name, order, k.Rebuild, c.wantRebuild)
			}
			if ps := k.Submissions[sub]; len(ps) != 1 || ps[0] != pair {
				t.Errorf("%s, %s: submission key %v, want the insert's pair kept", c.name, order, ps)
			}
			if _, ok := k.Users["bob"]; !ok {
				t.Errorf("%s, %s: users %v, want bob's insert kept", c.name, order, k.Users)
			}
			if k.Empty() {
				t.Errorf("%s, %s: merged keys empty", c.name, order)
			}
		}
	}
}
