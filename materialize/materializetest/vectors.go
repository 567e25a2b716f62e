// Package materializetest reads the derive test vectors and compares
// derivations and stored documents with their expectations. It is shared by
// the tests of several packages; it is not used by the daemon.
package materializetest

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// Vector is one case of derive.jsonl.
type Vector struct {
	Name          string
	DB            materialize.Docs
	ExpectUsers   []bson.Raw // {_id, submission, AC_submission, AC_problem_ids}
	ExpectHWs     []bson.Raw // {_id, studentStatus}
	PenaltyErrors int
}

// ReadVectors parses a derive.jsonl file (Extended JSON v2, relaxed, one
// case a line).
func ReadVectors(path string) ([]Vector, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read vectors: %w", err)
	}
	var out []Vector
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var raw bson.Raw
		if err := bson.UnmarshalExtJSON(line, false, &raw); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		v, err := parseVector(raw)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

func docs(raw bson.Raw, key ...string) ([]bson.Raw, error) {
	v, err := raw.LookupErr(key...)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", key, err)
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, fmt.Errorf("%v: not an array", key)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, err
	}
	out := make([]bson.Raw, len(vals))
	for i, x := range vals {
		d, ok := x.DocumentOK()
		if !ok {
			return nil, fmt.Errorf("%v.%d: not a document", key, i)
		}
		out[i] = d
	}
	return out, nil
}

func parseVector(raw bson.Raw) (Vector, error) {
	var v Vector
	var err error
	v.Name = raw.Lookup("name").StringValue()
	if v.DB.Users, err = docs(raw, "db", "user"); err != nil {
		return v, err
	}
	if v.DB.Problems, err = docs(raw, "db", "problem"); err != nil {
		return v, err
	}
	if v.DB.Homeworks, err = docs(raw, "db", "homework"); err != nil {
		return v, err
	}
	if v.DB.Submissions, err = docs(raw, "db", "submission"); err != nil {
		return v, err
	}
	if v.ExpectUsers, err = docs(raw, "expect", "user"); err != nil {
		return v, err
	}
	if v.ExpectHWs, err = docs(raw, "expect", "homework"); err != nil {
		return v, err
	}
	pe, ok := raw.Lookup("penaltyErrors").AsInt64OK()
	if !ok {
		return v, fmt.Errorf("penaltyErrors: not a number")
	}
	v.PenaltyErrors = int(pe)
	return v, nil
}

// Expected returns the vector's expectation as a derivation result.
func (v Vector) Expected() (*materialize.Result, error) {
	res := &materialize.Result{
		Users:         make(map[string]materialize.UserStats),
		Entries:       make(map[bson.ObjectID]map[string]map[string]materialize.Entry),
		PenaltyErrors: v.PenaltyErrors,
	}
	for _, u := range v.ExpectUsers {
		name, err := materialize.DecodeUserID(u)
		if err != nil {
			return nil, err
		}
		st, ok := materialize.DecodeUserStats(u)
		if !ok {
			return nil, fmt.Errorf("expect user %s: unreadable", name)
		}
		res.Users[name] = st
	}
	for _, h := range v.ExpectHWs {
		id := h.Lookup("_id").ObjectID()
		entries, err := StoredEntries(h)
		if err != nil {
			return nil, fmt.Errorf("expect homework %s: %w", id.Hex(), err)
		}
		res.Entries[id] = entries
	}
	return res, nil
}

// StoredEntries reads every studentStatus entry of a homework document.
func StoredEntries(h bson.Raw) (map[string]map[string]materialize.Entry, error) {
	out := make(map[string]map[string]materialize.Entry)
	ss, err := h.LookupErr("studentStatus")
	if err != nil {
		return out, nil
	}
	users, err := ss.Document().Elements()
	if err != nil {
		return nil, err
	}
	for _, ue := range users {
		ud, ok := ue.Value().DocumentOK()
		if !ok {
			continue
		}
		probs, err := ud.Elements()
		if err != nil {
			return nil, err
		}
		m := make(map[string]materialize.Entry)
		for _, pe := range probs {
			e, ok := materialize.DecodeEntry(pe.Value())
			if !ok {
				return nil, fmt.Errorf("entry %s.%s: not a derived value: %s", ue.Key(), pe.Key(), pe.Value())
			}
			m[pe.Key()] = e
		}
		out[ue.Key()] = m
	}
	return out, nil
}

// Diff lists every difference between a derivation and the vector's
// expectation: users (only those with a user document are compared),
// entries (exactly the expected set) and the penalty error count.
func Diff(v Vector, got *materialize.Result) []string {
	want, err := v.Expected()
	if err != nil {
		return []string{err.Error()}
	}
	return DiffResults(want, got)
}

