package offline

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/drift"
	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// advDocs builds a random adversarial dump (unique _ids): users with and
// without documents, non-canonical and unknown problem keys, duplicate user
// and problem keys, non-document user values, homeworks the problem does not
// list, wide values, handwritten and in-flight submissions, equal
// timestamps, long groups.
func advDocs(seed uint64, nUsers, nSubs int) materialize.Docs {
	r := rand.New(rand.NewPCG(seed, seed^0x9e37))
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	nh := 1 + r.IntN(5)
	hws := make([]bson.ObjectID, nh)
	for i := range hws {
		hws[i] = bson.ObjectID{0xaa, byte(i), byte(seed)}
	}
	probIDs := []int64{1, 2, 3, 10, -4, 1 << 33}[:1+r.IntN(6)]
	var docs materialize.Docs
	for _, p := range probIDs {
		var list bson.A
		for range r.IntN(nh + 2) {
			list = append(list, hws[r.IntN(nh)]) // duplicates, omissions
		}
		if r.IntN(4) == 0 {
			list = append(list, bson.ObjectID{0xee}) // missing homework
		}
		docs.Problems = append(docs.Problems, mtest.Raw("_id", p, "homeworks", list))
	}
	name := func(i int) string { return fmt.Sprintf("u%03d", i) }
	for i := range nUsers {
		if r.IntN(5) == 0 {
			continue // no document
		}
		kv := []any{"_id", name(i)}
		switch r.IntN(4) {
		case 0:
			kv = append(kv, "submission", int32(r.IntN(3)), "AC_submission", int32(0), "AC_problem_ids", bson.A{})
		case 1:
			kv = append(kv, "submission", "x")
		}
		docs.Users = append(docs.Users, mtest.Raw(kv...))
	}
	keys := []string{"1", "2", "3", "10", "-4", "8589934592", "01", "abc", "", "99"}
	entryVal := func() any {
		switch r.IntN(5) {
		case 0:
			return int32(7)
		case 1:
			return mtest.D("score", int32(r.IntN(100)), "problemStatus", int32(0), "submissionIds", bson.A{"x"})
		}
		return mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	}
	for hi, id := range hws {
		ss := bson.D{}
		for range r.IntN(3 * nUsers / 2) {
			u := name(r.IntN(nUsers + 3))
			if r.IntN(15) == 0 {
				ss = append(ss, bson.E{Key: u, Value: int32(1)})
				continue
			}
			ud := bson.D{}
			for range r.IntN(5) {
				ud = append(ud, bson.E{Key: keys[r.IntN(len(keys))], Value: entryVal()})
			}
			ss = append(ss, bson.E{Key: u, Value: ud})
		}
		kv := []any{"_id", id, "duration", mtest.D("end", bson.NewDateTimeFromTime(end.Add(time.Duration(hi)*24*time.Hour))),
			"penalty", []string{"score = score // 2", "score = score - overtime", "score = 1 // 0"}[r.IntN(3)], "studentStatus", ss}
		if r.IntN(6) == 0 {
			kv = append(kv, "studentStatus", ss)
		}
		docs.Homeworks = append(docs.Homeworks, mtest.Raw(kv...))
	}
	values := []any{int32(0), int32(1), int32(100), int32(-1), int32(-2), int32(50), int64(1) << 40, int64(math.MinInt32) - 1, int32(100)}
	for i := range nSubs {
		kv := []any{"_id", bson.ObjectID{byte(i >> 16), byte(i >> 8), byte(i), byte(seed)}, "user", name(r.IntN(nUsers + 3)),
			"problem", append(probIDs, 77)[r.IntN(len(probIDs)+1)],
			"timestamp", bson.NewDateTimeFromTime(end.Add(time.Duration(r.IntN(8)-4) * 24 * time.Hour)),
			"status", values[r.IntN(len(values))], "score", values[r.IntN(len(values))]}
		if r.IntN(8) == 0 {
			kv = append(kv, "languageType", int32(materialize.LanguageHandwritten))
		}
		docs.Submissions = append(docs.Submissions, mtest.Raw(kv...))
	}
	return docs
}

