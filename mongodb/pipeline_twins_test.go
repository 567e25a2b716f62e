package mongodb

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/internal/memstore"
	"github.com/normal-oj/noj-materializer/internal/storecost"
	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// twinNames are field names of the random documents: usernames and
// problem keys as Back-End may hold them ('$' first, unicode, empty,
// digits, spaces, a derived field's name). None holds a '.': updatedFields
// cannot tell such a key from a path below it, and memstore reads the
// value of a dotted path by walking it.
var twinNames = []string{"alice", "bob", "$x", "$", "$$REMOVE", "é", "學生", "", "7", "12", "a b",
	materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs, materialize.FieldStudentStatus}

func twinValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(9); {
	case n == 0:
		return nil
	case n == 1:
		return r.IntN(2) == 0
	case n == 2:
		return int32(r.IntN(200))
	case n == 3:
		return int64(r.IntN(200))
	case n == 4:
		return twinNames[r.IntN(len(twinNames))]
	case n == 5 && depth < 3:
		a := bson.A{}
		for range r.IntN(3) {
			a = append(a, twinValue(r, depth+1))
		}
		return a
	case depth < 3:
		return twinDoc(r, depth+1, r.IntN(4))
	}
	return 1.5
}

func twinDoc(r *rand.Rand, depth, n int) bson.D {
	d := bson.D{}
	for range n {
		k := twinNames[r.IntN(len(twinNames))]
		if lookupD(d, k) != missing {
			continue
		}
		d = append(d, bson.E{Key: k, Value: twinValue(r, depth)})
	}
	return d
}

// twinDocument is a random document of coll with _id id: the fields key
// extraction and the echo test read, in Back-End's order, beside others.
func twinDocument(r *rand.Rand, coll string, id any) bson.D {
	d := bson.D{{Key: "_id", Value: id}}
	switch coll {
	case materialize.CollSubmission:
		half := func(good any) any {
			switch r.IntN(4) {
			case 0:
				return missing
			case 1:
				return twinValue(r, 2)
			}
			return good
		}
		if v := half(twinNames[r.IntN(len(twinNames))]); v != missing {
			d = append(d, bson.E{Key: "user", Value: v})
		}
		if v := half(int32(r.IntN(20))); v != missing {
			d = append(d, bson.E{Key: "problem", Value: v})
		}
		d = append(d, bson.E{Key: "status", Value: int32(r.IntN(3))}, bson.E{Key: "tasks", Value: bson.A{twinDoc(r, 1, 2)}})
	case materialize.CollUser:
		d = append(d, bson.E{Key: materialize.FieldSubmission, Value: int32(r.IntN(9))},
			bson.E{Key: materialize.FieldACSubmission, Value: int32(r.IntN(9))},
			bson.E{Key: materialize.FieldACProblemIDs, Value: bson.A{int32(r.IntN(9))}},
			bson.E{Key: "profile", Value: twinDoc(r, 1, 2)})
	case materialize.CollHomework:
		ss := bson.D{}
		for _, u := range twinDoc(r, 2, 1+r.IntN(4)) {
			entries := bson.D{}
			for range 1 + r.IntN(3) {
				k := twinNames[r.IntN(len(twinNames))]
				if lookupD(entries, k) == missing {
					entries = append(entries, bson.E{Key: k, Value: materialize.StartEntry().Doc()})
				}
			}
			if r.IntN(5) == 0 {
				ss = append(ss, bson.E{Key: u.Key, Value: u.Value}) // not an entries' document
			} else {
				ss = append(ss, bson.E{Key: u.Key, Value: entries})
			}
		}
		d = append(d, bson.E{Key: "name", Value: "hw"}, bson.E{Key: materialize.FieldStudentStatus, Value: ss})
	default:
		d = append(d, bson.E{Key: "homeworks", Value: bson.A{bson.NewObjectID()}})
	}
	for _, e := range twinDoc(r, 1, r.IntN(3)) {
		if lookupD(d, e.Key) == missing {
			d = append(d, e)
		}
	}
	return d
}

// twinPaths lists the dotted paths of every field of v, documents and
// arrays walked (as updatedFields names them: an array's element by index).
func twinPaths(prefix string, v any, out []string) []string {
	return twinPathsBelow(prefix, true, v, out)
}

func twinPathsBelow(prefix string, root bool, v any, out []string) []string {
	join := func(k string) string {
		if root {
			return k
		}
		return prefix + "." + k
	}
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if root && e.Key == "_id" {
				continue
			}
			p := join(e.Key)
			out = twinPathsBelow(p, false, e.Value, append(out, p))
		}
	case bson.A:
		for i, e := range x {
			p := join(strconv.Itoa(i))
			out = twinPathsBelow(p, false, e, append(out, p))
		}
	}
	return out
}

