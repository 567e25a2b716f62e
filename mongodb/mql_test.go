package mongodb

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestMQLAgainstMingo runs every pipeline, filter and update the adapter
// sends, built by the production builders, over generated documents
// shaped as MongoDB 4.4-8.0 store and emit them, with this package's
// evaluator and with mingo (tools/mql/harness.js, an independent
// implementation of the query language), and fails on any value that
// differs, field by field. Numbers compare by value, and by type too in
// what an update leaves (mingo has one number type; the harness keeps
// the types an update writes and its inputs had). `make test-mql`
// runs it (MATERIALIZER_TEST_MQL=1, after npm ci in tools/mql).
func TestMQLAgainstMingo(t *testing.T) {
	skipWithoutMingo(t)
	harness, err := filepath.Abs(filepath.Join("..", "tools", "mql", "harness.js"))
	if err != nil {
		t.Fatal(err)
	}
	cases := mqlCases(t)
	// MATERIALIZER_TEST_MQL_NATIVE=\$min,compare runs mingo's own operators
	// for those replacements (tools/mql/harness.js): what each changes.
	if v := os.Getenv("MATERIALIZER_TEST_MQL_NATIVE"); v != "" {
		for i := range cases {
			cases[i].native = strings.Split(v, ",")
		}
	}
	// MATERIALIZER_TEST_MQL_DIR keeps the cases and mingo's results there
	// (node tools/mql/harness.js cases.jsonl out.jsonl reruns them).
	dir := os.Getenv("MATERIALIZER_TEST_MQL_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	in, out := filepath.Join(dir, "cases.jsonl"), filepath.Join(dir, "results.jsonl")
	var buf bytes.Buffer
	ours := make([]mqlResult, len(cases))
	builders := map[string]bool{}
	for i, c := range cases {
		builders[c.builder] = true
		ours[i] = c.runOurs()
		line, err := bson.MarshalExtJSON(c.doc(), true, false)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(in, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", harness, in, out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node %s: %v\n%s", harness, err, msg)
	}
	theirs := readMingoResults(t, out)
	if len(theirs) != len(cases) {
		t.Fatalf("mingo returned %d results for %d cases", len(theirs), len(cases))
	}
	diffs := 0
	for i, c := range cases {
		if d := c.compare(ours[i], theirs[i]); len(d) > 0 {
			diffs++
			t.Errorf("%s (%s): our evaluator and mingo differ:\n  %s\ninput: %s", c.name, c.builder, strings.Join(d, "\n  "), mqlInput(c))
		}
	}
	fmt.Printf("mql: %d pipelines, %d cases, %d differences\n", len(builders), len(cases), diffs)
}

// mqlCase is one statement over one collection's documents: an aggregate
// (pipeline over docs, colls for $unionWith), a find (filter and
// projection) or an updateOne (filter, update, upsert, the server's now).
type mqlCase struct {
	name    string
	builder string // the production builder, e.g. "watch.Pipeline"
	kind    string // aggregate, find, update
	docs    []bson.D
	colls   map[string][]bson.D
	stages  bson.A
	filter  bson.D
	proj    bson.D
	sort    bson.D // a find's
	update  any
	upsert  bool
	now     time.Time
	// native names the harness's replacements of mingo operators to
	// turn off (mql_probe_test.go).
	native []string
	// computedNumbers: the update writes a number an operator computes
	// ($add), which mingo types by value: compared by value only.
	computedNumbers bool
	// unordered: the server does not define the order of the results
	// ($group's output): both sides are sorted before the comparison.
	unordered bool
}

// mqlResult is what a statement returned or left: the documents (the
// aggregate's or find's results, the collection after an update), the
// matched count and a duplicate key of an upsert, or the error.
type mqlResult struct {
	docs    []bson.D
	matched int
	dupKey  bool
	err     string
}

// doc is the case as the harness reads it.
func (c *mqlCase) doc() bson.D {
	docs := bson.A{}
	for _, d := range c.docs {
		docs = append(docs, d)
	}
	d := bson.D{{Key: "name", Value: c.name}, {Key: "kind", Value: c.kind}, {Key: "docs", Value: docs}}
	if c.colls != nil {
		colls := bson.D{}
		for _, name := range sortedKeys(c.colls) {
			a := bson.A{}
			for _, x := range c.colls[name] {
				a = append(a, x)
			}
			colls = append(colls, bson.E{Key: name, Value: a})
		}
		d = append(d, bson.E{Key: "colls", Value: colls})
	}
	if c.stages != nil {
		d = append(d, bson.E{Key: "pipeline", Value: c.stages})
	}
	if c.filter != nil {
		d = append(d, bson.E{Key: "filter", Value: c.filter})
	}
	if c.proj != nil {
		d = append(d, bson.E{Key: "projection", Value: c.proj})
	}
	if c.sort != nil {
		d = append(d, bson.E{Key: "sort", Value: c.sort})
	}
	if c.update != nil {
		d = append(d, bson.E{Key: "update", Value: c.update}, bson.E{Key: "upsert", Value: c.upsert},
			bson.E{Key: "now", Value: bson.NewDateTimeFromTime(c.now)})
	}
	if c.native != nil {
		d = append(d, bson.E{Key: "native", Value: c.native})
	}
	return norm(d).(bson.D)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// runOurs runs the case with the evaluator; a panic (the evaluator's
// "the server refuses this") is the error.
func (c *mqlCase) runOurs() (res mqlResult) {
	defer func() {
		if r := recover(); r != nil {
			res = mqlResult{err: fmt.Sprint(r)}
		}
	}()
	docs := make([]bson.D, len(c.docs))
	for i, d := range c.docs {
		docs[i] = norm(d).(bson.D)
	}
	switch c.kind {
	case "aggregate":
		colls := map[string][]bson.D{}
		for name, ds := range c.colls {
			for _, d := range ds {
				colls[name] = append(colls[name], norm(d).(bson.D))
			}
		}
		return mqlResult{docs: runPipelineIn(colls, docs, norm(c.stages).(bson.A))}
	case "find":
		stages := bson.A{bson.D{{Key: "$match", Value: c.filter}}}
		if c.sort != nil {
			stages = append(stages, bson.D{{Key: "$sort", Value: c.sort}})
		}
		if c.proj != nil {
			stages = append(stages, bson.D{{Key: "$project", Value: c.proj}})
		}
		return mqlResult{docs: runPipeline(docs, norm(stages).(bson.A))}
	case "update":
		coll := &collection{docs: docs, now: c.now}
		matched, dup := coll.updateOne(c.filter, c.update, c.upsert)
		return mqlResult{docs: coll.docs, matched: matched, dupKey: dup}
	}
	panic("unknown kind " + c.kind)
}

func readMingoResults(t *testing.T, path string) []mqlResult {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mqlResult
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		r, err := parseMingoResult(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseMingoResult decodes one line of the harness's output.
func parseMingoResult(line []byte) (mqlResult, error) {
	var d bson.D
	if err := bson.UnmarshalExtJSON(line, true, &d); err != nil {
		return mqlResult{}, fmt.Errorf("mingo result %.200s: %w", line, err)
	}
	var r mqlResult
	if e, ok := lookupD(d, "error").(string); ok {
		r.err = e
	}
	if docs, ok := lookupD(d, "docs").(bson.A); ok {
		r.docs = []bson.D{}
		for _, x := range docs {
			r.docs = append(r.docs, x.(bson.D))
		}
	}
	if n, ok := number(lookupD(d, "matched")); ok {
		r.matched = int(n)
	}
	r.dupKey, _ = lookupD(d, "dupKey").(bool)
	return r, nil
}

// compare returns the differences between our result and mingo's.
func (c *mqlCase) compare(ours, theirs mqlResult) []string {
	if ours.err != "" || theirs.err != "" {
		if ours.err != "" && theirs.err != "" {
			return nil // both refuse the statement
		}
		return []string{fmt.Sprintf("error: ours %q, mingo %q", ours.err, theirs.err)}
	}
	var out []string
	if ours.matched != theirs.matched || ours.dupKey != theirs.dupKey {
		out = append(out, fmt.Sprintf("matched %d dupKey %v, mingo matched %d dupKey %v", ours.matched, ours.dupKey, theirs.matched, theirs.dupKey))
	}
	a, b := c.prepare(ours.docs), c.prepare(theirs.docs)
	if len(a) != len(b) {
		return append(out, fmt.Sprintf("%d documents, mingo %d:\n  ours  %v\n  mingo %v", len(a), len(b), a, b))
	}
	for i := range a {
		mqlDiff(fmt.Sprintf("[%d]", i), a[i], b[i], &out)
		if c.kind == "update" && !c.computedNumbers && len(out) == 0 {
			mqlTypeDiff(fmt.Sprintf("[%d]", i), a[i], b[i], &out)
		}
	}
	return out
}

// mqlTypeDiff appends the values of equal documents whose BSON types
// differ: an update's result, whose written values the harness keeps
// typed and whose others it gives their input's type, so what a write
// stores is compared type and all.
func mqlTypeDiff(path string, a, b any, out *[]string) {
	switch x := a.(type) {
	case bson.D:
		for _, e := range x {
			mqlTypeDiff(path+"."+e.Key, e.Value, lookupD(b.(bson.D), e.Key), out)
		}
	case bson.A:
		for i := range x {
			mqlTypeDiff(fmt.Sprintf("%s[%d]", path, i), x[i], b.(bson.A)[i], out)
		}
	default:
		if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
			*out = append(*out, fmt.Sprintf("%s: ours %s (%T), mingo %s (%T)", path, show(a), a, show(b), b))
		}
	}
}

func (c *mqlCase) prepare(docs []bson.D) []bson.D {
	out := append([]bson.D(nil), docs...)
	if c.unordered {
		sort.SliceStable(out, func(i, j int) bool { return canonValue(out[i]) < canonValue(out[j]) })
	}
	return out
}

// canonValue renders v with numbers by value (5, NumberLong(5) and 5.0
// alike), symbols as strings and fields sorted by name: a sort key equal
// for values the comparison deems equal.
func canonValue(v any) string {
	if n, ok := number(v); ok {
		return "n" + strconv.FormatFloat(n, 'g', -1, 64)
	}
	if s, ok := stringOf(v); ok {
		return "s" + strconv.Quote(s)
	}
	switch x := v.(type) {
	case bson.D:
		keys := make([]string, len(x))
		for i, e := range x {
			keys[i] = strconv.Quote(e.Key) + ":" + canonValue(e.Value)
		}
		sort.Strings(keys)
		return "{" + strings.Join(keys, ",") + "}"
	case bson.A:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = canonValue(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// mqlDiff appends the differences between a (ours) and b (mingo's) at
// path: documents field by field by name (mingo's JavaScript objects do
// not keep the order of integer-like keys), arrays element by element,
// numbers by value, a symbol as its string.
func mqlDiff(path string, a, b any, out *[]string) {
	da, aDoc := a.(bson.D)
	db, bDoc := b.(bson.D)
	if aDoc && bDoc {
		for _, e := range da {
			if v := lookupD(db, e.Key); v == missing {
				*out = append(*out, fmt.Sprintf("%s.%s: ours %s, mingo missing", path, e.Key, show(e.Value)))
			} else {
				mqlDiff(path+"."+e.Key, e.Value, v, out)
			}
		}
		for _, e := range db {
			if lookupD(da, e.Key) == missing {
				*out = append(*out, fmt.Sprintf("%s.%s: ours missing, mingo %s", path, e.Key, show(e.Value)))
			}
		}
		return
	}
	aa, aArr := a.(bson.A)
	ba, bArr := b.(bson.A)
	if aArr && bArr {
		if len(aa) != len(ba) {
			*out = append(*out, fmt.Sprintf("%s: ours %s, mingo %s", path, show(a), show(b)))
			return
		}
		for i := range aa {
			mqlDiff(fmt.Sprintf("%s[%d]", path, i), aa[i], ba[i], out)
		}
		return
	}
	if aDoc || bDoc || aArr || bArr || !equal(a, b) {
		*out = append(*out, fmt.Sprintf("%s: ours %s, mingo %s", path, show(a), show(b)))
	}
}

func show(v any) string {
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, true, false)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), `{"v":`), "}")
}

// mqlInput renders a case's statement and documents for a failure.
func mqlInput(c mqlCase) string {
	b, err := bson.MarshalExtJSON(c.doc(), true, false)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		return string(b[:4000]) + "..."
	}
	return string(b)
}