// TestRunAdversarialSameAsOnline: advDocs dumps of every size through
// checkSameAsOnline (counts, every difference and every malformed
// document, and the output); the dumps hold both drifted and clean
// entries.
func TestRunAdversarialSameAsOnline(t *testing.T) {
	entries, drifted := 0, 0
	for seed := range uint64(60) {
		nUsers := []int{1, 3, 7, 20, 300}[seed%5]
		nSubs := []int{0, 5, 40, 200, 900}[(seed/5)%5]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			docs := advDocs(seed, nUsers, nSubs)
			checkSameAsOnline(t, docs)
			rep, _ := online(t, docs)
			entries += rep.Entries
			drifted += rep.DriftedEntries
		})
	}
	t.Logf("%d entries, %d drifted", entries, drifted)
	if drifted == 0 || entries == drifted {
		t.Fatal("generator produces no contrast")
	}
}

// checkDiffsSameAsOnline compares the reports' diffs and malformed lists as
// multisets, which checkSameAsOnline compares only by length.
func checkDiffsSameAsOnline(t *testing.T, docs materialize.Docs, userBits uint, malformed bool) (entries, drifted int) {
	t.Helper()
	d := writeTestDump(t, filepath.Join(t.TempDir(), "in"), docs)
	st := loadStore(t, docs)
	want, err := watch.Rebuild(context.Background(), st, materialize.NewDeriver(), watch.RebuildOptions{MaxDiffs: 1 << 20, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(context.Background(), d, Options{MaxDiffs: 1 << 20, userBits: userBits})
	if err != nil {
		t.Fatal(err)
	}
	str := func(ds []drift.Diff) []string {
		var out []string
		for _, d := range ds {
			out = append(out, fmt.Sprintf("%+v", d))
		}
		slices.Sort(out)
		return out
	}
	mal := func(ms []*materialize.DecodeError) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Error())
		}
		slices.Sort(out)
		return out
	}
	if g, w := str(got.Diffs), str(want.Diffs); !slices.Equal(g, w) {
		for i := range max(len(g), len(w)) {
			if i < len(g) && i < len(w) && g[i] == w[i] {
				continue
			}
			t.Errorf("diff %d:\noffline %v\nonline  %v", i, g[min(i, len(g)-1)], w[min(i, len(w)-1)])
			break
		}
		t.Fatalf("offline diffs (%d) differ from online (%d)", len(g), len(w))
	}
	if g, w := mal(got.Malformed), mal(want.Malformed); malformed && !slices.Equal(g, w) {
		t.Fatalf("malformed: offline %q\nonline %q", g, w)
	}
	if got.Submissions != want.Submissions || got.Users != want.Users || got.Entries != want.Entries ||
		got.DriftedUsers != want.DriftedUsers || got.DriftedEntries != want.DriftedEntries || got.PenaltyErrors != want.PenaltyErrors {
		t.Fatalf("counts: offline %+v\nonline %+v", *got, *want)
	}
	return want.Entries, want.DriftedEntries
}

// TestRunDuplicateIDsDiffsSameAsOnline: homeworks and users whose _id
// appears twice (a later document, even a malformed one, replaces an
// earlier one in a store keyed by _id) count, differ and are reported
// malformed as online.
func TestRunDuplicateIDsDiffsSameAsOnline(t *testing.T) {
	for seed := range uint64(40) {
		nUsers := []int{3, 7, 20, 300}[seed%4]
		docs := advDocs(seed, nUsers, 300)
		r := rand.New(rand.NewPCG(seed, 1))
		// Duplicate homeworks: a copy with another studentStatus.
		for _, h := range slices.Clone(docs.Homeworks) {
			if r.IntN(2) == 0 {
				continue
			}
			id := h.Lookup("_id").ObjectID()
			other := advDocs(seed+7, nUsers, 0).Homeworks[0]
			ss := other.Lookup("studentStatus")
			docs.Homeworks = append(docs.Homeworks, mtest.Raw("_id", id, "studentStatus", ss))
			if r.IntN(3) == 0 { // malformed: replaces it too
				docs.Homeworks = append(docs.Homeworks, mtest.Raw("_id", id, "penalty", int32(1)))
			}
		}
		// Duplicate users.
		for _, u := range slices.Clone(docs.Users) {
			if r.IntN(2) == 0 {
				docs.Users = append(docs.Users, mtest.Raw("_id", u.Lookup("_id").StringValue(), "submission", int32(r.IntN(3))))
			}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkDiffsSameAsOnline(t, docs, uint(seed%2), true) })
	}
}