// twinUpdate picks an update's updatedFields (paths of doc, none below
// another) and removedFields (paths doc does not hold).
func twinUpdate(r *rand.Rand, doc bson.D) (updated bson.D, removed []string) {
	paths := twinPaths("", doc, nil)
	r.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	var chosen []string
	for _, p := range paths[:r.IntN(min(len(paths), 6)+1)] {
		below := func(a, b string) bool { return strings.HasPrefix(a, b+".") }
		if slices.ContainsFunc(chosen, func(c string) bool { return below(p, c) || below(c, p) }) {
			continue
		}
		chosen = append(chosen, p)
	}
	// Paths the update removed: a user or problem it unset, or another.
	for _, p := range []string{"user", "problem", materialize.FieldACSubmission, "studentStatus.ghost.1", "gone"} {
		if r.IntN(5) == 0 && lookupPath(doc, p) == missing && !slices.Contains(chosen, p) {
			removed = append(removed, p)
		}
	}
	for _, p := range chosen {
		updated = append(updated, bson.E{Key: p, Value: lookupPath(doc, p)})
	}
	return updated, removed
}

// twinSmallFields adds n fields of small values to doc: an update setting
// them all has names larger than its updateDescription.
func twinSmallFields(r *rand.Rand, doc bson.D, n int) bson.D {
	for i := range n {
		doc = append(doc, bson.E{Key: fmt.Sprintf("n%03d", i), Value: []any{nil, true, int32(1)}[r.IntN(3)]})
	}
	return doc
}

func lookupPath(v any, path string) any {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case bson.D:
			v = lookupD(x, p)
		case bson.A:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return missing
			}
			v = x[i]
		default:
			return missing
		}
	}
	return v
}

