package mongodb

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestMQLReplacementsStillDiffer runs, for each operator the harness
// replaces (tools/mql/harness.js, replacements), a statement on which the
// pinned mingo's own operator and the server differ, the server's answer
// being this package's evaluator's: the harness must give the
// evaluator's answer, and mingo's own operator (the case's native list)
// another. When a mingo release gets one right, this fails: drop that
// replacement.
func TestMQLReplacementsStillDiffer(t *testing.T) {
	skipWithoutMingo(t)
	mingo := startMingo(t)
	date := bson.DateTime(1_700_000_000_000)
	probes := []struct {
		replacement string
		c           mqlCase
	}{
		{"compare", mqlCase{kind: "aggregate", docs: []bson.D{{{Key: "_id", Value: int32(1)}}},
			stages: bson.A{bson.D{{Key: "$project", Value: bson.D{
				{Key: "missingBeforeDate", Value: bson.D{{Key: "$lte", Value: bson.A{"$x", date}}}},
				{Key: "stringAfterNumber", Value: bson.D{{Key: "$gt", Value: bson.A{"a", int32(5)}}}},
			}}}}}},
		{"$sort", mqlCase{kind: "aggregate", docs: []bson.D{
			{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.D{{Key: "y", Value: int32(1)}, {Key: "x", Value: int32(2)}}}},
			{{Key: "_id", Value: int32(2)}, {Key: "a", Value: bson.D{{Key: "x", Value: int32(5)}, {Key: "y", Value: int32(0)}}}},
		}, stages: bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "a", Value: 1}}}}}}},
		{"$sort", mqlCase{kind: "aggregate", docs: []bson.D{ // ["b"] and "b" are equal keys: b decides
			{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.A{"b"}}, {Key: "b", Value: int32(2)}},
			{{Key: "_id", Value: int32(2)}, {Key: "a", Value: "b"}, {Key: "b", Value: int32(1)}},
			{{Key: "_id", Value: int32(3)}, {Key: "a", Value: bson.A{"b"}}, {Key: "b", Value: int32(0)}},
		}, stages: bson.A{bson.D{{Key: "$sort", Value: bson.D{{Key: "a", Value: 1}, {Key: "b", Value: 1}}}}}}},
		{"$min", mqlCase{kind: "aggregate", docs: []bson.D{
			{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.D{{Key: "t", Value: int32(2)}, {Key: "i", Value: int32(1)}}}},
			{{Key: "_id", Value: int32(2)}, {Key: "a", Value: bson.D{{Key: "t", Value: int32(1)}, {Key: "i", Value: int32(5)}}}},
		}, stages: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil}, {Key: "m", Value: bson.D{{Key: "$min", Value: "$a"}}}}}}}}},
		{"$push", mqlCase{kind: "aggregate", docs: []bson.D{
			{{Key: "_id", Value: int32(1)}, {Key: "a", Value: int32(1)}},
			{{Key: "_id", Value: int32(2)}},
		}, stages: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: nil},
			{Key: "m", Value: bson.D{{Key: "$push", Value: "$a"}}},
			{Key: "r", Value: bson.D{{Key: "$push", Value: "$$REMOVE"}}}}}}}}},
		{"$exists", mqlCase{kind: "find", docs: []bson.D{
			{{Key: "_id", Value: int32(1)}, {Key: "a", Value: bson.A{bson.D{{Key: "b", Value: bson.D{{Key: "1", Value: int32(0)}}}}}}},
		}, filter: bson.D{{Key: "a.b.2", Value: bson.D{{Key: "$exists", Value: true}}}}}},
		{"$addToSet", mqlCase{kind: "update", docs: []bson.D{
			{{Key: "_id", Value: int32(1)}, {Key: "s", Value: bson.A{bson.D{{Key: "u", Value: "a"}, {Key: "p", Value: int32(1)}}}}},
		}, filter: bson.D{{Key: "_id", Value: int32(1)}},
			update: bson.D{{Key: "$addToSet", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$each", Value: bson.A{
				bson.D{{Key: "p", Value: int32(1)}, {Key: "u", Value: "a"}}}}}}}}}}},
		{"$addToSet", mqlCase{kind: "update", docs: []bson.D{{{Key: "_id", Value: int32(1)}}},
			filter: bson.D{{Key: "_id", Value: int32(1)}},
			update: bson.D{{Key: "$addToSet", Value: bson.D{{Key: "s", Value: bson.D{{Key: "$each", Value: bson.A{int32(1), int32(1)}}}}}}}}},
		{"$type", mqlCase{kind: "aggregate", docs: []bson.D{{{Key: "_id", Value: bson.ObjectID{0x65}}, {Key: "s", Value: bson.Symbol("a")}}},
			stages: bson.A{bson.D{{Key: "$project", Value: bson.D{
				{Key: "id", Value: bson.D{{Key: "$type", Value: "$_id"}}},
				{Key: "s", Value: bson.D{{Key: "$type", Value: "$s"}}},
			}}}}}},
	}
	for i, p := range probes {
		c := p.c
		c.name = p.replacement
		ours := c.runOurs()
		if ours.err != "" {
			t.Fatalf("probe %d (%s): our evaluator: %s", i, p.replacement, ours.err)
		}
		replaced, err := mingo.run(c)
		if err != nil {
			t.Fatal(err)
		}
		if d := c.compare(ours, replaced); len(d) > 0 {
			t.Errorf("probe %d (%s): the harness's replacement differs from our evaluator:\n  %s", i, p.replacement, strings.Join(d, "\n  "))
		}
		c.native = []string{p.replacement}
		own, err := mingo.run(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.compare(ours, own)) == 0 {
			t.Errorf("probe %d: mingo's own %s now gives the server's answer %v: drop the harness's replacement (tools/mql/harness.js)", i, p.replacement, show(own.docs))
		}
	}
}