// TestRunMalformedDuplicateHomework: a malformed homework document with
// the _id of an earlier good one replaces it in a store keyed by _id (the
// online rebuild then has no such homework); the offline path kept the
// earlier one.
func TestRunMalformedDuplicateHomework(t *testing.T) {
	hw := bson.ObjectID{3}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	entry := mtest.D("score", int32(9), "problemStatus", nil, "submissionIds", bson.A{})
	docs := materialize.Docs{
		Users:    []bson.Raw{mtest.Raw("_id", "al")},
		Problems: []bson.Raw{mtest.Raw("_id", int32(1), "homeworks", bson.A{hw})},
		Homeworks: []bson.Raw{
			mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D("al", mtest.D("1", entry))),
			mtest.Raw("_id", hw, "duration", "not a document"),
		},
		Submissions: []bson.Raw{mtest.Raw("_id", bson.ObjectID{1}, "user", "al", "problem", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end), "status", int32(0), "score", int32(100))},
	}
	checkDiffsSameAsOnline(t, docs, 0, true)
}

// TestRunAdversarialLarge: buckets of more than one block (4096 records),
// users whose records straddle blocks, long groups, all three orderings.
func TestRunAdversarialLarge(t *testing.T) {
	for seed := range uint64(12) {
		nUsers := []int{2, 5, 40, 600}[seed%4]
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			docs := advDocs(seed, nUsers, 9000)
			checkDiffsSameAsOnline(t, docs, 0, true)
			if seed < 4 {
				checkSameAsOnline(t, docs)
			}
		})
	}
}

func TestRunEmpty(t *testing.T) {
	checkSameAsOnline(t, materialize.Docs{})
	checkSameAsOnline(t, materialize.Docs{Users: []bson.Raw{mtest.Raw("_id", "al")}})
	checkSameAsOnline(t, materialize.Docs{Submissions: []bson.Raw{mtest.Raw("_id", bson.ObjectID{1}, "user", "al", "problem", int32(1),
		"timestamp", bson.NewDateTimeFromTime(time.Unix(0, 0)), "status", int32(0), "score", int32(100))}})
	checkSameAsOnline(t, materialize.Docs{Homeworks: []bson.Raw{mtest.Raw("_id", bson.ObjectID{1}, "studentStatus", mtest.D("al", mtest.D("1", int32(3), "", int32(4))))}})
}

// TestRunLongUserDocuments: user documents of more than 32 problem keys
// (duplicates then found through a map) and homeworks of more than 64
// distinct keys (the key cache full).
func TestRunLongUserDocuments(t *testing.T) {
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	hws := []bson.ObjectID{{1}, {2}}
	var problems, subs []bson.Raw
	for p := range 80 {
		problems = append(problems, mtest.Raw("_id", int32(p), "homeworks", bson.A{hws[p%2], hws[(p+1)%2]}))
	}
	r := rand.New(rand.NewPCG(5, 6))
	val := func(i int) bson.D {
		return mtest.D("score", int32(i%3), "problemStatus", nil, "submissionIds", bson.A{})
	}
	var homeworks []bson.Raw
	for hi, id := range hws {
		ss := bson.D{}
		for u := range 6 {
			ud := bson.D{}
			for range 20 + r.IntN(80) {
				k := fmt.Sprint(r.IntN(90))
				if r.IntN(10) == 0 {
					k = "0" + k
				}
				ud = append(ud, bson.E{Key: k, Value: val(r.IntN(9))})
			}
			ss = append(ss, bson.E{Key: fmt.Sprint("u", u), Value: ud})
			if u == 2 && hi == 0 {
				ss = append(ss, bson.E{Key: "u0", Value: ud[:40]}) // replaces u0's
			}
		}
		homeworks = append(homeworks, mtest.Raw("_id", id, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "penalty", "score = score // 2", "studentStatus", ss))
	}
	for i := range 3000 {
		subs = append(subs, mtest.Raw("_id", bson.ObjectID{byte(i >> 8), byte(i), 9}, "user", fmt.Sprint("u", r.IntN(7)), "problem", int32(r.IntN(85)),
			"timestamp", bson.NewDateTimeFromTime(end.Add(time.Duration(r.IntN(6)-3)*24*time.Hour)), "status", int32(r.IntN(3)), "score", int32(r.IntN(101))))
	}
	docs := materialize.Docs{Users: []bson.Raw{mtest.Raw("_id", "u0"), mtest.Raw("_id", "u1"), mtest.Raw("_id", "u5")},
		Problems: problems, Homeworks: homeworks, Submissions: subs}
	for _, bits := range []uint{0, 1} {
		checkDiffsSameAsOnline(t, docs, bits, true)
	}
	checkSameAsOnline(t, docs)
}

