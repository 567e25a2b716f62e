package mongodb

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// cursorReply is a one-batch cursor reply of namespace ns holding docs.
func cursorReply(ns string, docs ...bson.D) bson.D {
	batch := bson.A{}
	for _, d := range docs {
		batch = append(batch, d)
	}
	return bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: ns}, {Key: "firstBatch", Value: batch}}}}
}

// fullReads names every part of a Read.
func fullReads() *watch.Reads {
	return &watch.Reads{
		Pairs:         []materialize.Pair{{User: "alice", Problem: 1}, {User: "bob", Problem: 2}},
		Users:         []string{"alice", "bob", "$odd.name"},
		Problems:      []int64{1, 2},
		Homeworks:     []bson.ObjectID{{0x65, 1}, {0x65, 2}},
		HomeworkUsers: []string{"alice", "bob", "$odd.name"},
	}
}

// separateStages returns, for each command ReadSeparately sends for r
// (over empty collections), its collection and the stages it runs: a
// find's filter and projection as {$match}, {$project}, an aggregate's
// pipeline as sent.
func separateStages(t *testing.T, r *watch.Reads) (colls []string, stages []bson.A) {
	t.Helper()
	d, md, sent := mockDB(t)
	for range 5 {
		md.AddResponses(cursorReply("normal-oj.x"))
	}
	if _, err := watch.ReadSeparately(context.Background(), d, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range sent() {
		var cmd bson.D
		if err := bson.Unmarshal(c, &cmd); err != nil {
			t.Fatal(err)
		}
		switch cmd[0].Key {
		case "find":
			colls = append(colls, cmd[0].Value.(string))
			st := bson.A{bson.D{{Key: "$match", Value: lookupD(cmd, "filter")}}}
			if p := lookupD(cmd, "projection"); p != missing {
				st = append(st, bson.D{{Key: "$project", Value: p}})
			}
			stages = append(stages, st)
		case "aggregate":
			colls = append(colls, cmd[0].Value.(string))
			stages = append(stages, lookupD(cmd, "pipeline").(bson.A))
		default:
			t.Fatalf("ReadSeparately sent %s", c)
		}
	}
	return colls, stages
}

// unionParts splits the pipeline of a combined Read into its parts: the
// base collection's stages and each $unionWith's, each without the
// wrapping $replaceWith, whose tag is returned.
func unionParts(t *testing.T, base string, pipeline bson.A) (colls []string, stages []bson.A, tags []string) {
	t.Helper()
	split := func(coll string, p bson.A) {
		if len(p) == 0 {
			t.Fatalf("empty part pipeline of %s", coll)
		}
		last := p[len(p)-1].(bson.D)
		if last[0].Key != "$replaceWith" {
			t.Fatalf("part of %s ends with %v, want {$replaceWith: {p, d: $$ROOT}}", coll, last)
		}
		w := last[0].Value.(bson.D)
		tag, ok := lookupD(w, "p").(string)
		if len(w) != 2 || !ok || lookupD(w, "d") != "$$ROOT" {
			t.Fatalf("part of %s wrapped as %v, want {p: <tag>, d: \"$$ROOT\"}", coll, w)
		}
		colls, stages, tags = append(colls, coll), append(stages, p[:len(p)-1]), append(tags, tag)
	}
	i := 0
	for i < len(pipeline) && pipeline[i].(bson.D)[0].Key != "$unionWith" {
		i++
	}
	split(base, pipeline[:i])
	for _, st := range pipeline[i:] {
		s := st.(bson.D)
		if s[0].Key != "$unionWith" {
			t.Fatalf("stage %v after the first $unionWith", s)
		}
		u := s[0].Value.(bson.D)
		coll, _ := lookupD(u, "coll").(string)
		p, _ := lookupD(u, "pipeline").(bson.A)
		split(coll, p)
	}
	return colls, stages, tags
}

// TestReadOneAggregate: Read sends one aggregate, majority and causally
// after the batch's event like every read, with a batch size that brings
// a landing's result in its first reply; its parts are the stages the
// separate methods send, on their collections, each wrapped with a tag
// of its own.
func TestReadOneAggregate(t *testing.T) {
	r := fullReads()
	wantColls, wantStages := separateStages(t, r)

	d, md, sent := mockDB(t)
	md.AddResponses(cursorReply("normal-oj.submission"))
	ev := bson.Timestamp{T: 1_800_000_000, I: 7}
	if _, err := d.Read(watch.WithReadAfter(context.Background(), ev), r); err != nil {
		t.Fatal(err)
	}
	cmds := sent()
	if len(cmds) != 1 {
		t.Fatalf("Read sent %d commands, want 1 aggregate", len(cmds))
	}
	var cmd bson.D
	if err := bson.Unmarshal(cmds[0], &cmd); err != nil {
		t.Fatal(err)
	}
	base, ok := cmd[0].Value.(string)
	if cmd[0].Key != "aggregate" || !ok {
		t.Fatalf("Read sent %s, want an aggregate of a collection", cmds[0])
	}
	if lvl, _ := cmds[0].Lookup("readConcern", "level").StringValueOK(); lvl != "majority" {
		t.Errorf("readConcern %s, want level majority", cmds[0].Lookup("readConcern"))
	}
	if tt, ti, _ := cmds[0].Lookup("readConcern", "afterClusterTime").TimestampOK(); (bson.Timestamp{T: tt, I: ti}) != ev {
		t.Errorf("afterClusterTime %v, want the event's %v", cmds[0].Lookup("readConcern", "afterClusterTime"), ev)
	}
	// The default first batch is 101 documents; a landing's result must
	// come whole in the first reply, however many documents it has, up to
	// the 16 MiB a reply holds.
	if bs, ok := cmds[0].Lookup("cursor", "batchSize").Int32OK(); !ok || bs < 1<<20 {
		t.Errorf("cursor %s: want a batchSize no document count reaches before 16 MiB", cmds[0].Lookup("cursor"))
	}
	colls, stages, tags := unionParts(t, base, lookupD(cmd, "pipeline").(bson.A))
	if len(colls) != len(wantColls) {
		t.Fatalf("Read has %d parts %v, ReadSeparately sends %d commands %v", len(colls), colls, len(wantColls), wantColls)
	}
	seen := map[string]bool{}
	for i := range colls {
		if colls[i] != wantColls[i] || extJSON(t, stages[i]) != extJSON(t, wantStages[i]) {
			t.Errorf("part %d: %s %s, want %s %s (as the separate method sends it)", i, colls[i], extJSON(t, stages[i]), wantColls[i], extJSON(t, wantStages[i]))
		}
		if seen[tags[i]] {
			t.Errorf("part %d: tag %q used twice", i, tags[i])
		}
		seen[tags[i]] = true
	}

	// Outside a batch and before any write: no afterClusterTime.
	md.AddResponses(cursorReply("normal-oj.submission"))
	if _, err := d.Read(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	cmds = sent()
	if len(cmds) != 1 {
		t.Fatalf("Read outside a batch sent %d commands, want 1", len(cmds))
	}
	if _, err := cmds[0].LookupErr("readConcern", "afterClusterTime"); err == nil {
		t.Errorf("afterClusterTime %v outside a batch", cmds[0].Lookup("readConcern"))
	}
	_ = fmt.Sprint
}
