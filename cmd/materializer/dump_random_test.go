package main

import (
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/reference"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// refDB converts documents for the independent reference derivation.
func refDB(d materialize.Docs) reference.DB {
	return reference.DB{Users: d.Users, Problems: d.Problems, Homeworks: d.Homeworks, Submissions: d.Submissions}
}

// randomDocs builds a small random Normal-OJ database with stale derived
// values, including what the vectors hold rarely: submissions exactly at a
// deadline, rejudges in flight, handwritten ones, numbers stored as int64
// or doubles, repeated and dangling homework references, a problem key no
// problem id renders to.
func randomDocs(seed uint64) materialize.Docs {
	r := rand.New(rand.NewPCG(seed, 77))
	raw := materializetest.Raw
	users := []string{"alice", "bob", "dot.user", "carol"}
	probs := []int64{1, 2, 3}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	var d materialize.Docs
	for _, u := range users[:3] { // carol has submissions but no document
		d.Users = append(d.Users, raw("_id", u, "submission", int32(r.IntN(9)), "AC_submission", int64(r.IntN(3)), "AC_problem_ids", bson.A{int32(2)}))
	}
	penalties := []any{"score = score * 0.8 ** overtime", "score = score / overtime", nil, "score -= overtime * 5", "score = 2 ** 62 + score"}
	var hws []bson.ObjectID
	var ends []int64
	for i := 0; i < 3; i++ {
		id := bson.NewObjectIDFromTimestamp(time.Unix(int64(1_700_000_000+i), 0))
		hws = append(hws, id)
		end := base + int64(r.IntN(6))*86_400_000
		ends = append(ends, end)
		ss := bson.D{}
		for _, u := range users {
			ud := bson.D{}
			for _, p := range probs {
				if r.IntN(3) > 0 {
					ud = append(ud, bson.E{Key: strconv.FormatInt(p, 10), Value: materializetest.D("score", float64(r.IntN(100)), "problemStatus", nil, "submissionIds", bson.A{"stale"}, "rawScore", int64(3))})
				}
			}
			if r.IntN(5) == 0 {
				ud = append(ud, bson.E{Key: "01", Value: materializetest.D("score", int32(5), "problemStatus", int32(0), "submissionIds", bson.A{})})
			}
			ss = append(ss, bson.E{Key: u, Value: ud})
		}
		kv := []any{"_id", id, "duration", materializetest.D("start", bson.DateTime(base), "end", bson.DateTime(end))}
		if p := penalties[r.IntN(len(penalties))]; p != nil {
			kv = append(kv, "penalty", p)
		}
		d.Homeworks = append(d.Homeworks, raw(append(kv, "studentStatus", ss)...))
	}
	for _, p := range probs {
		list := bson.A{}
		for _, i := range r.Perm(len(hws)) {
			if r.IntN(4) > 0 {
				list = append(list, hws[i])
			}
		}
		if len(list) > 0 && r.IntN(3) == 0 {
			list = append(list, list[0])
		}
		if r.IntN(4) == 0 {
			list = append(list, bson.NewObjectIDFromTimestamp(time.Unix(1_600_000_000, 0)))
		}
		d.Problems = append(d.Problems, raw("_id", int32(p), "homeworks", list))
	}
	for i := 0; i < 10+r.IntN(30); i++ {
		ts := base + int64(r.IntN(10*86_400_000))
		if r.IntN(4) == 0 {
			ts = ends[r.IntN(len(ends))] // exactly at a deadline: on time
		}
		id := bson.NewObjectIDFromTimestamp(time.UnixMilli(ts))
		id[11], id[10] = byte(i), byte(i>>8)
		status := int32(r.IntN(9) - 2)
		score := []any{int32(0), int32(40), int64(60), 100.0, int32(100)}[r.IntN(5)]
		if status == -2 || (status == -1 && r.IntN(2) == 0) {
			score = int32(-1)
		}
		d.Submissions = append(d.Submissions, raw("_id", id, "user", users[r.IntN(len(users))], "problem", int32(probs[r.IntN(len(probs))]),
			"languageType", int32(r.IntN(4)), "timestamp", bson.DateTime(ts), "status", status, "score", score))
	}
	return d
}

// TestDumpRandomWorlds: rebuild --dump --out of random stale databases
// leaves every derived value equal to the independent reference
// derivation, changes nothing else, and verify of the output is clean.
func TestDumpRandomWorlds(t *testing.T) {
	cleanConfigEnv(t)
	drifted := 0
	for seed := uint64(1); seed <= 12; seed++ {
		d := randomDocs(seed)
		if len(reference.Check(refDB(d))) > 0 {
			drifted++
		}
		root := t.TempDir()
		in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
		writeDump(t, in, d, nil)
		if r := runCLI(t, "rebuild", "--dump", in, "--out", out); r.code != exitOK {
			t.Fatalf("seed %d: rebuild: want exit 0\n%v", seed, r)
		}
		if diffs := reference.Check(refDB(readDumpDocs(t, out))); len(diffs) > 0 {
			t.Errorf("seed %d: the rebuilt dump differs from the reference derivation:\n%s", seed, strings.Join(diffs, "\n"))
		}
		checkOnlyDerivedChanged(t, in, out)
		if r := runCLI(t, "verify", "--dump", out); r.code != exitOK {
			t.Errorf("seed %d: verify of the output: want exit 0\n%v", seed, r)
		}
	}
	if drifted == 0 {
		t.Fatal("no random database started stale; the test proves nothing")
	}
}