// DiffResults compares a derivation with an expectation: users named by
// want, every entry of both, and the penalty error count.
func DiffResults(want, got *materialize.Result) []string {
	var out []string
	for name, w := range want.Users {
		g, ok := got.Users[name]
		if !ok {
			g = materialize.UserStats{ACProblemIDs: []int64{}}
		}
		if !w.Equal(g) {
			out = append(out, fmt.Sprintf("user %s: got %+v, want %+v", name, g, w))
		}
	}
	for h, users := range want.Entries {
		for u, probs := range users {
			for pk, w := range probs {
				g, ok := got.Entries[h][u][pk]
				if !ok {
					out = append(out, fmt.Sprintf("homework %s entry %s.%s: missing, want %+v", h.Hex(), u, pk, w))
				} else if !w.Equal(g) {
					out = append(out, fmt.Sprintf("homework %s entry %s.%s: got %+v, want %+v", h.Hex(), u, pk, g, w))
				}
			}
		}
	}
	for h, users := range got.Entries {
		for u, probs := range users {
			for pk := range probs {
				if _, ok := want.Entries[h][u][pk]; !ok {
					out = append(out, fmt.Sprintf("homework %s entry %s.%s: derived but not expected", h.Hex(), u, pk))
				}
			}
		}
	}
	if want.PenaltyErrors != got.PenaltyErrors {
		out = append(out, fmt.Sprintf("penalty errors: got %d, want %d", got.PenaltyErrors, want.PenaltyErrors))
	}
	return out
}

// Stored reads the derived values as they are stored in docs (users with
// readable derived fields, every entry), for comparison with a derivation.
func Stored(docs materialize.Docs) (*materialize.Result, error) {
	res := &materialize.Result{
		Users:   make(map[string]materialize.UserStats),
		Entries: make(map[bson.ObjectID]map[string]map[string]materialize.Entry),
	}
	for _, u := range docs.Users {
		name, err := materialize.DecodeUserID(u)
		if err != nil {
			continue
		}
		st, ok := materialize.DecodeUserStats(u)
		if !ok {
			st = unreadableUser
		}
		res.Users[name] = st
	}
	for _, h := range docs.Homeworks {
		id, ok := h.Lookup("_id").ObjectIDOK()
		if !ok {
			continue
		}
		entries := make(map[string]map[string]materialize.Entry)
		ss, err := h.LookupErr("studentStatus")
		if err == nil {
			if ssd, ok := ss.DocumentOK(); ok {
				users, _ := ssd.Elements()
				for _, ue := range users {
					ud, ok := ue.Value().DocumentOK()
					if !ok {
						continue
					}
					probs, _ := ud.Elements()
					m := make(map[string]materialize.Entry)
					for _, pe := range probs {
						e, ok := materialize.DecodeEntry(pe.Value())
						if !ok {
							e = unreadableEntry(pe.Value())
						}
						m[pe.Key()] = e
					}
					entries[ue.Key()] = m
				}
			}
		}
		res.Entries[id] = entries
	}
	return res, nil
}

// unreadableUser stands for stored user fields that are missing or of a
// non-derived type: it equals no derived value.
var unreadableUser = materialize.UserStats{Submission: math.MinInt64, ACProblemIDs: []int64{}}

// unreadableEntry stands for a stored entry value that is not a derived
// entry (garbage left by old code, a number, a foreign key): it equals no
// derived value, so comparisons report it instead of reading it as zero.
func unreadableEntry(v bson.RawValue) materialize.Entry {
	return materialize.Entry{Score: math.MinInt64, SubmissionIDs: []string{"<unreadable " + v.String() + ">"}}
}

// DiffStored compares the derived values stored in docs with the vector's
// expectation (penalty errors are not stored, so not compared).
func DiffStored(v Vector, docs materialize.Docs) []string {
	want, err := v.Expected()
	if err != nil {
		return []string{err.Error()}
	}
	got, err := Stored(docs)
	if err != nil {
		return []string{err.Error()}
	}
	got.PenaltyErrors = want.PenaltyErrors
	return DiffResults(want, got)
}

// Apply returns docs with the derivation res written into them the way the
// materializer writes: derived user fields set on existing users, existing
// entries replaced, nothing added or removed.
func Apply(t testing.TB, docs materialize.Docs, res *materialize.Result) materialize.Docs {
	t.Helper()
	out := materialize.Docs{Problems: docs.Problems, Submissions: docs.Submissions}
	for _, u := range docs.Users {
		name, err := materialize.DecodeUserID(u)
		if err != nil {
			out.Users = append(out.Users, u)
			continue
		}
		st, ok := res.Users[name]
		if !ok {
			st = materialize.UserStats{ACProblemIDs: []int64{}}
		}
		p, err := materialize.PatchUser(u, st)
		if err != nil {
			t.Fatal(err)
		}
		out.Users = append(out.Users, p)
	}
	for _, h := range docs.Homeworks {
		id, _ := h.Lookup("_id").ObjectIDOK()
		p, _, err := materialize.PatchHomework(h, res.Entries[id])
		if err != nil {
			t.Fatal(err)
		}
		out.Homeworks = append(out.Homeworks, p)
	}
	return out
}
