package watch_test

import (
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
	"github.com/normal-oj/noj-materializer/watch"
)

// fuzzEventSeeds are well-formed events of every collection and operation
// as watch.Pipeline projects them, and the malformed events of the
// bad-input corpus, each with a resume token.
func fuzzEventSeeds() [][]byte {
	var out [][]byte
	add := func(n int, ev bson.D) {
		d := append(bson.D{{Key: "_id", Value: mtest.D("_data", fmt.Sprintf("%016x", n))}}, ev...)
		out = append(out, biRaw(d))
	}
	ts := bson.Timestamp{T: 1_772_000_000, I: 3}
	keys := map[string]any{
		"submission": biOID(5, 1), "homework": biHwA, "problem": int32(7), "user": "a.b",
	}
	n := 0
	for _, coll := range []string{"submission", "homework", "problem", "user"} {
		for _, op := range []string{"insert", "update", "replace", "delete"} {
			n++
			ev := mtest.D("operationType", op, "clusterTime", ts, "ns", biNS(coll), "documentKey", mtest.D("_id", keys[coll]))
			if op == "insert" || op == "replace" {
				ev = append(ev, bson.E{Key: "fullDocument", Value: mtest.D("user", "$where", "problem", int64(7))})
			}
			if op == "update" {
				fields := bson.A{"status", "score", "studentStatus.a.b.7", "studentStatus.$x", "duration", "homeworks.3", "AC_problem_ids"}
				ev = append(ev, bson.E{Key: "changedFields", Value: fields})
			}
			add(n, ev)
		}
	}
	for _, op := range []string{"drop", "rename", "dropDatabase", "invalidate", "createIndexes", "modify"} {
		n++
		add(n, mtest.D("operationType", op, "clusterTime", ts, "ns", biNS("submission")))
	}
	for _, e := range biEventCorpus(biOID(5, 2)) {
		n++
		add(n, e.ev)
	}
	return out
}

// FuzzDecodeEvent: arbitrary bytes that form valid BSON never make
// DecodeEvent, or key extraction of what it returns, panic; a decoded
// event always carries its resume token.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range fuzzEventSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !mtest.DeepValidBSON(data) {
			return
		}
		ev, err := watch.DecodeEvent(bson.Raw(data))
		if err == nil && len(ev.Token) == 0 {
			t.Fatalf("DecodeEvent returned no error and no resume token")
		}
		if err == nil {
			switch ev.Change.Op {
			case materialize.OpInsert, materialize.OpUpdate, materialize.OpReplace, materialize.OpDelete:
				if ev.Change.Collection == "" {
					t.Fatalf("DecodeEvent returned a %s event without a collection and no error", ev.Change.Op)
				}
			}
		}
		k := materialize.Extract(ev.Change)
		acc := materialize.NewKeys()
		acc.Merge(k)
		acc.Merge(k)
		_ = acc.Empty()
	})
}
