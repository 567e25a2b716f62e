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

// Shapes of the generated data.
const (
	// ShapeUniversity is Normal-OJ's shape: users belong to courses (of
	// CourseSize students on average, from half to one and a half times
	// it), a homework belongs to a course and its studentStatus holds that
	// course's students, a problem belongs to the homeworks of one course,
	// and a student submits to the problems of their course's homeworks.
	ShapeUniversity = "university"
	// ShapeStress enrolls every user in every homework and lets anyone
	// submit to any problem: studentStatus grows with users × homeworks.
	ShapeStress = "stress"
)

// Params size the generated data.
type Params struct {
	Users       int
	Problems    int
	Homeworks   int
	Submissions int
	Seed        uint64
	// Shape is ShapeUniversity (the default when empty) or ShapeStress.
	Shape string
	// CourseSize is the mean number of students per course in the
	// university shape (80 when zero).
	CourseSize int
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

// Generate returns the documents of the four collections (each present,
// even when empty). See GenerateTo.
func Generate(p Params) map[string][]bson.Raw {
	out := make(map[string][]bson.Raw)
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		out[c] = []bson.Raw{} // every collection, even empty, so a dump has all four files
	}
	_ = GenerateTo(p, func(coll string, doc bson.Raw) error {
		out[coll] = append(out[coll], doc)
		return nil
	})
	return out
}

// GenerateTo passes every generated document to emit, collection by
// collection (users, homeworks, problems, then submissions), without
// holding the submissions in memory; an error from emit stops it. The same
// Params give the same documents. In the university shape (the default)
// users are split into courses, each homework belongs to one course and
// lists 1-5 problems of that course, and students submit to their course's
// problems; in the stress shape every user is enrolled in every homework,
// each problem is listed by at most two homeworks and anyone submits to
// any problem.
func GenerateTo(p Params, emit func(coll string, doc bson.Raw) error) error {
	if p.Start.IsZero() {
		p.Start = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	}
	switch p.Shape {
	case "", ShapeUniversity:
		return university(p, emit)
	case ShapeStress:
		return stress(p, emit)
	}
	return fmt.Errorf("unknown shape %q (want %s or %s)", p.Shape, ShapeUniversity, ShapeStress)
}

// stress is the everyone-everywhere shape.
func stress(p Params, emit func(coll string, doc bson.Raw) error) error {
	r := rand.New(rand.NewPCG(p.Seed, p.Seed+1))
	day := 24 * time.Hour
	users := make([]string, p.Users)
	for i := range users {
		users[i] = fmt.Sprintf("student%04d", i)
		if err := emit(materialize.CollUser, userDoc(r, users[i], i)); err != nil {
			return err
		}
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
		if err := emit(materialize.CollHomework, homeworkDoc(r, id, i, "cccccccccccccccccccccccc", ends[i], users, hwProblems[i])); err != nil {
			return err
		}
	}
	for pid := int64(1); pid <= int64(p.Problems); pid++ {
		if err := emit(materialize.CollProblem, problemDoc(pid, problemHWs[pid])); err != nil {
			return err
		}
	}
	span := time.Duration(max(p.Homeworks, 1)*7+14) * day
	for i := 0; i < p.Submissions && p.Problems > 0 && p.Users > 0; i++ {
		ts := p.Start.Add(time.Duration(r.Int64N(int64(span))))
		doc := submissionDoc(r, i, ts, func() (int64, string) {
			pid := int64(1 + r.IntN(p.Problems))
			return pid, users[r.IntN(len(users))]
		})
		if err := emit(materialize.CollSubmission, doc); err != nil {
			return err
		}
	}
	return nil
}

