package mongodb

// A small evaluator of the MongoDB query, aggregation-expression and update
// subset this package sends, so that unit tests can check what the
// builders' filters, pipelines and updates DO to documents without a
// server. It follows the server's documented semantics for the operators
// it knows ($cond, $eq, $gt, $type, $objectToArray, $arrayToObject, $map,
// $filter, $in, $size, $and, $or, $ifNull, $add, $literal, $concatArrays,
// $split, $arrayElemAt, the variables $$REMOVE and $$ROOT; query $or, $expr,
// $exists, $lte, $in, $type; update $set with dotted paths, $addToSet with
// $each, pipeline $set/$project/$match/$group/$sort/$replaceWith, and
// $unionWith over a map of collections) and fails loudly on anything else.
// It is a test oracle, not an emulator: the integration tests run the
// same builders against a real server, and make test-mql runs them with
// mingo, an independent implementation (mql_test.go).

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

type missingT struct{}

// missing is the value of an absent field.
var missing = missingT{}

// norm converts any Go value to the generic shape the evaluator uses
// (bson.D, bson.A, int32, int64, float64, string, bool, nil, and BSON
// primitive types) by a BSON round trip.
func norm(v any) any {
	b, err := bson.Marshal(bson.D{{Key: "v", Value: v}})
	if err != nil {
		panic(fmt.Sprintf("norm: %v", err))
	}
	var d bson.D
	if err := bson.Unmarshal(b, &d); err != nil {
		panic(fmt.Sprintf("norm: %v", err))
	}
	return d[0].Value
}

// docOf decodes raw into a bson.D.
func docOf(raw bson.Raw) bson.D {
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		panic(fmt.Sprintf("docOf: %v", err))
	}
	return d
}

// rawOf encodes d.
func rawOf(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("rawOf: %v", err))
	}
	return b
}

func lookupD(d bson.D, k string) any {
	for _, e := range d {
		if e.Key == k {
			return e.Value
		}
	}
	return missing
}

