package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// foreignSubmissions are n submissions another app stored: an ObjectId
// _id, none of the fields the derivation reads.
func foreignSubmissions(n int) []bson.Raw {
	out := make([]bson.Raw, n)
	for i := range out {
		out[i] = materializetest.Raw("_id", bson.ObjectID{9, byte(i)}, "owner", "someone", "body", "x")
	}
	return out
}

// TestVerifyExitStatus: verify --dump exits 1 on drift, 3 when nothing
// drifted but documents were skipped as malformed or nothing was
// compared (a nightly verify must alert on another app's dump or a broken
// export), 0 only when everything was checked and clean; rebuild's
// status is not changed by what it skipped.
func TestVerifyExitStatus(t *testing.T) {
	cleanConfigEnv(t)
	v := readVectors(t)[0]
	clean := applyExpected(t, v)
	withForeign := clean
	withForeign.Submissions = append(append([]bson.Raw(nil), clean.Submissions...), foreignSubmissions(8)...)
	withOneForeign := clean
	withOneForeign.Submissions = append(append([]bson.Raw(nil), clean.Submissions...), foreignSubmissions(1)...)
	// Another app's database: its submission collection, nothing the
	// derivation reads, nothing compared.
	allForeign := materialize.Docs{Submissions: foreignSubmissions(8)}
	stale := v.DB
	staleForeign := v.DB
	staleForeign.Submissions = append(append([]bson.Raw(nil), v.DB.Submissions...), foreignSubmissions(1)...)
	for _, c := range []struct {
		name string
		docs materialize.Docs
		want int
		say  string // on stderr
	}{
		{"clean", clean, exitOK, ""},
		{"drift", stale, exitFail, ""},
		{"drift and malformed", staleForeign, exitFail, ""},
		{"malformed submissions beside good ones", withForeign, exitUnchecked, "8 malformed documents skipped"},
		{"one malformed submission", withOneForeign, exitUnchecked, "not everything was checked: 1 malformed document skipped"},
		{"every submission malformed", allForeign, exitUnchecked, "8 malformed documents skipped"},
		{"empty collections", materialize.Docs{}, exitUnchecked, "nothing compared"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDump(t, dir, c.docs, nil)
			r := runCLI(t, "verify", "--dump", dir)
			if r.code != c.want {
				t.Fatalf("verify --dump: want exit %d\n%v", c.want, r)
			}
			if c.say != "" && !strings.Contains(r.stderr, c.say) {
				t.Errorf("verify --dump: stderr does not say %q\n%v", c.say, r)
			}
			if r := runCLI(t, "rebuild", "--dump", dir, "--dry-run"); r.code != exitOK {
				t.Errorf("rebuild --dump --dry-run: want exit 0 whatever it skipped\n%v", r)
			}
		})
	}
}

// TestVerifyVerdict: the verdict online verify shares with the offline
// one, from the report alone.
func TestVerifyVerdict(t *testing.T) {
	bad := []*materialize.DecodeError{{Collection: "submission", ID: "x", Field: "user", Reason: "missing"}}
	for _, c := range []struct {
		name string
		rep  drift.Report
		want error
	}{
		{"clean", drift.Report{Users: 2, Entries: 1}, nil},
		{"users only", drift.Report{Users: 1}, nil},
		{"entries only", drift.Report{Entries: 1}, nil},
		{"drift", drift.Report{Users: 2, DriftedUsers: 1, Malformed: bad}, errDrift},
		{"malformed", drift.Report{Users: 2, Malformed: bad}, errUnchecked},
		{"nothing compared", drift.Report{Submissions: 3}, errUnchecked},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := verifyVerdict(&c.rep)
			if (err == nil) != (c.want == nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Errorf("verifyVerdict(%+v) = %v, want %v", c.rep, err, c.want)
			}
		})
	}
}

// cancelOnWrite is an output that cancels ctx with a signal's cause at
// its first write: the signal comes while the report is printed.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelCauseFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel(&interruptedError{syscall.SIGTERM})
	return w.Buffer.Write(p)
}

// TestVerifyVerdictAfterSignal: a verify that printed its whole report
// exits with its verdict (1 drift, 3 unchecked) even when a signal came
// while it was printed (timeout's); only a verify cut short says it was
// interrupted. Seen failing with runMain's interruption check applied
// to every error (the report, then "stopped (no report, ...)", 143).
func TestVerifyVerdictAfterSignal(t *testing.T) {
	cleanConfigEnv(t)
	v := readVectors(t)[0]
	withForeign := applyExpected(t, v)
	withForeign.Submissions = append(append([]bson.Raw(nil), withForeign.Submissions...), foreignSubmissions(1)...)
	for _, c := range []struct {
		name string
		docs materialize.Docs
		want int
	}{
		{"drift", v.DB, exitFail},
		{"malformed", withForeign, exitUnchecked},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDump(t, dir, c.docs, nil)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			stdout := &cancelOnWrite{cancel: cancel}
			var stderr bytes.Buffer
			code := runMain(ctx, &environment{stdout: stdout, stderr: &stderr}, []string{"verify", "--dump", dir})
			if ctx.Err() == nil {
				t.Fatal("verify printed nothing: the signal never came")
			}
			r := cliResult{code, stdout.String(), stderr.String()}
			if code != c.want || strings.Contains(r.stderr, "stopped") || !strings.Contains(r.stdout, "entries:") {
				t.Errorf("want exit %d with the report and no interruption\n%v", c.want, r)
			}
		})
	}
}
