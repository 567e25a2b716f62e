package materialize

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestRejudgeInFlight pins the project's rejudge decision
// (docs/derivation-spec.md, "Rejudge in flight"): status -1 with a score
// >= 0 counts as judged with its stored score and status; status -1 with
// score -1 (never judged) and status -2 do not count.
func TestRejudgeInFlight(t *testing.T) {
	hw := &Homework{
		ID:       bson.ObjectID{1},
		End:      1 << 50,
		Penalty:  "score = 0",
		Students: map[string]map[string]struct{}{"u": {"7": {}}},
	}
	id := func(n byte) bson.ObjectID { var o bson.ObjectID; o[11] = n; return o }
	cases := []struct {
		name          string
		status, score int64
		judged        bool
	}{
		{"accepted", 0, 100, true},
		{"wrong answer", 1, 40, true},
		{"rejudge in flight of an AC", StatusPending, 100, true},
		{"rejudge in flight of a zero score", StatusPending, 0, true},
		{"queued, never judged", StatusPending, -1, false},
		{"created", StatusCreated, -1, false},
		{"created with a score", StatusCreated, 50, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Submission{ID: id(1), User: "u", Problem: 7, Timestamp: 1000, Status: c.status, Score: c.score}
			if got := s.Judged(); got != c.judged {
				t.Fatalf("Judged() = %v, want %v", got, c.judged)
			}
			st := DeriveUser([]Submission{s})
			wantN, wantAC := int64(0), int64(0)
			if c.judged {
				wantN = 1
				if c.score == 100 {
					wantAC = 1
				}
			}
			if st.Submission != wantN || st.ACSubmission != wantAC || int64(len(st.ACProblemIDs)) != wantAC {
				t.Fatalf("DeriveUser = %+v, want submission %d, AC %d", st, wantN, wantAC)
			}
			res := NewDeriver().Pair("u", 7, []Submission{s}, []*Homework{hw})
			if len(res.Entries) != 1 {
				t.Fatalf("Pair: %d entries, want 1", len(res.Entries))
			}
			e := res.Entries[0].Entry
			if !c.judged {
				if !e.Equal(StartEntry()) {
					t.Fatalf("entry %+v, want the start value", e)
				}
				return
			}
			if e.Score != c.score || !e.HasStatus || e.ProblemStatus != c.status ||
				len(e.SubmissionIDs) != 1 || e.SubmissionIDs[0] != s.ID.Hex() {
				t.Fatalf("entry %+v, want score %d, problemStatus %d, submissionIds [%s]", e, c.score, c.status, s.ID.Hex())
			}
		})
	}
}
