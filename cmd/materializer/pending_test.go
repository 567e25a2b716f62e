package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/normal-oj/noj-materializer/watch"
)

var pendingNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func pendingSubs() []watch.PendingSubmission {
	return []watch.PendingSubmission{
		{ID: "65e100000000000000000001", User: "alice", Problem: 7, LastSend: pendingNow.Add(-(24*time.Hour + 2*time.Minute))},
		{ID: "65e100000000000000000002", User: "bob", Problem: 8, LastSend: pendingNow.Add(-2 * time.Hour)},
	}
}

// TestRejudgeRefusedUntil: the Back-End refuses a rejudge while
// (now - lastSend).seconds < 300, timedelta's seconds without whole days.
func TestRejudgeRefusedUntil(t *testing.T) {
	for _, c := range []struct {
		ago  time.Duration
		wait time.Duration // 0: accepted now
	}{
		{2 * time.Minute, 3 * time.Minute},
		{5 * time.Minute, 0},
		{2 * time.Hour, 0},
		{24*time.Hour + 2*time.Minute, 3 * time.Minute},
		{48*time.Hour + 4*time.Minute + 59*time.Second, time.Second},
		{24*time.Hour + 5*time.Minute, 0},
	} {
		got := rejudgeRefusedUntil(pendingNow.Add(-c.ago), pendingNow)
		var want time.Time
		if c.wait > 0 {
			want = pendingNow.Add(c.wait)
		}
		if !got.Equal(want) {
			t.Errorf("pending %s: refused until %v, want %v", c.ago, got, want)
		}
	}
}

// TestPrintPending: the script lists one curl per submission, oldest
// first, with the Back-End's route (GET /submission/<id>/rejudge) under
// $API with the piann cookie, and says when the Back-End refuses one.
func TestPrintPending(t *testing.T) {
	var b bytes.Buffer
	printPending(&b, nil, 30*time.Minute, pendingNow)
	if got := b.String(); got != "# no submission pending (status -1) for over 30m0s\n" {
		t.Errorf("none: %q", got)
	}
	b.Reset()
	printPending(&b, pendingSubs(), 30*time.Minute, pendingNow)
	var calls []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !strings.HasPrefix(l, "#") {
			calls = append(calls, l)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("%d calls, want 2:\n%s", len(calls), b.String())
	}
	for i, want := range []string{
		`curl -fsS -b "piann=$PIANN" "$API/submission/65e100000000000000000001/rejudge"  # alice problem 7, lastSend 2026-02-28T11:58:00Z, pending 24h2m0s; refused (403) until 2026-03-01T12:03:00Z`,
		`curl -fsS -b "piann=$PIANN" "$API/submission/65e100000000000000000002/rejudge"  # bob problem 8, lastSend 2026-03-01T10:00:00Z, pending 2h0m0s`,
	} {
		if !strings.HasPrefix(calls[i], want) {
			t.Errorf("line %d:\n got %s\nwant %s...", i, calls[i], want)
		}
	}
	if !strings.Contains(b.String(), "# 2 submissions pending (status -1) for over 30m0s") {
		t.Errorf("no count line:\n%s", b.String())
	}
}

// TestPrintPendingJSON: --json's object carries what the script does.
func TestPrintPendingJSON(t *testing.T) {
	var b bytes.Buffer
	if err := printPendingJSON(&b, pendingSubs(), time.Hour, pendingNow); err != nil {
		t.Fatal(err)
	}
	var got pendingJSON
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if got.Count != 2 || got.OlderThan != "1h0m0s" || len(got.Submissions) != 2 {
		t.Fatalf("%+v", got)
	}
	s := got.Submissions[1]
	if s.ID != "65e100000000000000000002" || s.User != "bob" || s.Problem != 8 || s.PendingSeconds != 7200 ||
		s.Rejudge.Method != "GET" || s.Rejudge.Path != "/submission/65e100000000000000000002/rejudge" || s.Rejudge.RefusedUntil != nil {
		t.Errorf("%+v", s)
	}
	if r := got.Submissions[0].Rejudge.RefusedUntil; r == nil || !r.Equal(pendingNow.Add(3*time.Minute)) {
		t.Errorf("refusedUntil %v, want now + 3m", r)
	}
	b.Reset()
	if err := printPendingJSON(&b, nil, time.Hour, pendingNow); err != nil || !strings.Contains(b.String(), `"submissions": []`) {
		t.Errorf("none: %v %s (want an empty array, not null)", err, b.String())
	}
}

// TestPrintStatusPending: status's pending line.
func TestPrintStatusPending(t *testing.T) {
	var b bytes.Buffer
	printStatusPending(&b, nil, 30*time.Minute, pendingNow)
	printStatusPending(&b, pendingSubs(), 30*time.Minute, pendingNow)
	want := "pending: none over 30m0s\n" +
		"pending: 2 submissions (status -1) over 30m0s, oldest 24h2m0s: results that never landed; 'materializer pending' lists their rejudge calls\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestPendingAgeChecked: an age under 5 minutes (the Back-End refuses
// those rejudges) or negative is a configuration error (exit 2) naming
// the variable or flag, before any connection; 0 turns the check off.
func TestPendingAgeChecked(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		code int
		name string
	}{
		{"1m", []string{"status"}, exitConfig, "MATERIALIZER_PENDING_AGE"},
		{"-30m", []string{"run"}, exitConfig, "MATERIALIZER_PENDING_AGE"},
		{"", []string{"pending", "--older-than", "4m59s"}, exitConfig, "--older-than"},
		{"", []string{"pending", "--older-than", "-1h"}, exitConfig, "--older-than"},
	} {
		cleanConfigEnv(t)
		t.Setenv("MATERIALIZER_MONGODB_URI", "mongodb://127.0.0.1:1/?replicaSet=rs0&serverSelectionTimeoutMS=100")
		if c.env != "" {
			t.Setenv("MATERIALIZER_PENDING_AGE", c.env)
		}
		r := runCLI(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.name) {
			t.Errorf("%s=%q %v: want exit %d naming %s\n%v", "MATERIALIZER_PENDING_AGE", c.env, c.args, c.code, c.name, r)
		}
	}
	for _, c := range []struct{ flag, configured, want time.Duration }{
		{0, 0, 30 * time.Minute}, {0, time.Hour, time.Hour}, {10 * time.Minute, time.Hour, 10 * time.Minute},
	} {
		if got := pendingAge(c.flag, c.configured); got != c.want {
			t.Errorf("pendingAge(%s, %s) = %s, want %s", c.flag, c.configured, got, c.want)
		}
	}
}
