package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// TestIntegrationPendingSubmissions, end to end on a replica set: before
// any 'run', status says the pending index is missing (exit 0) and
// pending fails saying who builds it (exit 1); 'run' builds it and, as
// the lease holder, logs the one judged submission pending past
// MATERIALIZER_PENDING_AGE; then pending lists exactly it (not the
// recent one, not the handwritten one) as a rejudge call, --json too, and
// status counts it. Skips without a server.
func TestIntegrationPendingSubmissions(t *testing.T) {
	it := newIntegration(t)
	now := time.Now().UTC()
	sub := func(lang int32, sent time.Time) bson.ObjectID {
		id := bson.NewObjectIDFromTimestamp(sent)
		it.insert(materialize.Docs{Submissions: []bson.Raw{mustRaw(t, bson.D{
			{Key: "_id", Value: id}, {Key: "problem", Value: int32(7)}, {Key: "user", Value: "alice"},
			{Key: "languageType", Value: lang}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(sent)},
			{Key: "status", Value: int32(-1)}, {Key: "score", Value: int32(-1)}, {Key: "tasks", Value: bson.A{}},
			{Key: "lastSend", Value: bson.NewDateTimeFromTime(sent)},
		})}})
		return id
	}
	lost := sub(1, now.Add(-2*time.Hour))
	sub(0, now.Add(-time.Minute))                               // in the sandbox's queue
	sub(materialize.LanguageHandwritten, now.Add(-3*time.Hour)) // waiting for a teacher
	t.Setenv("MATERIALIZER_PENDING_AGE", "30m")

	r := runCLI(t, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "pending: not checked: index pending_languageType_1_lastSend_1") {
		t.Fatalf("status before the index: want exit 0 and the index named\n%v", r)
	}
	r = runCLI(t, "pending")
	if r.code != exitFail || !strings.Contains(r.stderr, "'materializer run' builds it") {
		t.Fatalf("pending before the index: want exit 1 saying who builds it\n%v", r)
	}

	d := startDaemon(t, buildBinary(t))
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(d.out.String(), `"count":1,"oldest":"`+lost.Hex()+`"`) {
		if time.Now().After(deadline) {
			t.Fatalf("run logged no pending submission %s\n%s", lost.Hex(), tail(d.out.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("run after SIGTERM: exit %d", code)
	}

	r = runCLI(t, "pending")
	var calls []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(l, "curl ") {
			calls = append(calls, l)
		}
	}
	if r.code != exitOK || len(calls) != 1 || !strings.Contains(calls[0], `"$API/submission/`+lost.Hex()+`/rejudge"`) {
		t.Fatalf("pending: want exit 0 and one rejudge call for %s\n%v", lost.Hex(), r)
	}
	r = runCLI(t, "pending", "--json", "--older-than", "5m")
	var out pendingJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != exitOK || out.Count != 1 || out.Submissions[0].ID != lost.Hex() {
		t.Fatalf("pending --json: %v\n%v", err, r)
	}
	r = runCLI(t, "status")
	if r.code != exitOK || !strings.Contains(r.stdout, "pending: 1 submissions (status -1) over 30m0s") {
		t.Fatalf("status: want the pending count\n%v", r)
	}
}

func mustRaw(t *testing.T, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