// TestPipelineTwins: for random writes of random documents (field names
// with '$', unicode, empty; users and problems of every BSON type), the
// change event memstore emits is, field by field and byte for byte, what
// watch.Pipeline makes of the server's event for the same write (run
// here by the package's evaluator): operationType, ns, documentKey,
// fullDocument, moved, changedFields, derivedValues (the
// watch.MaxDerivedValues cap; watch.DerivedPath against derivedPathExpr);
// both decode to the same Event; and storecost.EventSize is the projected
// event's size. TWINS_N sets the number of writes.
func TestPipelineTwins(t *testing.T) {
	n := 1000
	if s := os.Getenv("TWINS_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("TWINS_N: %v", err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	pipeline := norm(watch.Pipeline()).(bson.A)
	st := memstore.New()
	idOf := func(coll string) any {
		switch coll {
		case materialize.CollUser:
			return fmt.Sprintf("u%d", r.IntN(1000))
		case materialize.CollProblem:
			return int32(r.IntN(1000))
		}
		return bson.NewObjectID()
	}
	// EventSize counts a token of a fixed size: the difference between it
	// and the projected event without its _id is the same for every event.
	tokenSize := -1
	colls := []string{materialize.CollSubmission, materialize.CollUser, materialize.CollHomework, materialize.CollProblem}
	for i := range n {
		coll := colls[r.IntN(len(colls))]
		id := idOf(coll)
		before := twinDocument(r, coll, id)
		if err := st.Insert(coll, rawOf(before)); err != nil {
			continue // the same _id drawn twice
		}
		after := twinDocument(r, coll, id)
		var server bson.D
		switch op := r.IntN(4); op {
		case 0:
			server = changeEvent("insert", coll, key(id), bson.E{Key: "fullDocument", Value: before})
		case 1:
			if err := st.Replace(coll, rawOf(after)); err != nil {
				t.Fatal(err)
			}
			server = changeEvent("replace", coll, key(id), bson.E{Key: "fullDocument", Value: after})
		case 2:
			if err := st.Delete(coll, id); err != nil {
				t.Fatal(err)
			}
			server = changeEvent("delete", coll, key(id))
		default:
			small := r.IntN(4) == 0
			if small {
				// Names around watch.MaxNamesExcess bytes larger than
				// the updateDescription: shipped or not.
				after = twinSmallFields(r, after, 20+r.IntN(40))
			}
			updated, removed := twinUpdate(r, after)
			if small {
				updated = nil
				for _, e := range after {
					if strings.HasPrefix(e.Key, "n") && len(e.Key) == 4 {
						updated = append(updated, e)
					}
				}
			}
			var fields []string
			for _, e := range updated {
				fields = append(fields, e.Key)
			}
			fields = append(fields, removed...)
			if err := st.Update(coll, rawOf(after), fields); err != nil {
				t.Fatal(err)
			}
			rm := bson.A{}
			for _, p := range removed {
				rm = append(rm, p)
			}
			server = changeEvent("update", coll, key(id), update(updated, rm, bson.A{}))
		}
		evs := st.RawEvents()
		twin := evs[len(evs)-1]
		out := runPipeline([]bson.D{norm(server).(bson.D)}, pipeline)
		if len(out) == 0 && coll == materialize.CollUser && lookupD(server, "operationType") == "delete" {
			continue // the stream filters it; memstore's stream delivers it, and the engine ignores it
		}
		if len(out) != 1 {
			t.Fatalf("write %d: the pipeline kept %d events of %v", i, len(out), server)
		}
		projected := rawOf(out[0])
		name := fmt.Sprintf("write %d, %s of %s", i, lookupD(server, "operationType"), coll)
		compareTwins(t, name, projected, twin)

		pev, perr := watch.DecodeEvent(projected)
		tev, terr := watch.DecodeEvent(twin)
		if (perr == nil) != (terr == nil) || !reflect.DeepEqual(pev.Change, tev.Change) || !sameValues(pev.Values, tev.Values) {
			t.Errorf("%s: decoded\n pipeline %+v %v (%v)\n memstore %+v %v (%v)", name, pev.Change, pev.Values, perr, tev.Change, tev.Values, terr)
		}
		if perr != nil {
			continue
		}
		if undecodableHalf(projected) {
			continue // its value is not in the Event: EventSize cannot count it
		}
		idElem, err := projected.LookupErr("_id")
		if err != nil {
			t.Fatal(err)
		}
		d := int(storecost.EventSize(pev)) - (len(projected) - (1 + len("_id\x00") + len(idElem.Value)))
		if tokenSize < 0 {
			tokenSize = d
		} else if d != tokenSize {
			t.Errorf("%s: storecost.EventSize is %d bytes off the projected event's size (%d bytes) %v", name, d-tokenSize, len(projected), docOf(projected))
		}
	}
}

// compareTwins reports every top-level field but _id and clusterTime on
// which the projected event and memstore's differ, type and bytes.
func compareTwins(t *testing.T, name string, projected, twin bson.Raw) {
	t.Helper()
	keys := func(r bson.Raw) []string {
		els, err := r.Elements()
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, e := range els {
			if k := e.Key(); k != "_id" && k != "clusterTime" {
				ks = append(ks, k)
			}
		}
		slices.Sort(ks)
		return ks
	}
	pk, tk := keys(projected), keys(twin)
	if !slices.Equal(pk, tk) {
		t.Errorf("%s: fields %q, memstore's %q\n pipeline %v\n memstore %v", name, pk, tk, docOf(projected), docOf(twin))
		return
	}
	for _, k := range pk {
		p, m := projected.Lookup(k), twin.Lookup(k)
		if k == "fullDocument" || k == "moved" {
			// Of a document, the order of user and problem is the
			// document's (fullDocument) or the pipeline's bson.M's
			// (moved, a Go map: any order); DecodeEvent looks them up.
			p, m = sortedDoc(t, p), sortedDoc(t, m)
		}
		if p.Type != m.Type || !bytes.Equal(p.Value, m.Value) {
			t.Errorf("%s: %s is %v, memstore's %v", name, k, p, m)
		}
	}
}

func sameValues(a, b []watch.PathValue) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Path != b[i].Path || a[i].Value.Type != b[i].Value.Type || !bytes.Equal(a[i].Value.Value, b[i].Value.Value) {
			return false
		}
	}
	return true
}

// sortedDoc is v with its elements sorted by key when v is a document.
func sortedDoc(t *testing.T, v bson.RawValue) bson.RawValue {
	t.Helper()
	d, ok := v.DocumentOK()
	if !ok {
		return v
	}
	var e bson.D
	if err := bson.Unmarshal(d, &e); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(e, func(a, b bson.E) int { return strings.Compare(a.Key, b.Key) })
	tp, data, err := bson.MarshalValue(e)
	if err != nil {
		t.Fatal(err)
	}
	return bson.RawValue{Type: tp, Value: data}
}

// undecodableHalf reports whether the event's fullDocument or moved holds
// a user or problem that does not decode (a string user, an integral
// problem, int32 as Back-End writes it).
func undecodableHalf(ev bson.Raw) bool {
	for _, f := range []string{"fullDocument", "moved"} {
		if v, err := ev.LookupErr(f, "user"); err == nil && v.Type != bson.TypeString {
			return true
		}
		if v, err := ev.LookupErr(f, "problem"); err == nil && v.Type != bson.TypeInt32 {
			return true
		}
	}
	return false
}