// university is Normal-OJ's shape (see ShapeUniversity).
func university(p Params, emit func(coll string, doc bson.Raw) error) error {
	r := rand.New(rand.NewPCG(p.Seed, p.Seed+2))
	day := 24 * time.Hour
	size := p.CourseSize
	if size <= 0 {
		size = 80
	}
	// Courses: consecutive runs of users, each of size/2 to 3*size/2.
	users := make([]string, p.Users)
	var courseOf []int     // user → course
	var courses [][]string // course → students
	for i := 0; i < p.Users; {
		n := min(size/2+r.IntN(size+1), p.Users-i)
		n = max(n, 1)
		c := len(courses)
		courses = append(courses, nil)
		for j := i; j < i+n; j++ {
			users[j] = fmt.Sprintf("student%05d", j)
			courses[c] = append(courses[c], users[j])
			courseOf = append(courseOf, c)
		}
		i += n
	}
	for i, u := range users {
		if err := emit(materialize.CollUser, userDoc(r, u, i)); err != nil {
			return err
		}
	}
	nc := max(len(courses), 1)
	// Homework i belongs to course i mod nc and lists 1-5 problems of that
	// course (problem pid belongs to course pid mod nc), each problem in at
	// most two homeworks.
	hwIDs := make([]bson.ObjectID, p.Homeworks)
	hwProblems := make([][]int64, p.Homeworks)
	courseHWs := make([][]int, nc)
	problemHWs := make(map[int64][]bson.ObjectID)
	ends := make([]time.Time, p.Homeworks)
	for i := range hwIDs {
		c := i % nc
		week := i / nc
		start := p.Start.Add(time.Duration(week*7+r.IntN(7)) * day)
		hwIDs[i] = objectID(start, uint64(1<<40+i))
		ends[i] = start.Add(time.Duration(7+r.IntN(7)) * day)
		courseHWs[c] = append(courseHWs[c], i)
		own := (p.Problems - c + nc - 1) / nc // problems c+1, c+1+nc, ... of course c
		if c >= p.Problems {
			own = 0
		}
		for n := 1 + r.IntN(5); n > 0 && own > 0; n-- {
			pid := int64(c + 1 + nc*r.IntN(own))
			if len(problemHWs[pid]) < 2 && !contains(hwProblems[i], pid) {
				hwProblems[i] = append(hwProblems[i], pid)
				problemHWs[pid] = append(problemHWs[pid], hwIDs[i])
			}
		}
	}
	for i, id := range hwIDs {
		c := i % nc
		var students []string
		if c < len(courses) {
			students = courses[c]
		}
		if err := emit(materialize.CollHomework, homeworkDoc(r, id, i, fmt.Sprintf("%024x", c+1), ends[i], students, hwProblems[i])); err != nil {
			return err
		}
	}
	for pid := int64(1); pid <= int64(p.Problems); pid++ {
		if err := emit(materialize.CollProblem, problemDoc(pid, problemHWs[pid])); err != nil {
			return err
		}
	}
	// A submission: a random student, a random homework of their course
	// and one of its problems, during or up to a week after the homework
	// (some late); a course without homework problems submits to any.
	for i := 0; i < p.Submissions && p.Problems > 0 && p.Users > 0; i++ {
		u := r.IntN(len(users))
		hws := courseHWs[courseOf[u]%nc]
		h := -1
		if len(hws) > 0 {
			h = hws[r.IntN(len(hws))]
		}
		var ts time.Time
		if h >= 0 && len(hwProblems[h]) > 0 {
			ts = ends[h].Add(-7*day + time.Duration(r.Int64N(int64(14*day))))
		} else {
			ts = p.Start.Add(time.Duration(r.Int64N(int64(max(p.Homeworks/nc, 1)*7+14) * int64(day))))
		}
		doc := submissionDoc(r, i, ts, func() (int64, string) {
			if h >= 0 && len(hwProblems[h]) > 0 {
				return hwProblems[h][r.IntN(len(hwProblems[h]))], users[u]
			}
			return int64(1 + r.IntN(p.Problems)), users[u]
		})
		if err := emit(materialize.CollSubmission, doc); err != nil {
			return err
		}
	}
	return nil
}

