// Package demo generates Normal-OJ-shaped data for demonstrations and
// load tests: users, problems, homeworks with penalties, deadlines and
// studentStatus entries, and submissions with realistic statuses and
// timestamps, stored exactly as Back-End stores them (including the stale
// derived values its old code leaves behind).
package demo

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Params size the generated data.
type Params struct {
	Users       int
	Problems    int
	Homeworks   int
	Submissions int
	Seed        uint64
	// Start is when the first homework opens (2026-01-05 UTC when zero).
	Start time.Time
}

// Penalties are programs of the kind teachers write.
var Penalties = []string{
	"score = score * 0.8 ** overtime",
	"if overtime > 3:\n    score = 0\nelse:\n    score = score * (1 - overtime * 0.1)",
	"score = score * 0.9 if overtime < 7 else 0",
	"score -= overtime * 5",
	"score = 0",
	"score = score // 2",
}

// Generate returns the documents of the four collections. Every user is
// enrolled in every homework; each homework holds 1-5 problems, each
// problem is listed by at most two homeworks.
func Generate(p Params) map[string][]bson.Raw {
	if p.Start.IsZero() {
		p.Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	}
	r := rand.New(rand.NewPCG(p.Seed, p.Seed+1))
	day := 24 * time.Hour
	out := make(map[string][]bson.Raw)
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		out[c] = []bson.Raw{} // every collection, even empty, so a dump has all four files
	}
	users := make([]string, p.Users)
	for i := range users {
		users[i] = fmt.Sprintf("student%04d", i)
		out[materialize.CollUser] = append(out[materialize.CollUser], marshal(bson.D{
			{Key: "_id", Value: users[i]}, {Key: "userId", Value: fmt.Sprintf("%024x", i)},
			{Key: "email", Value: users[i] + "@example.edu"}, {Key: "md5", Value: "00000000000000000000000000000000"},
			{Key: "active", Value: true}, {Key: "role", Value: int32(2)},
			{Key: "profile", Value: bson.D{{Key: "displayedName", Value: users[i]}, {Key: "bio", Value: ""}}},
			{Key: "courses", Value: bson.A{}}, {Key: "submissions", Value: bson.A{}},
			{Key: "AC_problem_ids", Value: bson.A{}}, {Key: "AC_submission", Value: int32(r.IntN(3))},
			{Key: "submission", Value: int32(r.IntN(10))}, {Key: "problemSubmission", Value: bson.D{}},
		}))
	}
	hwIDs := make([]bson.ObjectID, p.Homeworks)
	hwProblems := make([][]int64, p.Homeworks)
	problemHWs := make(map[int64][]bson.ObjectID)
	ends := make([]time.Time, p.Homeworks)
	for i := range hwIDs {
		start := p.Start.Add(time.Duration(i*7) * day)
		hwIDs[i] = objectID(start, uint64(1<<40+i))
		ends[i] = start.Add(time.Duration(7+r.IntN(7)) * day)
		for n := 1 + r.IntN(5); n > 0 && p.Problems > 0; n-- {
			pid := int64(1 + r.IntN(p.Problems))
			if len(problemHWs[pid]) < 2 && !contains(hwProblems[i], pid) {
				hwProblems[i] = append(hwProblems[i], pid)
				problemHWs[pid] = append(problemHWs[pid], hwIDs[i])
			}
		}
	}
	for i, id := range hwIDs {
		ss := bson.D{}
		for _, u := range users {
			ud := bson.D{}
			for _, pid := range hwProblems[i] {
				ud = append(ud, bson.E{Key: strconv.FormatInt(pid, 10), Value: bson.D{
					{Key: "score", Value: int32(0)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}},
				}})
			}
			ss = append(ss, bson.E{Key: u, Value: ud})
		}
		pids := bson.A{}
		for _, pid := range hwProblems[i] {
			pids = append(pids, int32(pid))
		}
		out[materialize.CollHomework] = append(out[materialize.CollHomework], marshal(bson.D{
			{Key: "_id", Value: id}, {Key: "homeworkName", Value: fmt.Sprintf("hw%02d", i)},
			{Key: "markdown", Value: ""}, {Key: "scoreboardStatus", Value: int32(0)}, {Key: "courseId", Value: "cccccccccccccccccccccccc"},
			{Key: "duration", Value: bson.D{{Key: "start", Value: bson.NewDateTimeFromTime(ends[i].Add(-7 * day))}, {Key: "end", Value: bson.NewDateTimeFromTime(ends[i])}}},
			{Key: "problemIds", Value: pids}, {Key: "studentStatus", Value: ss}, {Key: "ip_filters", Value: bson.A{}},
			{Key: "penalty", Value: Penalties[r.IntN(len(Penalties))]},
		}))
	}
	for pid := int64(1); pid <= int64(p.Problems); pid++ {
		hws := bson.A{}
		for _, h := range problemHWs[pid] {
			hws = append(hws, h)
		}
		out[materialize.CollProblem] = append(out[materialize.CollProblem], marshal(bson.D{
			{Key: "_id", Value: int32(pid)}, {Key: "problemName", Value: fmt.Sprintf("p%d", pid)},
			{Key: "owner", Value: "teacher"}, {Key: "problemType", Value: int32(0)},
			{Key: "ACUser", Value: int32(0)}, {Key: "submitter", Value: int32(0)}, {Key: "homeworks", Value: hws},
		}))
	}
	span := time.Duration(max(p.Homeworks, 1)*7+14) * day
	statuses := []int32{0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, -1}
	for i := 0; i < p.Submissions && p.Problems > 0 && p.Users > 0; i++ {
		ts := p.Start.Add(time.Duration(r.Int64N(int64(span))))
		st := statuses[r.IntN(len(statuses))]
		score := int32(-1)
		switch {
		case st == 0:
			score = 100
		case st > 0:
			score = int32(r.IntN(10) * 10)
		}
		lang := int32(r.IntN(3))
		if r.IntN(50) == 0 {
			lang = materialize.LanguageHandwritten
		}
		out[materialize.CollSubmission] = append(out[materialize.CollSubmission], marshal(bson.D{
			{Key: "_id", Value: objectID(ts, uint64(i))},
			{Key: "problem", Value: int32(1 + r.IntN(p.Problems))}, {Key: "user", Value: users[r.IntN(len(users))]},
			{Key: "languageType", Value: lang}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(ts)},
			{Key: "status", Value: st}, {Key: "score", Value: score}, {Key: "tasks", Value: bson.A{}},
			{Key: "runTime", Value: int32(r.IntN(1000))}, {Key: "memoryUsage", Value: int32(r.IntN(65536))},
			{Key: "codeMinioPath", Value: nil}, {Key: "lastSend", Value: bson.NewDateTimeFromTime(ts)}, {Key: "ip_addr", Value: "127.0.0.1"},
		}))
	}
	return out
}

// objectID returns the ObjectId of time ts and number n: deterministic
// (NewObjectIDFromTimestamp adds process-random bytes) and unique per n.
func objectID(ts time.Time, n uint64) bson.ObjectID {
	var id bson.ObjectID
	sec := uint32(ts.Unix())
	id[0], id[1], id[2], id[3] = byte(sec>>24), byte(sec>>16), byte(sec>>8), byte(sec)
	for i := 0; i < 8; i++ {
		id[11-i] = byte(n >> (8 * i))
	}
	return id
}

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func marshal(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("demo: %v", err)) // only encodable values are built above
	}
	return b
}