// TestRunMalformedDuplicateProblem: likewise for a problem.
func TestRunMalformedDuplicateProblem(t *testing.T) {
	hw := bson.ObjectID{3}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	entry := mtest.D("score", int32(9), "problemStatus", nil, "submissionIds", bson.A{})
	docs := materialize.Docs{
		Users:    []bson.Raw{mtest.Raw("_id", "al")},
		Problems: []bson.Raw{mtest.Raw("_id", int32(1), "homeworks", bson.A{hw}), mtest.Raw("_id", int32(1), "homeworks", "x")},
		Homeworks: []bson.Raw{
			mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D("al", mtest.D("1", entry))),
		},
		Submissions: []bson.Raw{mtest.Raw("_id", bson.ObjectID{1}, "user", "al", "problem", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end), "status", int32(0), "score", int32(100))},
	}
	checkDiffsSameAsOnline(t, docs, 0, true)
}

// TestRunExtremeProblemIDs: problem ids at both ends of int64 (their span
// wraps int64) and spans just under a bucket's record count.
func TestRunExtremeProblemIDs(t *testing.T) {
	hw := bson.ObjectID{9}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, probs := range [][]int64{{math.MinInt64, 0, math.MaxInt64}, {math.MinInt64, math.MinInt64 + 1}, {7, 8, 9, 10, 11}, {0, 29}, {0, 30}, {0, 31}} {
		var problems, subs []bson.Raw
		entries := bson.D{}
		for _, p := range probs {
			problems = append(problems, mtest.Raw("_id", p, "homeworks", bson.A{hw}))
			entries = append(entries, bson.E{Key: materialize.ProblemKey(p), Value: mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})})
		}
		for i := range 30 {
			p := probs[i%len(probs)]
			subs = append(subs, mtest.Raw("_id", bson.ObjectID{byte(i), 1}, "user", []string{"bob", "al", "cy"}[i%3], "problem", p,
				"timestamp", bson.NewDateTimeFromTime(end.Add(time.Duration(i%4-2)*24*time.Hour)), "status", int32(i%3), "score", int32(i*7%101)))
		}
		docs := materialize.Docs{
			Users:       []bson.Raw{mtest.Raw("_id", "al"), mtest.Raw("_id", "bob")},
			Problems:    problems,
			Homeworks:   []bson.Raw{mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "penalty", "score = score // 2", "studentStatus", mtest.D("al", entries, "bob", entries, "cy", entries))},
			Submissions: subs,
		}
		for _, bits := range []uint{0, 1} {
			checkDiffsSameAsOnline(t, docs, bits, true)
		}
		checkSameAsOnline(t, docs)
	}
}

// TestRunMalformedThenGoodDuplicates: a malformed document replaced by a
// later one with its _id is not in a store keyed by _id, so not reported.
func TestRunMalformedThenGoodDuplicates(t *testing.T) {
	hw := bson.ObjectID{3}
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	entry := mtest.D("score", int32(9), "problemStatus", nil, "submissionIds", bson.A{})
	docs := materialize.Docs{
		Users:    []bson.Raw{mtest.Raw("_id", int32(5)), mtest.Raw("_id", int32(5), "x", 1), mtest.Raw("_id", "al")},
		Problems: []bson.Raw{mtest.Raw("_id", int32(1), "homeworks", "x"), mtest.Raw("_id", int32(1), "homeworks", bson.A{hw})},
		Homeworks: []bson.Raw{
			mtest.Raw("_id", hw, "duration", "x"),
			mtest.Raw("_id", hw, "duration", mtest.D("end", bson.NewDateTimeFromTime(end)), "studentStatus", mtest.D("al", mtest.D("1", entry))),
		},
		Submissions: []bson.Raw{mtest.Raw("_id", bson.ObjectID{1}, "user", "al", "problem", int32(1),
			"timestamp", bson.NewDateTimeFromTime(end), "status", int32(0), "score", int32(100))},
	}
	checkDiffsSameAsOnline(t, docs, 0, true)
}
