package explain

import (
	"errors"
	"strings"
	"testing"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// TestExplainUnknown: a pair whose user, or problem, nothing mentions is
// an *UnknownError saying which.
func TestExplainUnknown(t *testing.T) {
	cases := []struct {
		p    Input
		want string
	}{
		{Input{User: "u", Problem: 1}, `unknown user "u"`},
		{Input{User: "u", Problem: 1, HasUser: true}, "unknown problem 1"},
		{Input{User: "u", Problem: 1, HasUser: true, Held: true}, ""},
		{Input{User: "u", Problem: 1, HasEntry: true, Held: true}, ""},
	}
	for _, c := range cases {
		ex, err := Explain(&c.p)
		var unknown *UnknownError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.p, err)
		case c.want == "" && (ex.Format != 1 || ex.User != "u" || ex.Problem != 1):
			t.Errorf("%+v: %+v", c.p, ex)
		case c.want != "" && (!errors.As(err, &unknown) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an *UnknownError saying %q", c.p, err, c.want)
		}
	}
}

// TestExplainUserCountsDrift: the user's counts drift when the stored
// ones differ from the derived ones, and when they cannot be read at all
// (a rebuild rewrites them), even where what could be read of them equals
// the derivation: here a user with no submission, whose derived counts are
// the zero ones. Seen failing with an unreadable stored value compared by
// its (zero) Stats alone.
func TestExplainUserCountsDrift(t *testing.T) {
	zero := materialize.DeriveUser(nil)
	cases := []struct {
		name   string
		stored watch.StoredUser
		drift  bool
		json   string
	}{
		{"readable, equal", watch.StoredUser{Stats: zero, OK: true}, false, `{"submission":0,"AC_submission":0,"AC_problem_ids":[]}`},
		{"readable, differing", watch.StoredUser{Stats: materialize.UserStats{Submission: 2, ACProblemIDs: []int64{}}, OK: true}, true,
			`{"submission":2,"AC_submission":0,"AC_problem_ids":[]}`},
		{"unreadable", watch.StoredUser{Stats: zero}, true, `null`},
		{"unreadable, nothing read", watch.StoredUser{}, true, `null`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex, err := Explain(&Input{User: "u", Problem: 1, HasUser: true, Held: true, StoredUser: c.stored})
			if err != nil {
				t.Fatal(err)
			}
			if ex.UserCounts.Drift != c.drift || ex.Drift != c.drift || string(ex.UserCounts.Stored) != c.json {
				t.Errorf("user counts drift %v (explanation %v), stored %s; want drift %v, stored %s",
					ex.UserCounts.Drift, ex.Drift, ex.UserCounts.Stored, c.drift, c.json)
			}
		})
	}
}
