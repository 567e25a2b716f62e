package materialize_test

import (
	"math"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// TestBulkDeriverPairIn: a BulkDeriver derives what a Deriver does, pair
// by pair, on every derive vector; and an Entry.Clone of a BulkDeriver's
// result kept across every later PairIn of the vector (which overwrite
// its buffers) still holds the value derived.
func TestBulkDeriverPairIn(t *testing.T) {
	overwritten := 0
	for _, vec := range readDeriveVectors(t) {
		cat, subs := decodeGrouped(vec.DB)
		plain, reuse := materialize.NewDeriver(), materialize.NewBulkDeriver()
		var want, kept []materialize.HomeworkEntry
		var last *materialize.Entry
		var lastIDs []string
		materialize.ForEachGroup(subs, func(user string, problem int64, group []materialize.Submission) {
			var holding []*materialize.Homework
			for _, h := range cat.Visited(problem) {
				if h.HasEntry(user, problem) {
					holding = append(holding, h)
				}
			}
			p := plain.Pair(user, problem, append([]materialize.Submission(nil), group...), cat.Visited(problem))
			r := reuse.PairIn(user, problem, group, holding)
			if p.PenaltyErrors != r.PenaltyErrors || !reflect.DeepEqual(p.Entries, r.Entries) {
				t.Fatalf("%s: (%s, %d): BulkDeriver derives %+v, want %+v", vec.Name, user, problem, r, p)
			}
			if last != nil && len(lastIDs) > 0 && !reflect.DeepEqual(last.SubmissionIDs, lastIDs) {
				overwritten++ // the previous call's result was overwritten
			}
			last, lastIDs = nil, nil
			want = append(want, p.Entries...) // the plain Deriver's results are never overwritten
			for _, he := range r.Entries {
				kept = append(kept, materialize.HomeworkEntry{Homework: he.Homework, Entry: he.Entry.Clone()})
			}
			if n := len(r.Entries); n > 0 {
				last = &r.Entries[n-1].Entry
				lastIDs = append([]string(nil), last.SubmissionIDs...)
			}
		})
		for i := range kept {
			if !reflect.DeepEqual(kept[i], want[i]) {
				t.Fatalf("%s: a kept Clone changed: %+v, want %+v", vec.Name, kept[i], want[i])
			}
		}
	}
	if overwritten == 0 {
		t.Fatal("no BulkDeriver result was overwritten by a later call: the Clone check is empty")
	}
	t.Logf("%d BulkDeriver results overwritten by the next call", overwritten)
}

// TestDeriverOwnsResults: a Deriver's results are the caller's, a later
// Pair overwrites none of them, also after Bulk made a BulkDeriver
// sharing its program cache (the online path keeps every result).
func TestDeriverOwnsResults(t *testing.T) {
	d := materialize.NewDeriver()
	bulk := d.Bulk()
	var kept, want []materialize.HomeworkEntry
	for _, vec := range readDeriveVectors(t) {
		cat, subs := decodeGrouped(vec.DB)
		materialize.ForEachGroup(subs, func(user string, problem int64, group []materialize.Submission) {
			bulk.Pair(user, problem, append([]materialize.Submission(nil), group...), cat.Visited(problem))
			r := d.Pair(user, problem, group, cat.Visited(problem))
			kept = append(kept, r.Entries...)
			for _, he := range r.Entries {
				want = append(want, materialize.HomeworkEntry{Homework: he.Homework, Entry: he.Entry.Clone()})
			}
		})
	}
	if len(kept) == 0 {
		t.Fatal("no entries derived: the check is empty")
	}
	for i := range kept {
		if !reflect.DeepEqual(kept[i], want[i]) {
			t.Fatalf("a Deriver result changed after later calls: %+v, want %+v", kept[i], want[i])
		}
	}
}

// decodeGrouped decodes a vector's catalog and its submissions, sorted by
// SortGrouped; documents that do not decode are left out.
func decodeGrouped(db materialize.Docs) (*materialize.Catalog, []materialize.Submission) {
	cat := materialize.NewCatalog()
	for _, raw := range db.Problems {
		if p, err := materialize.DecodeProblem(raw); err == nil {
			cat.AddProblem(p)
		}
	}
	for _, raw := range db.Homeworks {
		if h, err := materialize.DecodeHomework(raw); err == nil {
			cat.AddHomework(h)
		}
	}
	var subs []materialize.Submission
	for _, raw := range db.Submissions {
		if s, err := materialize.DecodeSubmission(raw); err == nil {
			subs = append(subs, s)
		}
	}
	materialize.SortGrouped(subs)
	return cat, subs
}

// TestEntryCloneIsDeep: a Clone shares no memory with the entry.
func TestEntryCloneIsDeep(t *testing.T) {
	ids := []byte("aaaaaaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbbbb")
	e := materialize.Entry{Score: 3, SubmissionIDs: []string{string(ids[:24]), string(ids[24:])}}
	c := e.Clone()
	e.SubmissionIDs[0] = "changed"
	if c.SubmissionIDs[0] != "aaaaaaaaaaaaaaaaaaaaaaaa" || c.SubmissionIDs[1] != "bbbbbbbbbbbbbbbbbbbbbbbb" || c.Score != 3 {
		t.Fatalf("Clone %+v", c)
	}
	// Ids viewing a buffer that is then overwritten, as a BulkDeriver's do: the
	// Clone's strings must not view it.
	buf := []byte("cccccccccccccccccccccccc")
	v := materialize.Entry{SubmissionIDs: []string{unsafe.String(&buf[0], len(buf))}}
	vc := v.Clone()
	copy(buf, "dddddddddddddddddddddddd")
	if vc.SubmissionIDs[0] != "cccccccccccccccccccccccc" {
		t.Fatalf("Clone shares the ids' bytes: %q", vc.SubmissionIDs[0])
	}
	if empty := (materialize.Entry{}).Clone(); empty.SubmissionIDs == nil {
		t.Fatal("Clone of an entry without ids: nil SubmissionIDs (encodes as null, not [])")
	}
}

// TestRunningScoreWrapsToZero: a penalty of MinInt64 applied twice makes
// the running score MinInt64 + MinInt64, which wraps to exactly 0 in int64
// arithmetic: it must count as a penalty error (gained 0), not as a score
// of 0. The derivation agrees with the independent reference.
func TestRunningScoreWrapsToZero(t *testing.T) {
	hw := bson.ObjectID{11: 0xa1}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	late := func(n byte, h int, score int32) bson.Raw {
		ts := end.Add(time.Duration(h) * time.Hour)
		return mtest.Raw("_id", bson.ObjectID{0: 0x69, 11: n}, "user", "u", "problem", int32(7), "timestamp", bson.NewDateTimeFromTime(ts),
			"status", int32(1), "score", score)
	}
	docs := materialize.Docs{
		Users:    []bson.Raw{mtest.Raw("_id", "u")},
		Problems: []bson.Raw{mtest.Raw("_id", int32(7), "homeworks", bson.A{hw})},
		Homeworks: []bson.Raw{mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)),
			"penalty", "score = 0 - 9223372036854775807 - 1",
			"studentStatus", mtest.D("u", mtest.D("7", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))},
		Submissions: []bson.Raw{late(1, 1, 100), late(2, 2, 101)},
	}
	got := materialize.Derive(docs)
	e := got.Entries[hw]["u"]["7"]
	ref := reference.Derive(reference.DB{Users: docs.Users, Problems: docs.Problems, Homeworks: docs.Homeworks, Submissions: docs.Submissions})
	re := ref.Entries[hw.Hex()]["u"]["7"]
	if re.Score != math.MinInt64 || ref.PenaltyErrors != 1 {
		t.Fatalf("reference: %s with %d penalty errors; want score MinInt64 and 1 error", re, ref.PenaltyErrors)
	}
	if e.Score != re.Score || !e.HasRaw || e.RawScore != *re.RawScore || got.PenaltyErrors != ref.PenaltyErrors {
		t.Errorf("Derive: %+v with %d penalty errors; reference %s with %d", e, got.PenaltyErrors, re, ref.PenaltyErrors)
	}
}
