package memstore

import (
	"cmp"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// subIndex indexes the submission collection the way the mongodb adapter's
// queries use its covering index (CoveringFields): by user and by
// (user, problem), so a read of one user's or one pair's submissions
// touches those documents only, not the whole collection (the benchmark
// then measures the daemon, not the fake's scans).
//
// A document is indexed as the source reads decide on it: a decodable one
// under its decoded user and pair (what Submissions and UserStats match
// on), an undecodable one under the string in its first "user" element,
// or under each string element of an array "user" (queryUsers: the rule
// by which they report it). Results are put back in
// insertion order, the order of a whole-collection scan, so every read
// returns exactly what scanning the collection returned.
type subIndex struct {
	seq     map[string]uint64 // document key → insertion sequence (the order of s.order)
	next    uint64
	entry   map[string]subEntry
	byUser  map[string]map[string]struct{} // decodable documents by user
	badUser map[string]map[string]struct{} // undecodable documents by their user string
	byPair  map[materialize.Pair]map[string]struct{}
	// multikey: a document indexed so far stored an array under one of
	// CoveringFields (the flag stays, as MongoDB's does).
	multikey bool
}

type subEntry struct {
	ok       bool // decodable
	pair     materialize.Pair
	badUsers []string // !ok: the names a query on user matches it by (queryUsers)
}

// queryUsers returns the names a query {user: name} or {user: {$in:
// names}} matches doc by: its user string, or each string element of an
// array user (the server's equality descends one level into arrays).
func queryUsers(doc bson.Raw) []string {
	v := doc.Lookup("user")
	if u, ok := v.StringValueOK(); ok {
		return []string{u}
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	var out []string
	for _, el := range vals {
		if u, ok := el.StringValueOK(); ok && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

func newSubIndex() *subIndex {
	return &subIndex{seq: make(map[string]uint64), entry: make(map[string]subEntry),
		byUser: make(map[string]map[string]struct{}), badUser: make(map[string]map[string]struct{}),
		byPair: make(map[materialize.Pair]map[string]struct{})}
}

func add[K comparable](m map[K]map[string]struct{}, k K, doc string) {
	set := m[k]
	if set == nil {
		set = make(map[string]struct{})
		m[k] = set
	}
	set[doc] = struct{}{}
}

func remove[K comparable](m map[K]map[string]struct{}, k K, doc string) {
	if set := m[k]; set != nil {
		delete(set, doc)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

// put indexes doc under key k, replacing what k held.
func (x *subIndex) put(k string, doc bson.Raw) {
	if _, ok := x.seq[k]; !ok {
		x.next++
		x.seq[k] = x.next
	}
	x.drop(k, false)
	for _, f := range CoveringFields {
		if doc.Lookup(f).Type == bson.TypeArray {
			x.multikey = true
		}
	}
	var e subEntry
	if sub, err := materialize.DecodeSubmission(doc); err == nil {
		e = subEntry{ok: true, pair: materialize.Pair{User: sub.User, Problem: sub.Problem}}
		add(x.byUser, sub.User, k)
		add(x.byPair, e.pair, k)
	} else {
		e = subEntry{badUsers: queryUsers(doc)}
		for _, u := range e.badUsers {
			add(x.badUser, u, k)
		}
	}
	x.entry[k] = e
}

// drop removes k; with deleted, its insertion sequence too (a document
// inserted again goes last, as in s.order).
func (x *subIndex) drop(k string, deleted bool) {
	if e, ok := x.entry[k]; ok {
		if e.ok {
			remove(x.byUser, e.pair.User, k)
			remove(x.byPair, e.pair, k)
		} else {
			for _, u := range e.badUsers {
				remove(x.badUser, u, k)
			}
		}
		delete(x.entry, k)
	}
	if deleted {
		delete(x.seq, k)
	}
}

// keys returns the keys of the documents a read of users and pairs may
// match, in insertion order.
func (x *subIndex) keys(users []string, pairs []materialize.Pair) []string {
	set := make(map[string]struct{})
	for _, u := range users {
		for k := range x.byUser[u] {
			set[k] = struct{}{}
		}
		for k := range x.badUser[u] {
			set[k] = struct{}{}
		}
	}
	for _, p := range pairs {
		for k := range x.byPair[p] {
			set[k] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(x.seq[a], x.seq[b]) })
	return out
}

// candidates returns the submissions a read of users and pairs may match,
// in insertion order. The caller holds s.mu.
func (s *Store) candidates(users []string, pairs []materialize.Pair) []bson.Raw {
	keys := s.subIndex().keys(users, pairs)
	out := make([]bson.Raw, len(keys))
	for i, k := range keys {
		out[i] = s.colls[materialize.CollSubmission][k]
	}
	return out
}

// subIndex returns s.subs, built first if need be. The caller holds s.mu.
func (s *Store) subIndex() *subIndex {
	if s.subs == nil {
		// Built at the first read that needs it, in insertion order (the
		// sequence put would have given), and kept from then on: a store
		// only scanned whole (a rebuild) never pays for it.
		s.subs = newSubIndex()
		coll := s.colls[materialize.CollSubmission]
		for _, k := range s.order[materialize.CollSubmission] {
			s.subs.put(k, coll[k])
		}
	}
	return s.subs
}
