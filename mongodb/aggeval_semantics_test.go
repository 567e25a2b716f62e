package mongodb

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The evaluator's own semantics where the server's differ from a naive
// reading: these are the places an evaluator bug would make every test
// built on it agree with a misreading (make test-mql checks the same
// against mingo).

// TestEvaluatorAddToSetByValue: $addToSet adds an element only when no
// element of the array equals it by the server's BSON comparison: numbers
// by value whatever their type (5, NumberLong(5) and 5.0 are one value),
// documents field by field in order ({u, p} and {p, u} differ).
func TestEvaluatorAddToSetByValue(t *testing.T) {
	pair := func(u string, p any) bson.D { return bson.D{{Key: "u", Value: u}, {Key: "p", Value: p}} }
	cases := []struct {
		name   string
		stored bson.A
		each   bson.A
		want   int // elements after the update
	}{
		{"int32 then int64", bson.A{pair("a", int32(5))}, bson.A{pair("a", int64(5))}, 1},
		{"int64 then double", bson.A{pair("a", int64(5))}, bson.A{pair("a", 5.0)}, 1},
		{"both in one $each", bson.A{}, bson.A{pair("a", int32(5)), pair("a", int64(5))}, 1},
		{"other value", bson.A{pair("a", int32(5))}, bson.A{pair("a", int64(6))}, 2},
		{"field order differs", bson.A{pair("a", int32(5))}, bson.A{bson.D{{Key: "p", Value: int32(5)}, {Key: "u", Value: "a"}}}, 2},
		{"arrays by value", bson.A{bson.A{int32(1), "x"}}, bson.A{bson.A{int64(1), "x"}}, 1},
		{"array of other length", bson.A{bson.A{int32(1)}}, bson.A{bson.A{int32(1), int32(2)}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := bson.D{{Key: "_id", Value: int32(1)}, {Key: "pairs", Value: c.stored}}
			upd := bson.D{{Key: "$addToSet", Value: bson.D{{Key: "pairs", Value: bson.D{{Key: "$each", Value: c.each}}}}}}
			got, _ := lookupD(applyUpdate(doc, norm(upd)), "pairs").(bson.A)
			if len(got) != c.want {
				t.Errorf("pairs %v: %d elements, want %d", got, len(got), c.want)
			}
		})
	}
}

// TestEvaluatorMatchEqualityInArrays: a query's equality {f: v} matches a
// document whose f is v, or an array with an element equal to v, or (v
// an array) an array equal to v.
func TestEvaluatorMatchEqualityInArrays(t *testing.T) {
	cases := []struct {
		name   string
		doc    bson.D
		filter bson.D
		want   bool
	}{
		{"scalar", bson.D{{Key: "user", Value: "b"}}, bson.D{{Key: "user", Value: "b"}}, true},
		{"element of an array", bson.D{{Key: "user", Value: bson.A{"a", "b"}}}, bson.D{{Key: "user", Value: "b"}}, true},
		{"no element equal", bson.D{{Key: "user", Value: bson.A{"a", "c"}}}, bson.D{{Key: "user", Value: "b"}}, false},
		{"array equal to the array", bson.D{{Key: "user", Value: bson.A{"b"}}}, bson.D{{Key: "user", Value: bson.A{"b"}}}, true},
		{"array element equal to the array", bson.D{{Key: "user", Value: bson.A{bson.A{"b"}}}}, bson.D{{Key: "user", Value: bson.A{"b"}}}, true},
		{"number by value in an array", bson.D{{Key: "problem", Value: bson.A{int64(7)}}}, bson.D{{Key: "problem", Value: int32(7)}}, true},
		{"nested arrays are not flattened", bson.D{{Key: "user", Value: bson.A{bson.A{"b"}}}}, bson.D{{Key: "user", Value: "b"}}, false},
		{"pair with an array user", bson.D{{Key: "user", Value: bson.A{"b"}}, {Key: "problem", Value: int32(7)}},
			bson.D{{Key: "user", Value: "b"}, {Key: "problem", Value: int64(7)}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := match(norm(c.doc).(bson.D), norm(c.filter).(bson.D)); got != c.want {
				t.Errorf("match(%v, %v) = %v, want %v", c.doc, c.filter, got, c.want)
			}
		})
	}
}

// TestEvaluatorAddNumberTypes: $add of ints is an int while it fits, a
// long with a long, a double with a double (a lease epoch another writer
// stored as 3.0 makes acquireWrite's next epoch 4.0).
func TestEvaluatorAddNumberTypes(t *testing.T) {
	cases := []struct {
		args bson.A
		want any
	}{
		{bson.A{int32(1), int32(2)}, int32(3)},
		{bson.A{int32(1), int64(2)}, int64(3)},
		{bson.A{float64(3), int64(1)}, float64(4)},
		{bson.A{int32(1), float64(0.5)}, float64(1.5)},
	}
	for _, c := range cases {
		got := evaluator{}.eval(bson.D{{Key: "$add", Value: c.args}})
		if got != c.want {
			t.Errorf("$add %v = %v (%T), want %v (%T)", c.args, got, got, c.want, c.want)
		}
	}
}

