package materialize_test

import (
	"math"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

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
