package reference

import (
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Check derives db and compares every stored derived value of db with it,
// by value: numbers of any BSON numeric type holding the same whole value
// are equal, key order inside an entry does not matter, and an entry must
// hold exactly the derived keys (rawScore only when derived). Stored user
// fields that are absent read as mongoengine's defaults (0, 0, []). It
// returns one line per difference, sorted; none when db is converged.
func Check(db DB) []string {
	return Compare(Derive(db), db)
}

// Compare compares the stored derived values of db with want.
func Compare(want *Result, db DB) []string {
	var out []string
	for _, raw := range db.Users {
		d, err := unmarshal(raw)
		if err != nil {
			continue
		}
		v, _ := field(d, "_id")
		name, ok := v.(string)
		if !ok {
			continue
		}
		w := want.Users[name]
		if msg := compareUser(d, w); msg != "" {
			out = append(out, fmt.Sprintf("user %q: %s", name, msg))
		}
	}
	for _, raw := range db.Homeworks {
		d, err := unmarshal(raw)
		if err != nil {
			continue
		}
		v, _ := field(d, "_id")
		oid, ok := v.(bson.ObjectID)
		if !ok {
			continue
		}
		wantH, ok := want.Entries[oid.Hex()]
		if !ok {
			continue // unreadable homework: derives nothing
		}
		stored := map[string]map[string]any{}
		if v, ok := field(d, "studentStatus"); ok {
			if ss, ok := v.(bson.D); ok {
				for _, ue := range ss {
					ud, ok := ue.Value.(bson.D)
					if !ok {
						continue
					}
					m := map[string]any{}
					for _, pe := range ud {
						m[pe.Key] = pe.Value
					}
					stored[ue.Key] = m
				}
			}
		}
		for u, probs := range wantH {
			for pk, w := range probs {
				s, ok := stored[u][pk]
				if !ok {
					out = append(out, fmt.Sprintf("homework %s entry %q.%s: missing, want %s", oid.Hex(), u, pk, w))
					continue
				}
				if msg := compareEntry(s, w); msg != "" {
					out = append(out, fmt.Sprintf("homework %s entry %q.%s: %s", oid.Hex(), u, pk, msg))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func compareUser(d bson.D, w User) string {
	num := func(key string) (int64, string) {
		v, ok := field(d, key)
		if !ok {
			return 0, "" // absent reads as 0
		}
		n, ok := whole(v)
		if !ok {
			return 0, fmt.Sprintf("%s is %v (%T), not a number", key, v, v)
		}
		return n, ""
	}
	n, msg := num("submission")
	if msg != "" {
		return msg
	}
	if n != w.Submission {
		return fmt.Sprintf("submission %d, want %d", n, w.Submission)
	}
	if n, msg = num("AC_submission"); msg != "" {
		return msg
	}
	if n != w.ACSubmission {
		return fmt.Sprintf("AC_submission %d, want %d", n, w.ACSubmission)
	}
	var ids []int64
	if v, ok := field(d, "AC_problem_ids"); ok {
		arr, ok := v.(bson.A)
		if !ok {
			return fmt.Sprintf("AC_problem_ids is %T", v)
		}
		for _, x := range arr {
			p, ok := whole(x)
			if !ok {
				return fmt.Sprintf("AC_problem_ids holds %v", x)
			}
			ids = append(ids, p)
		}
	}
	if fmt.Sprint(ids) != fmt.Sprint(w.ACProblemIDs) && !(len(ids) == 0 && len(w.ACProblemIDs) == 0) {
		return fmt.Sprintf("AC_problem_ids %v, want %v", ids, w.ACProblemIDs)
	}
	return ""
}

func compareEntry(stored any, w Entry) string {
	d, ok := stored.(bson.D)
	if !ok {
		return fmt.Sprintf("stored %v (%T), want %s", stored, stored, w)
	}
	keys := map[string]any{}
	for _, e := range d {
		if _, dup := keys[e.Key]; dup {
			return fmt.Sprintf("stored %v repeats key %q, want %s", d, e.Key, w)
		}
		keys[e.Key] = e.Value
	}
	want := map[string]bool{"score": true, "problemStatus": true, "submissionIds": true, "rawScore": w.RawScore != nil}
	for k := range keys {
		if !want[k] {
			return fmt.Sprintf("stored %v has key %q, want %s", d, k, w)
		}
	}
	for k, need := range want {
		if _, ok := keys[k]; need && !ok {
			return fmt.Sprintf("stored %v lacks key %q, want %s", d, k, w)
		}
	}
	if n, ok := whole(keys["score"]); !ok || n != w.Score {
		return fmt.Sprintf("stored %v, want %s (score)", d, w)
	}
	if w.ProblemStatus == nil {
		if keys["problemStatus"] != nil {
			return fmt.Sprintf("stored %v, want %s (problemStatus)", d, w)
		}
	} else if n, ok := whole(keys["problemStatus"]); !ok || n != *w.ProblemStatus {
		return fmt.Sprintf("stored %v, want %s (problemStatus)", d, w)
	}
	if w.RawScore != nil {
		if n, ok := whole(keys["rawScore"]); !ok || n != *w.RawScore {
			return fmt.Sprintf("stored %v, want %s (rawScore)", d, w)
		}
	}
	arr, ok := keys["submissionIds"].(bson.A)
	if !ok || len(arr) != len(w.SubmissionIDs) {
		return fmt.Sprintf("stored %v, want %s (submissionIds)", d, w)
	}
	for i, x := range arr {
		if s, ok := x.(string); !ok || s != w.SubmissionIDs[i] {
			return fmt.Sprintf("stored %v, want %s (submissionIds)", d, w)
		}
	}
	return ""
}

// String renders an entry as Back-End's document would read.
func (e Entry) String() string {
	ps := "null"
	if e.ProblemStatus != nil {
		ps = fmt.Sprint(*e.ProblemStatus)
	}
	raw := ""
	if e.RawScore != nil {
		raw = fmt.Sprintf(" rawScore:%d", *e.RawScore)
	}
	return fmt.Sprintf("{score:%d problemStatus:%s submissionIds:%v%s}", e.Score, ps, e.SubmissionIDs, raw)
}
