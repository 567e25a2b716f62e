package materialize_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// fuzzSourceSeeds are the corpus documents (all but the huge ones) and the
// source documents of the derive vectors.
func fuzzSourceSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, c := range badinputCorpus() {
		if len(c.doc) < 64<<10 {
			out = append(out, c.doc)
		}
	}
	vs, err := mtest.ReadVectors(filepath.Join("testdata", "derive.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, v := range vs {
		for _, set := range [][]bson.Raw{v.DB.Submissions, v.DB.Homeworks, v.DB.Problems, v.DB.Users, v.ExpectHWs, v.ExpectUsers} {
			for _, d := range set {
				if !seen[string(d)] && len(out) < 400 {
					seen[string(d)] = true
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// FuzzDecodeSource: arbitrary bytes that form valid BSON never make a
// decoder or a patch panic; decode errors are *DecodeError naming the
// collection, _id and field; a decoded value holds what the document
// holds; PatchHomework never adds, removes or reorders a key and changes
// only the entries it names; PatchUser sets exactly the derived fields.
func FuzzDecodeSource(f *testing.F) {
	for _, s := range fuzzSourceSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !mtest.DeepValidBSON(data) {
			return
		}
		raw := bson.Raw(data)
		fuzzCheckDecoders(t, raw)
		materialize.DecodeUserStats(raw)
		materialize.DecodeEntry(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
		if elems, err := raw.Elements(); err == nil {
			for _, e := range elems {
				materialize.DecodeEntry(e.Value())
			}
		}
		fuzzCheckPatchUser(t, raw)
		fuzzCheckPatchHomework(t, raw)
	})
}

func fuzzCheckDecoders(t *testing.T, raw bson.Raw) {
	check := func(coll string, err error) {
		t.Helper()
		if err == nil {
			return
		}
		var de *materialize.DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("Decode %s: error %T %v is not a *DecodeError", coll, err, err)
		}
		if de.Collection != coll || de.Field == "" || de.ID == "" || de.Reason == "" || !errors.Is(err, materialize.ErrMalformed) {
			t.Fatalf("Decode %s: incomplete DecodeError %+v", coll, de)
		}
	}
	s, err := materialize.DecodeSubmission(raw)
	check("submission", err)
	if err == nil {
		// No silent zero: what was decoded is what the document holds.
		if u, ok := raw.Lookup("user").StringValueOK(); !ok || u != s.User {
			t.Fatalf("DecodeSubmission: user %q, document holds %v", s.User, raw.Lookup("user"))
		}
		if ts, ok := raw.Lookup("timestamp").DateTimeOK(); !ok || ts != s.Timestamp {
			t.Fatalf("DecodeSubmission: timestamp %d, document holds %v", s.Timestamp, raw.Lookup("timestamp"))
		}
		if p, ok := raw.Lookup("problem").AsFloat64OK(); !ok || p != float64(s.Problem) {
			t.Fatalf("DecodeSubmission: problem %d, document holds %v", s.Problem, raw.Lookup("problem"))
		}
		if id, ok := raw.Lookup("_id").ObjectIDOK(); !ok || id != s.ID {
			t.Fatalf("DecodeSubmission: _id %v, document holds %v", s.ID, raw.Lookup("_id"))
		}
	}
	h, err := materialize.DecodeHomework(raw)
	check("homework", err)
	if err == nil {
		for _, sk := range h.Skipped {
			if sk.Collection != "homework" || sk.Field == "" || sk.ID == "" {
				t.Fatalf("DecodeHomework: incomplete Skipped %+v", sk)
			}
		}
		if p, ok := raw.Lookup("penalty").StringValueOK(); ok && p != h.Penalty {
			t.Fatalf("DecodeHomework: penalty %q, document holds %q", h.Penalty, p)
		}
	}
	p, err := materialize.DecodeProblem(raw)
	check("problem", err)
	if err == nil {
		if id, ok := raw.Lookup("_id").AsFloat64OK(); !ok || id != float64(p.ID) {
			t.Fatalf("DecodeProblem: _id %d, document holds %v", p.ID, raw.Lookup("_id"))
		}
	}
	u, err := materialize.DecodeUserID(raw)
	check("user", err)
	if err == nil {
		if id, ok := raw.Lookup("_id").StringValueOK(); !ok || id != u {
			t.Fatalf("DecodeUserID: %q, document holds %v", u, raw.Lookup("_id"))
		}
	}
}

func fuzzCheckPatchUser(t *testing.T, raw bson.Raw) {
	st := materialize.UserStats{Submission: int64(len(raw)), ACSubmission: 3, ACProblemIDs: []int64{7, -1, 1 << 40}}
	out, err := materialize.PatchUser(raw, st)
	if err != nil {
		t.Fatalf("PatchUser of valid BSON: %v", err)
	}
	if !mtest.DeepValidBSON(out) {
		t.Fatalf("PatchUser produced invalid BSON")
	}
	got, ok := materialize.DecodeUserStats(out)
	if !ok || !got.Equal(st) {
		t.Fatalf("PatchUser: stored %+v (ok %v), want %+v", got, ok, st)
	}
	// Every other element is kept, in order, byte for byte.
	derived := map[string]bool{materialize.FieldSubmission: true, materialize.FieldACSubmission: true, materialize.FieldACProblemIDs: true}
	var before, after [][]byte
	oe, _ := raw.Elements()
	pe, _ := out.Elements()
	for _, e := range oe {
		if !derived[e.Key()] {
			before = append(before, e)
		}
	}
	for _, e := range pe {
		if !derived[e.Key()] {
			after = append(after, e)
		}
	}
	if len(before) != len(after) {
		t.Fatalf("PatchUser: %d other elements became %d", len(before), len(after))
	}
	for i := range before {
		if !bytes.Equal(before[i], after[i]) {
			t.Fatalf("PatchUser changed element %d", i)
		}
	}
}

// fuzzWant is the entry PatchHomework is asked to write, varied by input.
func fuzzWant(raw bson.Raw, user, pk string) materialize.Entry {
	n := int64(len(raw)+len(user)+3*len(pk)) % 7
	e := materialize.Entry{Score: n * 10, SubmissionIDs: []string{}}
	if n%2 == 0 {
		e.HasStatus, e.ProblemStatus = true, n-3
	}
	if n%3 != 0 {
		e.HasRaw, e.RawScore = true, n*20
		e.SubmissionIDs = append(e.SubmissionIDs, fmt.Sprintf("%024x", n))
	}
	if n == 6 {
		return materialize.StartEntry()
	}
	return e
}

func fuzzCheckPatchHomework(t *testing.T, raw bson.Raw) {
	// Ask for every existing entry, half of them, plus ones that do not exist.
	entries := map[string]map[string]materialize.Entry{"\x00none": {"1": materialize.StartEntry()}}
	elems, _ := raw.Elements()
	for _, e := range elems {
		if e.Key() != materialize.FieldStudentStatus {
			continue
		}
		ss, ok := e.Value().DocumentOK()
		if !ok {
			continue
		}
		users, _ := ss.Elements()
		for i, ue := range users {
			m := entries[ue.Key()]
			if m == nil {
				m = map[string]materialize.Entry{"404": materialize.StartEntry()}
				entries[ue.Key()] = m
			}
			if ud, ok := ue.Value().DocumentOK(); ok {
				probs, _ := ud.Elements()
				for j, pe := range probs {
					if (i+j)%2 == 0 || len(probs) < 3 {
						m[pe.Key()] = fuzzWant(raw, ue.Key(), pe.Key())
					}
				}
			}
		}
	}
	out, changed, err := materialize.PatchHomework(raw, entries)
	if err != nil {
		t.Fatalf("PatchHomework of valid BSON: %v", err)
	}
	if !mtest.DeepValidBSON(out) {
		t.Fatalf("PatchHomework produced invalid BSON")
	}
	// Walk both documents in lockstep: same keys in the same order at the
	// top level, in studentStatus and in each user's document; only named
	// entries differ, and those hold the derived value.
	pe, _ := out.Elements()
	if len(pe) != len(elems) {
		t.Fatalf("PatchHomework: %d top-level elements became %d", len(elems), len(pe))
	}
	wantChanged := false
	for i := range elems {
		o, p := elems[i], pe[i]
		if o.Key() != p.Key() {
			t.Fatalf("PatchHomework: key %q became %q", o.Key(), p.Key())
		}
		oss, isDoc := o.Value().DocumentOK()
		if o.Key() != materialize.FieldStudentStatus || !isDoc {
			if !bytes.Equal(o, p) {
				t.Fatalf("PatchHomework changed element %q", o.Key())
			}
			continue
		}
		pss, ok := p.Value().DocumentOK()
		if !ok {
			t.Fatalf("PatchHomework: studentStatus is no longer a document")
		}
		ou, _ := oss.Elements()
		pu, _ := pss.Elements()
		if len(ou) != len(pu) {
			t.Fatalf("PatchHomework: %d users became %d", len(ou), len(pu))
		}
		for j := range ou {
			if ou[j].Key() != pu[j].Key() {
				t.Fatalf("PatchHomework: user %q became %q", ou[j].Key(), pu[j].Key())
			}
			oud, isDoc := ou[j].Value().DocumentOK()
			want, named := entries[ou[j].Key()]
			if !isDoc || !named {
				if !bytes.Equal(ou[j], pu[j]) {
					t.Fatalf("PatchHomework changed studentStatus[%q] it was not asked to", ou[j].Key())
				}
				continue
			}
			pud, ok := pu[j].Value().DocumentOK()
			if !ok {
				t.Fatalf("PatchHomework: studentStatus[%q] is no longer a document", ou[j].Key())
			}
			op, _ := oud.Elements()
			pp, _ := pud.Elements()
			if len(op) != len(pp) {
				t.Fatalf("PatchHomework: studentStatus[%q]: %d entries became %d", ou[j].Key(), len(op), len(pp))
			}
			for k := range op {
				if op[k].Key() != pp[k].Key() {
					t.Fatalf("PatchHomework: entry %q.%q became %q", ou[j].Key(), op[k].Key(), pp[k].Key())
				}
				w, ok := want[op[k].Key()]
				if !ok {
					if !bytes.Equal(op[k], pp[k]) {
						t.Fatalf("PatchHomework changed entry %q.%q it was not asked to", ou[j].Key(), op[k].Key())
					}
					continue
				}
				if !w.MatchesStored(op[k].Value()) {
					wantChanged = true
				}
				got, ok := materialize.DecodeEntry(pp[k].Value())
				if !ok || !got.Equal(w) {
					t.Fatalf("PatchHomework: entry %q.%q = %v, want %+v", ou[j].Key(), op[k].Key(), pp[k].Value(), w)
				}
			}
		}
	}
	if changed != wantChanged {
		t.Fatalf("PatchHomework: changed = %v, want %v", changed, wantChanged)
	}
}