func typeName(v any) string {
	switch v.(type) {
	case missingT:
		return "missing"
	case nil:
		return "null"
	case bson.D:
		return "object"
	case bson.A:
		return "array"
	case string:
		return "string"
	case bson.Symbol:
		return "symbol"
	case int32:
		return "int"
	case int64:
		return "long"
	case float64:
		return "double"
	case bool:
		return "bool"
	case bson.ObjectID:
		return "objectId"
	case bson.DateTime:
		return "date"
	}
	return fmt.Sprintf("%T", v)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// compare returns -1, 0, 1 and whether a and b are comparable (same
// canonical type class). Numbers compare by value; documents and arrays by
// their encoding.
func compare(a, b any) (int, bool) {
	if x, ok := number(a); ok {
		y, ok := number(b)
		if !ok {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	// Strings and symbols are one canonical type: they compare (and
	// match, and group) as the same value (the server's BSON comparison
	// order lists "Symbol, String" as one rank).
	if x, ok := stringOf(a); ok {
		y, ok := stringOf(b)
		if !ok {
			return 0, false
		}
		return strings.Compare(x, y), true
	}
	if typeName(a) != typeName(b) {
		return 0, false
	}
	switch x := a.(type) {
	case missingT, nil:
		return 0, true
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0, true
		case !x:
			return -1, true
		}
		return 1, true
	case bson.ObjectID:
		y := b.(bson.ObjectID)
		return bytes.Compare(x[:], y[:]), true
	case bson.DateTime:
		y := b.(bson.DateTime)
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	if x, ok := a.(bson.D); ok {
		// Documents compare field by field: name, then value (the
		// server's BSON order for embedded documents with fields of
		// comparable types, which is all the tests use).
		y := b.(bson.D)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := strings.Compare(x[i].Key, y[i].Key); c != 0 {
				return c, true
			}
			if c, ok := compare(x[i].Value, y[i].Value); !ok || c != 0 {
				return c, ok
			}
		}
		switch {
		case len(x) < len(y):
			return -1, true
		case len(x) > len(y):
			return 1, true
		}
		return 0, true
	}
	if x, ok := a.(bson.A); ok {
		// Arrays element by element (equality is what the tests need:
		// equal lengths and elements equal by value).
		y := b.(bson.A)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c, ok := compare(x[i], y[i]); !ok || c != 0 {
				return c, ok
			}
		}
		switch {
		case len(x) < len(y):
			return -1, true
		case len(x) > len(y):
			return 1, true
		}
		return 0, true
	}
	ab, _ := bson.Marshal(bson.D{{Key: "v", Value: a}})
	bb, _ := bson.Marshal(bson.D{{Key: "v", Value: b}})
	return bytes.Compare(ab, bb), true
}

// exprCompare orders a and b as the aggregation comparisons do: values of
// different types by the BSON comparison order (typeRank; missing before
// null), of one type by value.
func exprCompare(a, b any) int {
	rank := func(v any) int {
		if v == missing {
			return 0
		}
		return typeRank(v)
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	c, ok := compare(a, b)
	if !ok {
		panic(fmt.Sprintf("exprCompare of %s and %s", typeName(a), typeName(b)))
	}
	return c
}

// stringOf returns the text of a string or a symbol.
func stringOf(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bson.Symbol:
		return string(x), true
	}
	return "", false
}

func equal(a, b any) bool {
	c, ok := compare(a, b)
	return ok && c == 0
}

func truthy(v any) bool {
	switch x := v.(type) {
	case missingT, nil:
		return false
	case bool:
		return x
	}
	if n, ok := number(v); ok {
		return n != 0
	}
	return true
}

// evaluator evaluates aggregation expressions against root with variables.
type evaluator struct {
	root bson.D
	vars map[string]any
}

func (e evaluator) with(name string, v any) evaluator {
	vars := make(map[string]any, len(e.vars)+1)
	for k, x := range e.vars {
		vars[k] = x
	}
	vars[name] = v
	return evaluator{root: e.root, vars: vars}
}

// fieldPath walks a dotted path as an aggregation field path: through
// documents, mapping over arrays.
func fieldPath(v any, path []string) any {
	for i, p := range path {
		switch x := v.(type) {
		case bson.D:
			v = lookupD(x, p)
		case bson.A:
			out := bson.A{}
			for _, el := range x {
				if r := fieldPath(el, path[i:]); r != missing {
					out = append(out, r)
				}
			}
			return out
		default:
			return missing
		}
	}
	return v
}

func (e evaluator) eval(expr any) any {
	switch x := expr.(type) {
	case string:
		if name, ok := strings.CutPrefix(x, "$$"); ok {
			parts := strings.Split(name, ".")
			var base any
			switch parts[0] {
			case "REMOVE":
				return missing
			case "ROOT", "CURRENT":
				base = e.root
			default:
				v, ok := e.vars[parts[0]]
				if !ok {
					panic("undefined variable " + parts[0])
				}
				base = v
			}
			return fieldPath(base, parts[1:])
		}
		if path, ok := strings.CutPrefix(x, "$"); ok {
			return fieldPath(e.root, strings.Split(path, "."))
		}
		return x
	case bson.A:
		out := make(bson.A, len(x))
		for i, el := range x {
			v := e.eval(el)
			if v == missing {
				v = nil
			}
			out[i] = v
		}
		return out
	case bson.D:
		if len(x) == 1 && strings.HasPrefix(x[0].Key, "$") {
			return e.op(x[0].Key, x[0].Value)
		}
		out := bson.D{}
		for _, el := range x {
			if strings.HasPrefix(el.Key, "$") {
				panic("operator in an object literal: " + el.Key)
			}
			if v := e.eval(el.Value); v != missing {
				out = append(out, bson.E{Key: el.Key, Value: v})
			}
		}
		return out
	}
	return expr
}

func args(v any, n int) bson.A {
	a, ok := v.(bson.A)
	if !ok || len(a) != n {
		panic(fmt.Sprintf("want %d arguments, have %v", n, v))
	}
	return a
}

func (e evaluator) op(name string, arg any) any {
	switch name {
	case "$literal":
		return arg
	case "$cond":
		a := args(arg, 3)
		if truthy(e.eval(a[0])) {
			return e.eval(a[1])
		}
		return e.eval(a[2])
	case "$eq":
		a := args(arg, 2)
		return equal(e.eval(a[0]), e.eval(a[1]))
	case "$gt":
		a := args(arg, 2)
		return exprCompare(e.eval(a[0]), e.eval(a[1])) > 0
	case "$type":
		return typeName(e.eval(arg))
	case "$and":
		for _, x := range arg.(bson.A) {
			if !truthy(e.eval(x)) {
				return false
			}
		}
		return true
	case "$or":
		for _, x := range arg.(bson.A) {
			if truthy(e.eval(x)) {
				return true
			}
		}
		return false
	case "$split":
		// Both arguments must be strings (else an error); the string
		// split at each delimiter, which is kept out.
		a := args(arg, 2)
		str, ok1 := e.eval(a[0]).(string)
		sep, ok2 := e.eval(a[1]).(string)
		if !ok1 || !ok2 {
			panic("$split requires strings")
		}
		if sep == "" {
			panic("$split requires a non-empty separator")
		}
		out := bson.A{}
		for _, p := range strings.Split(str, sep) {
			out = append(out, p)
		}
		return out
	case "$arrayElemAt":
		// An index past the end is missing; a negative one counts from
		// the end.
		a := args(arg, 2)
		arr, ok := e.eval(a[0]).(bson.A)
		if !ok {
			panic("$arrayElemAt of a non-array")
		}
		n, ok := number(e.eval(a[1]))
		if !ok {
			panic("$arrayElemAt index not a number")
		}
		i := int(n)
		if i < 0 {
			i += len(arr)
		}
		if i < 0 || i >= len(arr) {
			return missing
		}
		return arr[i]
	case "$ifNull":
		a := args(arg, 2)
		if v := e.eval(a[0]); v != nil && v != missing {
			return v
		}
		return e.eval(a[1])
	case "$add":
		var sum int64
		var fsum float64
		long, double, date := false, false, false
		for _, x := range arg.(bson.A) {
			switch n := e.eval(x).(type) {
			case int32:
				sum += int64(n)
			case int64:
				sum += n
				long = true
			case float64: // a double makes the sum a double
				fsum += n
				double = true
			case bson.DateTime: // a date plus milliseconds is a date (at most one date)
				if date {
					panic("$add of two dates")
				}
				sum += int64(n)
				date = true
			default:
				panic(fmt.Sprintf("$add of %T", n))
			}
		}
		if date {
			if double {
				panic("$add of a date and a double: not supported")
			}
			return bson.DateTime(sum)
		}
		if double {
			return float64(sum) + fsum
		}
		if long || sum > math.MaxInt32 || sum < math.MinInt32 {
			return sum
		}
		return int32(sum)
	case "$lte":
		a := args(arg, 2)
		return exprCompare(e.eval(a[0]), e.eval(a[1])) <= 0
	case "$reduce":
		spec := arg.(bson.D)
		acc := e.eval(lookupD(spec, "initialValue"))
		switch arr := e.eval(lookupD(spec, "input")).(type) {
		case missingT, nil:
			return nil
		case bson.A:
			for _, el := range arr {
				acc = e.with("this", el).with("value", acc).eval(lookupD(spec, "in"))
			}
			return acc
		default:
			panic(fmt.Sprintf("$reduce of a %s", typeName(arr)))
		}
	case "$subtract":
		a := args(arg, 2)
		x, xok := e.eval(a[0]).(int32)
		y, yok := e.eval(a[1]).(int32)
		if !xok || !yok {
			panic("$subtract: the evaluator supports int32 only")
		}
		return x - y
	case "$bsonSize":
		switch v := e.eval(arg).(type) {
		case missingT, nil:
			return nil
		case bson.D:
			n := len(rawOf(v))
			if n > 16<<20 {
				// Before MongoDB 9.0 $bsonSize of more than 16 MiB fails
				// the command.
				panic(fmt.Sprintf("$bsonSize: BSONObjectTooLarge (%d bytes)", n))
			}
			return int32(n)
		default:
			panic(fmt.Sprintf("$bsonSize requires a document, not %s", typeName(v)))
		}
	case "$size":
		a, ok := e.eval(arg).(bson.A)
		if !ok {
			panic("$size of a non-array")
		}
		return int32(len(a))
	case "$in":
		a := args(arg, 2)
		x := e.eval(a[0])
		arr, ok := e.eval(a[1]).(bson.A)
		if !ok {
			panic("$in requires an array as a second argument")
		}
		for _, el := range arr {
			if equal(x, el) {
				return true
			}
		}
		return false
	case "$concatArrays":
		out := bson.A{}
		for _, x := range arg.(bson.A) {
			switch v := e.eval(x).(type) {
			case missingT, nil:
				return nil // any null or missing argument makes the result null
			case bson.A:
				out = append(out, v...)
			default:
				panic(fmt.Sprintf("$concatArrays only supports arrays, not %s", typeName(v)))
			}
		}
		return out
	case "$objectToArray":
		switch v := e.eval(arg).(type) {
		case missingT, nil:
			return nil
		case bson.D:
			out := make(bson.A, len(v))
			for i, el := range v {
				out[i] = bson.D{{Key: "k", Value: el.Key}, {Key: "v", Value: el.Value}}
			}
			return out
		default:
			panic(fmt.Sprintf("$objectToArray requires a document input, found: %s", typeName(v)))
		}
	case "$arrayToObject":
		switch v := e.eval(arg).(type) {
		case missingT, nil:
			return nil
		case bson.A:
			out := bson.D{}
			for _, el := range v {
				kv, ok := el.(bson.D)
				if !ok || len(kv) != 2 || kv[0].Key != "k" || kv[1].Key != "v" {
					panic(fmt.Sprintf("$arrayToObject: bad element %v", el))
				}
				k, ok := kv[0].Value.(string)
				if !ok {
					panic("$arrayToObject: key not a string")
				}
				replaced := false
				for i := range out {
					if out[i].Key == k {
						out[i].Value, replaced = kv[1].Value, true
					}
				}
				if !replaced {
					out = append(out, bson.E{Key: k, Value: kv[1].Value})
				}
			}
			return out
		default:
			panic(fmt.Sprintf("$arrayToObject requires an array input, found: %s", typeName(v)))
		}
	case "$map", "$filter":
		spec := arg.(bson.D)
		in := e.eval(lookupD(spec, "input"))
		as, _ := lookupD(spec, "as").(string)
		if as == "" {
			as = "this"
		}
		switch arr := in.(type) {
		case missingT, nil:
			return nil
		case bson.A:
			out := bson.A{}
			for _, el := range arr {
				inner := e.with(as, el)
				if name == "$map" {
					v := inner.eval(lookupD(spec, "in"))
					if v == missing {
						v = nil
					}
					out = append(out, v)
				} else if truthy(inner.eval(lookupD(spec, "cond"))) {
					out = append(out, el)
				}
			}
			return out
		default:
			panic(name + " input is not an array")
		}
	}
	panic("unsupported operator " + name)
}

// queryPath walks a dotted path as a query path: numeric components index
// arrays.
func queryPath(v any, path string) any {
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

// match reports whether doc matches filter.
func match(doc bson.D, filter bson.D) bool {
	for _, el := range filter {
		switch el.Key {
		case "$or":
			any := false
			for _, f := range el.Value.(bson.A) {
				if match(doc, f.(bson.D)) {
					any = true
				}
			}
			if !any {
				return false
			}
			continue
		case "$expr":
			if !truthy(evaluator{root: doc}.eval(el.Value)) {
				return false
			}
			continue
		}
		if strings.HasPrefix(el.Key, "$") {
			panic("unsupported query operator " + el.Key)
		}
		vals := queryValues(doc, strings.Split(el.Key, "."))
		// anyVal reports whether f holds for one of the values the path
		// reaches (for missing when it reaches none).
		anyVal := func(f func(v any) bool) bool {
			if len(vals) == 0 {
				return f(missing)
			}
			for _, v := range vals {
				if f(v) {
					return true
				}
			}
			return false
		}
		// orElement is f of v, or of an element of v when v is an array.
		orElement := func(v any, f func(any) bool) bool {
			if f(v) {
				return true
			}
			if arr, ok := v.(bson.A); ok {
				for _, y := range arr {
					if f(y) {
						return true
					}
				}
			}
			return false
		}
		ops, isOps := el.Value.(bson.D)
		if !isOps || len(ops) == 0 || !strings.HasPrefix(ops[0].Key, "$") {
			if !anyVal(func(v any) bool { return matchesEqual(v, el.Value) }) {
				return false
			}
			continue
		}
		for _, op := range ops {
			var ok bool
			switch op.Key {
			case "$exists":
				ok = (len(vals) > 0) == op.Value.(bool)
			case "$lte":
				ok = anyVal(func(v any) bool {
					return orElement(v, func(y any) bool { c, ok := compare(y, op.Value); return ok && c <= 0 })
				})
			case "$lt":
				ok = anyVal(func(v any) bool {
					return orElement(v, func(y any) bool { c, ok := compare(y, op.Value); return ok && c < 0 })
				})
			case "$type":
				// An array matches its own type, and any type one of its
				// elements has.
				t := op.Value.(string)
				ok = anyVal(func(v any) bool {
					return orElement(v, func(y any) bool { return typeName(y) == t })
				})
			case "$in":
				ok = anyVal(func(v any) bool {
					for _, x := range op.Value.(bson.A) {
						if matchesEqual(v, x) {
							return true
						}
					}
					return false
				})
			default:
				panic("unsupported query operator " + op.Key)
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// queryValues returns the values a query path reaches in v: through
// documents, and through arrays both to the element a numeric component
// indexes and into every element that is a document (the server's
// implicit array traversal). A path that reaches nothing returns none.
func queryValues(v any, path []string) []any {
	if len(path) == 0 {
		return []any{v}
	}
	switch x := v.(type) {
	case bson.D:
		f := lookupD(x, path[0])
		if f == missing {
			return nil
		}
		return queryValues(f, path[1:])
	case bson.A:
		var out []any
		if i, err := strconv.Atoi(path[0]); err == nil && i >= 0 && i < len(x) {
			out = append(out, queryValues(x[i], path[1:])...)
		}
		for _, el := range x {
			if d, ok := el.(bson.D); ok {
				out = append(out, queryValues(d, path)...)
			}
		}
		return out
	}
	return nil
}

// matchesEqual is a query's equality {f: want} on the value v of f: v
// equals want, or v is an array with an element equal to want (one level:
// an array of arrays is not flattened).
func matchesEqual(v, want any) bool {
	if equal(v, want) {
		return true
	}
	if arr, ok := v.(bson.A); ok {
		for _, el := range arr {
			if equal(el, want) {
				return true
			}
		}
	}
	return false
}

// setPath sets a dotted path in doc like the $set update operator:
// existing fields are replaced in place, missing ones appended (creating
// intermediate documents).
func setPath(doc bson.D, path []string, v any) bson.D {
	for i := range doc {
		if doc[i].Key == path[0] {
			if len(path) == 1 {
				doc[i].Value = v
			} else {
				sub, ok := doc[i].Value.(bson.D)
				if !ok {
					panic("setPath through a non-document")
				}
				doc[i].Value = setPath(sub, path[1:], v)
			}
			return doc
		}
	}
	if len(path) == 1 {
		return append(doc, bson.E{Key: path[0], Value: v})
	}
	return append(doc, bson.E{Key: path[0], Value: setPath(bson.D{}, path[1:], v)})
}

// addFields applies a $set/$addFields stage spec to doc: an operator
// expression replaces the field; an object literal merges into an existing
// embedded document.
func addFields(root, doc bson.D, spec bson.D) bson.D {
	ev := evaluator{root: root}
	for _, el := range spec {
		if sub, ok := el.Value.(bson.D); ok && len(sub) > 0 && !strings.HasPrefix(sub[0].Key, "$") {
			cur, _ := lookupD(doc, el.Key).(bson.D)
			cur = append(bson.D{}, cur...)
			doc = setPath(doc, []string{el.Key}, addFields(root, cur, sub))
			continue
		}
		v := ev.eval(el.Value)
		if v == missing {
			continue
		}
		doc = setPath(doc, []string{el.Key}, v)
	}
	return doc
}

// runPipeline runs $match, $project, $set, $group, $sort and
// $replaceWith stages over docs.
func runPipeline(docs []bson.D, pipeline bson.A) []bson.D {
	return runPipelineIn(nil, docs, pipeline)
}

// runPipelineIn is runPipeline in a database of collections colls, where
// $unionWith {coll, pipeline} outputs the documents so far, then those of
// pipeline run over colls[coll] (none for a missing collection).
func runPipelineIn(colls map[string][]bson.D, docs []bson.D, pipeline bson.A) []bson.D {
	for _, st := range pipeline {
		stage := st.(bson.D)
		if len(stage) != 1 {
			panic(fmt.Sprintf("a stage has one field: %v", stage))
		}
		if stage[0].Key == "$unionWith" {
			if colls == nil {
				panic("$unionWith outside a database")
			}
			spec := stage[0].Value.(bson.D)
			coll, ok := lookupD(spec, "coll").(string)
			if !ok {
				panic(fmt.Sprintf("$unionWith without coll: %v", spec))
			}
			sub, _ := lookupD(spec, "pipeline").(bson.A)
			docs = append(append([]bson.D(nil), docs...), runPipelineIn(colls, colls[coll], sub)...)
			continue
		}
		if stage[0].Key == "$group" {
			docs = group(docs, stage[0].Value.(bson.D))
			continue
		}
		if stage[0].Key == "$sort" {
			docs = sortDocs(docs, stage[0].Value.(bson.D))
			continue
		}
		var out []bson.D
		for _, doc := range docs {
			switch stage[0].Key {
			case "$match":
				if match(doc, stage[0].Value.(bson.D)) {
					out = append(out, doc)
				}
			case "$set":
				out = append(out, addFields(doc, append(bson.D{}, doc...), stage[0].Value.(bson.D)))
			case "$replaceWith":
				// The expression must be a document (the server fails
				// the aggregate otherwise, 40228).
				root, ok := evaluator{root: doc}.eval(stage[0].Value).(bson.D)
				if !ok {
					panic(fmt.Sprintf("$replaceWith %v: not a document", stage[0].Value))
				}
				out = append(out, root)
			case "$project":
				ev := evaluator{root: doc}
				res := bson.D{}
				if id := lookupD(doc, "_id"); id != missing {
					res = append(res, bson.E{Key: "_id", Value: id})
				}
				for _, f := range stage[0].Value.(bson.D) {
					if n, ok := number(f.Value); ok && n == 1 {
						res = includePath(res, doc, strings.Split(f.Key, "."))
						continue
					}
					if v := ev.eval(f.Value); v != missing {
						res = append(res, bson.E{Key: f.Key, Value: v})
					}
				}
				out = append(out, res)
			default:
				panic("unsupported stage " + stage[0].Key)
			}
		}
		docs = out
	}
	return docs
}

// includePath adds the inclusion projection of a (dotted) path of doc to
// res as the server does: a missing field is left out; through an
// embedded document, the document is included with only the projected
// subfields (possibly none: {a: {}}); a scalar on the way is left out.
func includePath(res, doc bson.D, path []string) bson.D {
	v := lookupD(doc, path[0])
	if v == missing {
		return res
	}
	if len(path) == 1 {
		return setPath(res, path, v)
	}
	sub, ok := v.(bson.D)
	if !ok {
		return res
	}
	cur, _ := lookupD(res, path[0]).(bson.D)
	return setPath(res, path[:1], includePath(append(bson.D{}, cur...), sub, path[1:]))
}

// applyUpdate applies an update document ($set, $addToSet with $each) or
// an update pipeline to doc.
func applyUpdate(doc bson.D, update any) bson.D {
	doc = append(bson.D{}, doc...)
	switch u := update.(type) {
	case bson.A:
		return runPipeline([]bson.D{doc}, u)[0]
	case bson.D:
		for _, op := range u {
			switch op.Key {
			case "$set":
				for _, f := range op.Value.(bson.D) {
					doc = setPath(doc, strings.Split(f.Key, "."), f.Value)
				}
			case "$addToSet":
				for _, f := range op.Value.(bson.D) {
					each := lookupD(f.Value.(bson.D), "$each").(bson.A)
					cur, _ := queryPath(doc, f.Key).(bson.A)
					cur = append(bson.A{}, cur...)
					for _, x := range each {
						dup := false
						for _, y := range cur {
							// By value, as the server compares:
							// {u, p: 5} and {u, p: NumberLong(5)} are one
							// element.
							if equal(x, y) {
								dup = true
							}
						}
						if !dup {
							cur = append(cur, x)
						}
					}
					doc = setPath(doc, strings.Split(f.Key, "."), cur)
				}
			default:
				panic("unsupported update operator " + op.Key)
			}
		}
		return doc
	}
	panic(fmt.Sprintf("update of type %T", update))
}

// collection is a toy collection for UpdateOne/upsert semantics. now is
// the server's clock: each statement sees "$$NOW" as that one instant.
type collection struct {
	docs []bson.D
	now  time.Time
}

// bindNow replaces every "$$NOW" in v with {$literal: now}, as the server
// binds $$NOW to one value for a whole statement.
func bindNow(v any, now time.Time) any {
	switch x := v.(type) {
	case string:
		if x == "$$NOW" {
			return bson.D{{Key: "$literal", Value: bson.NewDateTimeFromTime(now)}}
		}
	case bson.D:
		out := make(bson.D, len(x))
		for i, el := range x {
			out[i] = bson.E{Key: el.Key, Value: bindNow(el.Value, now)}
		}
		return out
	case bson.A:
		out := make(bson.A, len(x))
		for i, el := range x {
			out[i] = bindNow(el, now)
		}
		return out
	}
	return v
}

// updateOne applies update to the first document matching filter. With
// upsert and no match it inserts a document seeded from filter's top-level
// equality fields, failing with dupKey when a document with that _id
// exists. It returns the matched count.
func (c *collection) updateOne(filter bson.D, update any, upsert bool) (matched int, dupKey bool) {
	filter = bindNow(norm(filter), c.now).(bson.D)
	update = bindNow(norm(update), c.now)
	for i, d := range c.docs {
		if match(d, filter) {
			c.docs[i] = applyUpdate(d, update)
			return 1, false
		}
	}
	if !upsert {
		return 0, false
	}
	seed := bson.D{}
	for _, el := range filter {
		if strings.HasPrefix(el.Key, "$") {
			continue
		}
		if ops, ok := el.Value.(bson.D); ok && len(ops) > 0 && strings.HasPrefix(ops[0].Key, "$") {
			continue
		}
		seed = setPath(seed, strings.Split(el.Key, "."), el.Value)
	}
	id := lookupD(seed, "_id")
	for _, d := range c.docs {
		if equal(lookupD(d, "_id"), id) {
			return 0, true
		}
	}
	c.docs = append(c.docs, applyUpdate(seed, update))
	return 0, false
}

// group runs a $group stage with the $sum, $min and $push accumulators:
// groups in order of first appearance; $sum adds numbers (int32 while it
// fits) and ignores others, $min ignores null and missing, $push skips
// missing values.
func group(docs []bson.D, spec bson.D) []bson.D {
	type acc struct {
		key  any
		vals []any
	}
	var groups []*acc
	for _, doc := range docs {
		ev := evaluator{root: doc}
		k := ev.eval(spec[0].Value)
		if k == missing {
			k = nil
		}
		var g *acc
		for _, x := range groups {
			if equal(x.key, k) { // by value, as the server groups: 1 and NumberLong(1), "a" and Symbol("a") are one key
				g = x
			}
		}
		if g == nil {
			g = &acc{key: k, vals: make([]any, len(spec)-1)}
			for i := range g.vals {
				g.vals[i] = missing
			}
			groups = append(groups, g)
		}
		for i, f := range spec[1:] {
			op := f.Value.(bson.D)[0]
			v := ev.eval(op.Value)
			cur := g.vals[i]
			switch op.Key {
			case "$sum":
				var sum int64
				if cur != missing {
					n, _ := number(cur)
					sum = int64(n)
				}
				if n, ok := number(v); ok {
					sum += int64(n)
				}
				if sum > math.MaxInt32 || sum < math.MinInt32 {
					g.vals[i] = sum
				} else {
					g.vals[i] = int32(sum)
				}
			case "$min":
				if v == missing || v == nil {
					if cur == missing {
						g.vals[i] = nil
					}
					continue
				}
				if cur == missing || cur == nil {
					g.vals[i] = v
				} else if c, ok := compare(v, cur); !ok {
					panic("$min over values of different types")
				} else if c < 0 {
					g.vals[i] = v
				}
			case "$push":
				arr, _ := cur.(bson.A)
				if cur == missing {
					arr = bson.A{}
				}
				if v != missing {
					arr = append(arr, v)
				}
				g.vals[i] = arr
			default:
				panic("unsupported accumulator " + op.Key)
			}
		}
	}
	out := make([]bson.D, 0, len(groups))
	for _, g := range groups {
		d := bson.D{{Key: "_id", Value: g.key}}
		for i, f := range spec[1:] {
			d = append(d, bson.E{Key: f.Key, Value: g.vals[i]})
		}
		out = append(out, d)
	}
	return out
}

// typeRank is the server's sort order of BSON types (for the types the
// tests use): missing and null, numbers, strings, documents, arrays,
// ObjectIds, booleans, dates.
func typeRank(v any) int {
	switch typeName(v) {
	case "missing", "null":
		return 1
	case "int", "long", "double":
		return 2
	case "string", "symbol":
		return 3
	case "object":
		return 4
	case "array":
		return 5
	case "objectId":
		return 7
	case "bool":
		return 8
	case "date":
		return 9
	}
	panic("typeRank of " + typeName(v))
}

// sortDocs runs a $sort stage (stable, ascending or descending per key).
// An array sort key is its smallest element ascending, its largest
// descending; an empty array sorts before null and missing.
func sortDocs(docs []bson.D, spec bson.D) []bson.D {
	out := append([]bson.D(nil), docs...)
	sort.SliceStable(out, func(i, j int) bool {
		for _, k := range spec {
			desc := false
			if n, _ := number(k.Value); n < 0 {
				desc = true
			}
			a, b := sortKey(queryPath(out[i], k.Key), desc), sortKey(queryPath(out[j], k.Key), desc)
			c := sortCompare(a, b)
			if desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return false
	})
	return out
}

// emptyArray is the sort key of [].
type emptyArray struct{}

// sortKey is the value v sorts by: an array's smallest element (largest
// when desc), emptyArray for [].
func sortKey(v any, desc bool) any {
	arr, ok := v.(bson.A)
	if !ok {
		return v
	}
	if len(arr) == 0 {
		return emptyArray{}
	}
	key := arr[0]
	for _, el := range arr[1:] {
		if c := sortCompare(el, key); desc && c > 0 || !desc && c < 0 {
			key = el
		}
	}
	return key
}

// sortCompare orders two sort keys: by typeRank, then by value.
func sortCompare(a, b any) int {
	if _, ok := a.(emptyArray); ok {
		if _, ok := b.(emptyArray); ok {
			return 0
		}
		return -1
	}
	if _, ok := b.(emptyArray); ok {
		return 1
	}
	if ra, rb := typeRank(a), typeRank(b); ra != rb {
		return ra - rb
	}
	c, _ := compare(a, b)
	return c
}