// userDoc is a Back-End user document with stale counts.
func userDoc(r *rand.Rand, name string, i int) bson.Raw {
	ac := int32(r.IntN(3))
	n := int32(r.IntN(10))
	return marshal(bson.D{
		{Key: "_id", Value: name}, {Key: "userId", Value: fmt.Sprintf("%024x", i)},
		{Key: "email", Value: name + "@example.edu"}, {Key: "md5", Value: "00000000000000000000000000000000"},
		{Key: "active", Value: true}, {Key: "role", Value: int32(2)},
		{Key: "profile", Value: bson.D{{Key: "displayedName", Value: name}, {Key: "bio", Value: ""}}},
		{Key: "courses", Value: bson.A{}}, {Key: "submissions", Value: bson.A{}},
		{Key: "AC_problem_ids", Value: bson.A{}}, {Key: "AC_submission", Value: ac},
		{Key: "submission", Value: n}, {Key: "problemSubmission", Value: bson.D{}},
	})
}

// homeworkDoc is a Back-End homework whose studentStatus holds a start
// entry for every student and problem.
func homeworkDoc(r *rand.Rand, id bson.ObjectID, i int, course string, end time.Time, students []string, problems []int64) bson.Raw {
	day := 24 * time.Hour
	ss := bson.D{}
	for _, u := range students {
		ud := bson.D{}
		for _, pid := range problems {
			ud = append(ud, bson.E{Key: strconv.FormatInt(pid, 10), Value: bson.D{
				{Key: "score", Value: int32(0)}, {Key: "problemStatus", Value: nil}, {Key: "submissionIds", Value: bson.A{}},
			}})
		}
		ss = append(ss, bson.E{Key: u, Value: ud})
	}
	pids := bson.A{}
	for _, pid := range problems {
		pids = append(pids, int32(pid))
	}
	return marshal(bson.D{
		{Key: "_id", Value: id}, {Key: "homeworkName", Value: fmt.Sprintf("hw%02d", i)},
		{Key: "markdown", Value: ""}, {Key: "scoreboardStatus", Value: int32(0)}, {Key: "courseId", Value: course},
		{Key: "duration", Value: bson.D{{Key: "start", Value: bson.NewDateTimeFromTime(end.Add(-7 * day))}, {Key: "end", Value: bson.NewDateTimeFromTime(end)}}},
		{Key: "problemIds", Value: pids}, {Key: "studentStatus", Value: ss}, {Key: "ip_filters", Value: bson.A{}},
		{Key: "penalty", Value: Penalties[r.IntN(len(Penalties))]},
	})
}

func problemDoc(pid int64, homeworks []bson.ObjectID) bson.Raw {
	hws := bson.A{}
	for _, h := range homeworks {
		hws = append(hws, h)
	}
	return marshal(bson.D{
		{Key: "_id", Value: int32(pid)}, {Key: "problemName", Value: fmt.Sprintf("p%d", pid)},
		{Key: "owner", Value: "teacher"}, {Key: "problemType", Value: int32(0)},
		{Key: "ACUser", Value: int32(0)}, {Key: "submitter", Value: int32(0)}, {Key: "homeworks", Value: hws},
	})
}

var statuses = []int32{0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, -1}

// submissionDoc is submission number i at ts, with a random result;
// pick chooses its problem and user (after the result is drawn).
func submissionDoc(r *rand.Rand, i int, ts time.Time, pick func() (int64, string)) bson.Raw {
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
	pid, user := pick()
	return marshal(bson.D{
		{Key: "_id", Value: objectID(ts, uint64(i))},
		{Key: "problem", Value: int32(pid)}, {Key: "user", Value: user},
		{Key: "languageType", Value: lang}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(ts)},
		{Key: "status", Value: st}, {Key: "score", Value: score}, {Key: "tasks", Value: bson.A{}},
		{Key: "runTime", Value: int32(r.IntN(1000))}, {Key: "memoryUsage", Value: int32(r.IntN(65536))},
		{Key: "codeMinioPath", Value: nil}, {Key: "lastSend", Value: bson.NewDateTimeFromTime(ts)}, {Key: "ip_addr", Value: "127.0.0.1"},
	})
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
