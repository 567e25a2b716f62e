package explain

import (
	"errors"
	"strings"
	"testing"
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