// TestEvaluatorSortArrayKeys: $sort (and a find's sort) orders a document
// whose key is an array by the array's smallest element ascending, its
// largest descending; an empty array sorts before null and missing.
func TestEvaluatorSortArrayKeys(t *testing.T) {
	docs := []bson.D{
		{{Key: "_id", Value: int32(1)}, {Key: "user", Value: "b"}},
		{{Key: "_id", Value: int32(2)}, {Key: "user", Value: bson.A{"a"}}},
		{{Key: "_id", Value: int32(3)}, {Key: "user", Value: bson.A{"c", "$e"}}},
		{{Key: "_id", Value: int32(4)}, {Key: "user", Value: bson.A{}}},
		{{Key: "_id", Value: int32(5)}, {Key: "user", Value: nil}},
		{{Key: "_id", Value: int32(6)}},
	}
	for _, c := range []struct {
		dir  int32
		want []int32
	}{
		{1, []int32{4, 5, 6, 3, 2, 1}},  // [], null, missing, "$e", "a", "b"
		{-1, []int32{3, 1, 2, 5, 6, 4}}, // "c", "b", "a", null, missing, []
	} {
		sorted := sortDocs(docs, bson.D{{Key: "user", Value: c.dir}})
		var got []int32
		for _, d := range sorted {
			got = append(got, lookupD(d, "_id").(int32))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("sort by user %d: _ids %v, want %v", c.dir, got, c.want)
		}
	}
}

// TestEvaluatorQueryPathsThroughArrays: a query path reaches every value
// through arrays (each element for a field name, the element at an index
// for a number), and a condition holds when it holds for one of them;
// {f: {$type: t}} also matches an array holding an element of type t.
func TestEvaluatorQueryPathsThroughArrays(t *testing.T) {
	doc := bson.D{{Key: "ss", Value: bson.A{bson.D{{Key: "b", Value: bson.D{{Key: "1", Value: int32(5)}}}}, int32(7)}}}
	cases := []struct {
		filter bson.D
		want   bool
	}{
		{bson.D{{Key: "ss.b.1", Value: bson.D{{Key: "$exists", Value: true}}}}, true},
		{bson.D{{Key: "ss.b.2", Value: bson.D{{Key: "$exists", Value: true}}}}, false},
		{bson.D{{Key: "ss.0.b.1", Value: bson.D{{Key: "$exists", Value: true}}}}, true},
		{bson.D{{Key: "ss.b.1", Value: int64(5)}}, true},
		{bson.D{{Key: "ss.b.1", Value: bson.D{{Key: "$in", Value: bson.A{int32(4), int32(5)}}}}}, true},
		{bson.D{{Key: "ss", Value: bson.D{{Key: "$type", Value: "object"}}}}, true},
		{bson.D{{Key: "ss", Value: bson.D{{Key: "$type", Value: "array"}}}}, true},
		{bson.D{{Key: "ss", Value: bson.D{{Key: "$type", Value: "string"}}}}, false},
		{bson.D{{Key: "ss.b", Value: bson.D{{Key: "$type", Value: "object"}}}}, true},
		{bson.D{{Key: "ss.c", Value: bson.D{{Key: "$exists", Value: false}}}}, true},
	}
	for _, c := range cases {
		if got := match(norm(doc).(bson.D), norm(c.filter).(bson.D)); got != c.want {
			t.Errorf("match(%v) = %v, want %v", c.filter, got, c.want)
		}
	}
}

// TestEvaluatorCompareAcrossTypes: the aggregation comparisons $lte and
// $gt order values of different types by the BSON comparison order
// (missing and null, numbers, strings, documents, arrays, ObjectIds,
// booleans, dates), where a query's $lte matches only its own type.
func TestEvaluatorCompareAcrossTypes(t *testing.T) {
	date := bson.DateTime(1000)
	cases := []struct {
		op   string
		a, b any
		want bool
	}{
		{"$lte", "$missing", date, true},
		{"$lte", nil, date, true},
		{"$lte", "x", date, true},
		{"$lte", date, "x", false},
		{"$lte", int32(5), "x", true},
		{"$gt", date, "x", true},
		{"$gt", "x", int64(5), true},
		{"$gt", bson.D{{Key: "a", Value: int32(1)}}, "x", true},
		{"$gt", int32(5), int64(4), true},
		{"$lte", int32(5), float64(5), true},
	}
	for _, c := range cases {
		a := c.a
		if s, ok := a.(string); !ok || s != "$missing" {
			a = bson.D{{Key: "$literal", Value: a}}
		}
		got := evaluator{root: bson.D{}}.eval(norm(bson.D{{Key: c.op, Value: bson.A{a, bson.D{{Key: "$literal", Value: c.b}}}}}))
		if got != c.want {
			t.Errorf("%s [%v, %v] = %v, want %v", c.op, c.a, c.b, got, c.want)
		}
	}
}
