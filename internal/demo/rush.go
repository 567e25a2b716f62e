package demo

import (
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// RushParams size a deadline rush on the university shape: one course of
// Students students, its current homework of Problems problems, and
// Earlier submissions per student made before the rush, InHomework of them
// to the current homework's problems (spread evenly over them) and the rest
// to PastProblems problems of the course's past homeworks (five problems
// each).
type RushParams struct {
	Students     int
	Problems     int
	Earlier      int
	InHomework   int
	PastProblems int
	Seed         uint64
	// Deadline is the current homework's end (2026-03-01 UTC when zero).
	Deadline time.Time
}

// Rush is a generated deadline rush: the documents before it and the
// landings of the rush.
type Rush struct {
	Docs     map[string][]bson.Raw // the four collections before the rush
	Homework bson.ObjectID
	Problems []int64
	Students []string
	Deadline time.Time

	p RushParams
}

// NewRush generates the documents of p. The same p gives the same
// documents.
func NewRush(p RushParams) *Rush {
	if p.Deadline.IsZero() {
		p.Deadline = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	}
	p.InHomework = min(p.InHomework, p.Earlier)
	if p.PastProblems <= 0 {
		p.PastProblems = 100
	}
	r := rand.New(rand.NewPCG(p.Seed, p.Seed+7))
	day := 24 * time.Hour
	out := &Rush{Docs: make(map[string][]bson.Raw), Deadline: p.Deadline, p: p}
	for _, c := range []string{materialize.CollUser, materialize.CollProblem, materialize.CollHomework, materialize.CollSubmission} {
		out.Docs[c] = []bson.Raw{}
	}
	emit := func(coll string, d bson.Raw) { out.Docs[coll] = append(out.Docs[coll], d) }
	for i := 0; i < p.Students; i++ {
		out.Students = append(out.Students, fmt.Sprintf("student%05d", i))
		emit(materialize.CollUser, userDoc(r, out.Students[i], i))
	}
	course := fmt.Sprintf("%024x", 1)
	// The current homework (opened a week before the deadline) and the
	// past ones, one a week before it.
	out.Homework = objectID(p.Deadline.Add(-7*day), 1<<40)
	for k := 0; k < p.Problems; k++ {
		out.Problems = append(out.Problems, int64(1+k))
	}
	emit(materialize.CollHomework, homeworkDoc(r, out.Homework, 0, course, p.Deadline, out.Students, out.Problems))
	for _, pid := range out.Problems {
		emit(materialize.CollProblem, problemDoc(pid, []bson.ObjectID{out.Homework}))
	}
	past := make([]int64, p.PastProblems)
	var pastEnds []time.Time
	for k := range past {
		past[k] = int64(1000 + k)
	}
	for h := 0; h*5 < len(past); h++ {
		end := p.Deadline.Add(-time.Duration(7*(h+1)) * day)
		pastEnds = append(pastEnds, end)
		id := objectID(end.Add(-7*day), uint64(1<<40+1+h))
		ps := past[h*5 : min(h*5+5, len(past))]
		emit(materialize.CollHomework, homeworkDoc(r, id, 1+h, course, end, out.Students, ps))
		for _, pid := range ps {
			emit(materialize.CollProblem, problemDoc(pid, []bson.ObjectID{id}))
		}
	}
	n := 0
	for u, name := range out.Students {
		for j := 0; j < p.Earlier; j++ {
			var pid int64
			var ts time.Time
			if j < p.InHomework {
				pid = out.Problems[j%len(out.Problems)]
				ts = p.Deadline.Add(-7*day + time.Duration(r.Int64N(int64(6*day))))
			} else {
				k := r.IntN(len(past))
				pid = past[k]
				ts = pastEnds[k/5].Add(-time.Duration(r.Int64N(int64(7 * day))))
			}
			doc := submissionDoc(r, n, ts, func() (int64, string) { return pid, name })
			// A third of the earlier submissions to past homeworks predate
			// MinIO: their code and outputs are GridFS files.
			rr := rand.New(rand.NewPCG(p.Seed, uint64(n)))
			emit(materialize.CollSubmission, withResults(rr, doc, j >= p.InHomework && rr.IntN(3) == 0))
			n++
			_ = u
		}
	}
	return out
}

// Landing returns the i-th submission of the rush as submitted (pending:
// status -1, score -1) and as judged (the same document with its
// result): a random student and problem of the current homework, judged
// within ten minutes either side of the deadline (about half late).
func (r *Rush) Landing(i int) (pending, judged bson.Raw) {
	rr := rand.New(rand.NewPCG(r.p.Seed+uint64(i)+1, 99))
	u := r.Students[rr.IntN(len(r.Students))]
	pid := r.Problems[rr.IntN(len(r.Problems))]
	ts := r.Deadline.Add(time.Duration(rr.Int64N(int64(20*time.Minute))) - 10*time.Minute)
	judged = submissionDoc(rr, 1<<32+i, ts, func() (int64, string) { return pid, u })
	var d bson.D
	if err := bson.Unmarshal(judged, &d); err != nil {
		panic(fmt.Sprintf("demo: %v", err))
	}
	for k := range d {
		if d[k].Key == "status" && d[k].Value == int32(materialize.StatusPending) {
			d = nil // a landing always has a result: redraw as a wrong answer
			break
		}
	}
	if d == nil {
		_ = bson.Unmarshal(judged, &d)
		for k := range d {
			switch d[k].Key {
			case "status":
				d[k].Value = int32(1)
			case "score":
				d[k].Value = int32(50)
			}
		}
		judged = marshal(d)
	}
	pd := make(bson.D, len(d))
	copy(pd, d)
	for k := range pd {
		switch pd[k].Key {
		case "status":
			pd[k].Value = int32(materialize.StatusPending)
		case "score":
			pd[k].Value = int32(-1)
		}
	}
	results := rand.New(rand.NewPCG(r.p.Seed+uint64(i)+1, 98))
	return withResults(results, marshal(pd), false), withResults(results, judged, false)
}

// withResults returns doc with the fields Back-End stores beside the
// derivation's (mongo/engine.py at dfbd76a: Submission, TaskResult,
// CaseResult, in their declaration order): a judged submission's tasks,
// each with its cases' results, and where its code is. A pending one
// (status -1) has no tasks yet. Code and case outputs are ZipFields,
// which are mongoengine FileFields: in GridFS, the document holding the
// file's ObjectId (gridFS, older submissions), or in MinIO, the document
// holding the object's path (codeMinioPath, outputMinioPath:
// mongo/submission.py's _generate_*_minio_path).
func withResults(r *rand.Rand, doc bson.Raw, gridFS bool) bson.Raw {
	var d bson.D
	if err := bson.Unmarshal(doc, &d); err != nil {
		panic(fmt.Sprintf("demo: %v", err))
	}
	var id bson.ObjectID
	var status int32
	for _, e := range d {
		switch e.Key {
		case "_id":
			id = e.Value.(bson.ObjectID)
		case "status":
			status = e.Value.(int32)
		}
	}
	ulid := func() string { return fmt.Sprintf("%026X", r.Uint64()) }
	gridFile := func() bson.ObjectID {
		var f bson.ObjectID
		for k := range f {
			f[k] = byte(r.Uint32())
		}
		return f
	}
	tasks := bson.A{}
	if status != int32(materialize.StatusPending) {
		for i := range 1 + r.IntN(3) {
			cases := bson.A{}
			for j := range 2 + r.IntN(5) {
				var output, path any
				if gridFS {
					output = gridFile()
				} else {
					path = fmt.Sprintf("submissions/%s_task%02d_case%02d_%s.zip", id.Hex(), i, j, ulid())
				}
				cs := status
				if cs > 0 && r.IntN(2) == 0 {
					cs = 0
				}
				cases = append(cases, bson.D{
					{Key: "status", Value: cs}, {Key: "execTime", Value: int32(r.IntN(1000))},
					{Key: "memoryUsage", Value: int32(r.IntN(65536))},
					{Key: "output", Value: output}, {Key: "outputMinioPath", Value: path},
				})
			}
			score := int32(0) // the task's score when accepted, else 0
			if status == 0 {
				score = int32(10 + r.IntN(5)*10)
			}
			tasks = append(tasks, bson.D{
				{Key: "status", Value: status}, {Key: "execTime", Value: int32(r.IntN(1000))},
				{Key: "memoryUsage", Value: int32(r.IntN(65536))}, {Key: "score", Value: score},
				{Key: "cases", Value: cases},
			})
		}
	}
	var code, codePath any
	if gridFS {
		code = gridFile()
	} else {
		codePath = fmt.Sprintf("submissions/%s_%s.zip", id.Hex(), ulid())
	}
	out := make(bson.D, 0, len(d)+2)
	for _, e := range d {
		switch e.Key {
		case "tasks":
			e.Value = tasks
		case "codeMinioPath":
			out = append(out, bson.E{Key: "code", Value: code})
			e.Value = codePath
		case "ip_addr":
			out = append(out, bson.E{Key: "comment", Value: nil})
		}
		out = append(out, e)
	}
	return marshal(out)
}
