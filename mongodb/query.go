package mongodb

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// This file builds every filter, projection, update and pipeline the
// adapter sends. They are pure functions of their arguments so that unit
// tests can check the BSON without a server.
//
// User names and problem keys come from documents and may contain '.' or
// start with '$'. They are never spliced into a field path unless
// safePathComponent allows it, and inside aggregation expressions they are
// always wrapped in $literal, since an expression string starting with '$'
// is a field path.

// Projections of the source reads: only the fields the derivation reads.
var (
	submissionProjection = bson.D{
		{Key: "_id", Value: 1}, {Key: "user", Value: 1}, {Key: "problem", Value: 1},
		{Key: "languageType", Value: 1}, {Key: "timestamp", Value: 1},
		{Key: "status", Value: 1}, {Key: "score", Value: 1},
	}
	problemProjection = bson.D{{Key: "homeworks", Value: 1}}
	userProjection    = bson.D{
		{Key: materialize.FieldSubmission, Value: 1},
		{Key: materialize.FieldACSubmission, Value: 1},
		{Key: materialize.FieldACProblemIDs, Value: 1},
	}
)

// scanSort is the order of ScanSubmissions, the prefix of the covering
// index that serves it.
var scanSort = bson.D{{Key: "user", Value: 1}, {Key: "problem", Value: 1}, {Key: "timestamp", Value: 1}, {Key: "_id", Value: 1}}

// coverKeys are the keys of the submission index coverIndexName: scanSort,
// then the other fields of submissionProjection. Every field the reads of
// a landing use (Submissions' filters on user and problem and its
// projection, userStatsPipeline's $match and $group) is a key, so the
// server answers them from the index's entries alone (a covered plan:
// no FETCH; PROJECTION_COVERED, or PROJECTION_DEFAULT over an $or's
// IXSCANs) and examines no submission document,
// however large Back-End's are (tasks hold every case's result). Covering
// holds while no document stores an array under one of these fields (the
// index would be multikey there; Back-End writes none): then the server
// fetches the documents and the results are the same.
//
// From the index the server gives a missing field as null: the
// derivation reads null and missing alike (materialize.DecodeSubmission's
// present, userStatsPipeline's $ifNull and its "missing"/"null" types),
// and the other types come back exact (the KeyString's TypeBits keep
// int32, int64, double, string and symbol apart).
var coverKeys = append(append(bson.D{}, scanSort...),
	bson.E{Key: "status", Value: 1}, bson.E{Key: "score", Value: 1}, bson.E{Key: "languageType", Value: 1})

const coverIndexName = "user_1_problem_1_timestamp_1__id_1_status_1_score_1_languageType_1"

// safePathComponent reports whether s can be one component of a dotted
// update or query path: not empty, no '.', not starting with '$'.
func safePathComponent(s string) bool {
	return s != "" && !strings.Contains(s, ".") && !strings.HasPrefix(s, "$")
}

// isType is the aggregation expression {$eq: [{$type: expr}, t]}.
func isType(expr any, t string) bson.D {
	return bson.D{{Key: "$eq", Value: bson.A{bson.D{{Key: "$type", Value: expr}}, t}}}
}

// literal wraps v in $literal.
func literal(v any) bson.D { return bson.D{{Key: "$literal", Value: v}} }

// cond is {$cond: [if, then, else]}.
func cond(ifExpr, thenExpr, elseExpr any) bson.D {
	return bson.D{{Key: "$cond", Value: bson.A{ifExpr, thenExpr, elseExpr}}}
}

// objectToArray is {$objectToArray: expr}.
func objectToArray(expr any) bson.D { return bson.D{{Key: "$objectToArray", Value: expr}} }

// mapExpr is {$map: {input, as, in}}.
func mapExpr(input any, as string, in any) bson.D {
	return bson.D{{Key: "$map", Value: bson.D{{Key: "input", Value: input}, {Key: "as", Value: as}, {Key: "in", Value: in}}}}
}

// filterExpr is {$filter: {input, as, cond}}.
func filterExpr(input any, as string, c any) bson.D {
	return bson.D{{Key: "$filter", Value: bson.D{{Key: "input", Value: input}, {Key: "as", Value: as}, {Key: "cond", Value: c}}}}
}

// inValues is {$in: vals} as a query operator.
func inValues[T any](vals []T) bson.D { return bson.D{{Key: "$in", Value: vals}} }

// idIn is the filter {_id: {$in: ids}} of the reads by _id (Users,
// Problems, SubmissionsByID).
func idIn[T any](ids []T) bson.D { return bson.D{{Key: "_id", Value: inValues(ids)}} }

// problemsListingFilter is the filter of ProblemsListing: the problems
// whose homeworks array holds one of ids.
func problemsListingFilter(ids []bson.ObjectID) bson.D {
	return bson.D{{Key: "homeworks", Value: inValues(ids)}}
}

// findStages is a find's filter and projection as the pipeline stages
// [{$match: filter}, {$project: projection}], for Read's sub-pipelines:
// $match takes the query language of find's filter, and since MongoDB 4.4
// find's projection is parsed and applied as $project's (inclusion
// projections here: the named top-level fields in the document's order,
// _id unless excluded), so both return the same documents.
func findStages(filter, projection bson.D) bson.A {
	return bson.A{
		bson.D{{Key: "$match", Value: filter}},
		bson.D{{Key: "$project", Value: projection}},
	}
}

// submissionFilters returns the filters of Submissions(users, pairs): the
// submissions of every named user and of every named pair, split into
// queries of at most maxTerms terms (a user or a pair each). Each filter is
// {user: {$in: [...]}}, {user: u, problem: p}, or an $or of those. Pairs
// of a named user are dropped (the user's term covers them) and duplicates
// removed; no users and no pairs give no filter.
func submissionFilters(users []string, pairs []materialize.Pair, maxTerms int) []bson.D {
	seenUser := make(map[string]bool, len(users))
	us := make([]string, 0, len(users))
	for _, u := range users {
		if !seenUser[u] {
			seenUser[u] = true
			us = append(us, u)
		}
	}
	seenPair := make(map[materialize.Pair]bool, len(pairs))
	ps := make([]materialize.Pair, 0, len(pairs))
	for _, p := range pairs {
		if !seenUser[p.User] && !seenPair[p] {
			seenPair[p] = true
			ps = append(ps, p)
		}
	}
	var out []bson.D
	var curUsers []string
	var curPairs []materialize.Pair
	flush := func() {
		if len(curUsers) == 0 && len(curPairs) == 0 {
			return
		}
		terms := make(bson.A, 0, 1+len(curPairs))
		if len(curUsers) > 0 {
			terms = append(terms, bson.D{{Key: "user", Value: inValues(curUsers)}})
		}
		for _, p := range curPairs {
			terms = append(terms, bson.D{{Key: "user", Value: p.User}, {Key: "problem", Value: p.Problem}})
		}
		if len(terms) == 1 {
			out = append(out, terms[0].(bson.D))
		} else {
			out = append(out, bson.D{{Key: "$or", Value: terms}})
		}
		curUsers, curPairs = nil, nil
	}
	n := 0
	add := func() {
		n++
		if n == maxTerms {
			flush()
			n = 0
		}
	}
	for _, u := range us {
		curUsers = append(curUsers, u)
		add()
	}
	for _, p := range ps {
		curPairs = append(curPairs, p)
		add()
	}
	flush()
	return out
}

// homeworkPipeline reads homeworks as DecodeHomework expects them: _id,
// duration, penalty and studentStatus, where studentStatus keeps only the
// named users (every user when users is nil). ids nil matches every
// homework. The user filter runs server-side with $objectToArray, $filter
// and $arrayToObject, so it works for usernames that cannot be projection
// paths; a studentStatus that is not a document is passed through as is
// (DecodeHomework reports it), as are users whose value is not a document.
func homeworkPipeline(ids []bson.ObjectID, users []string) bson.A {
	var ss any = 1
	if users != nil {
		ss = cond(isType("$studentStatus", "object"),
			bson.D{{Key: "$arrayToObject", Value: filterExpr(objectToArray("$studentStatus"), "u",
				bson.D{{Key: "$in", Value: bson.A{"$$u.k", literal(users)}}})}},
			"$studentStatus")
	}
	p := bson.A{}
	if ids != nil {
		p = append(p, bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: inValues(ids)}}}})
	}
	return append(p, bson.D{{Key: "$project", Value: bson.D{
		{Key: "duration", Value: 1},
		{Key: "penalty", Value: 1},
		{Key: materialize.FieldStudentStatus, Value: ss},
	}}})
}

// entryKeysPipeline returns, for each named homework, {_id, keys: [{u,
// p: [problem keys]}]}: the key names of studentStatus and of each user's
// document, never the entry values. Users whose value is not a document
// have no keys.
func entryKeysPipeline(ids []bson.ObjectID) bson.A {
	perUser := mapExpr(objectToArray("$studentStatus"), "u", bson.D{
		{Key: "u", Value: "$$u.k"},
		{Key: "doc", Value: isType("$$u.v", "object")},
		{Key: "p", Value: cond(isType("$$u.v", "object"),
			mapExpr(objectToArray("$$u.v"), "e", "$$e.k"),
			bson.A{})},
	})
	return bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: inValues(ids)}}}},
		bson.D{{Key: "$project", Value: bson.D{
			{Key: "keys", Value: cond(isType("$studentStatus", "object"), perUser, bson.A{})},
			{Key: "ssType", Value: bson.D{{Key: "$type", Value: "$studentStatus"}}},
		}}},
	}
}

// entriesForProblemsPipeline returns, over every homework, {_id, hits:
// [{u, p: [problem keys among keys]}]} for the users having an entry keyed
// by one of keys; homeworks without hits are dropped. The $match on
// studentStatus' type also passes an array holding a document (a query's
// $type matches an array by its elements' types), so $objectToArray is
// guarded like every other: such a homework has no hits, and cannot fail
// the aggregate.
func entriesForProblemsPipeline(keys []string) bson.A {
	docUsers := filterExpr(objectToArray("$studentStatus"), "u", isType("$$u.v", "object"))
	perUser := mapExpr(docUsers, "u", bson.D{
		{Key: "u", Value: "$$u.k"},
		{Key: "p", Value: filterExpr(mapExpr(objectToArray("$$u.v"), "e", "$$e.k"), "k",
			bson.D{{Key: "$in", Value: bson.A{"$$k", literal(keys)}}})},
	})
	hits := cond(isType("$studentStatus", "object"),
		filterExpr(perUser, "h", bson.D{{Key: "$gt", Value: bson.A{bson.D{{Key: "$size", Value: "$$h.p"}}, 0}}}),
		bson.A{})
	return bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: materialize.FieldStudentStatus, Value: bson.D{{Key: "$type", Value: "object"}}}}}},
		bson.D{{Key: "$project", Value: bson.D{{Key: "hits", Value: hits}}}},
		bson.D{{Key: "$match", Value: bson.D{{Key: "hits.0", Value: bson.D{{Key: "$exists", Value: true}}}}}},
	}
}

// userWrite returns the filter and update of a UserWrite: $set of the
// three derived fields on the existing user document (no upsert).
func userWrite(w watch.UserWrite) (filter, update bson.D) {
	return bson.D{{Key: "_id", Value: w.User}},
		bson.D{{Key: "$set", Value: w.Stats.Fields()}}
}

// entryWrite returns the filter and update of an EntryWrite. They match
// only when studentStatus.<user>.<problemKey> exists, and replace exactly
// that entry, never adding one: entryWriteByPath when both names are safe
// path components, else entryWriteByPipeline.
func entryWrite(w watch.EntryWrite) (filter bson.D, update any) {
	if safePathComponent(w.User) && safePathComponent(w.ProblemKey) {
		return entryWriteByPath(w)
	}
	return entryWriteByPipeline(w)
}

// entryWriteByPath is {_id: h, "studentStatus.u.p": {$exists: true}} and
// {$set: {"studentStatus.u.p": entry}}; u and p must be safe path
// components.
func entryWriteByPath(w watch.EntryWrite) (filter, update bson.D) {
	path := materialize.FieldStudentStatus + "." + w.User + "." + w.ProblemKey
	return bson.D{{Key: "_id", Value: w.Homework}, {Key: path, Value: bson.D{{Key: "$exists", Value: true}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: path, Value: w.Entry.Doc()}}}}
}

// entryWriteByPipeline handles any user and problem key (dots, a leading
// '$'). The filter's $expr checks that studentStatus is a document holding
// the user, whose value is a document holding the problem key; the update
// pipeline (MongoDB 4.2+) rebuilds studentStatus with $objectToArray, $map
// and $arrayToObject, replacing that one entry by the $literal entry and
// leaving every other key, value and the key order as they are. The
// pipeline by itself never adds a key either: it only maps existing ones.
// Every $objectToArray is guarded by a $type check ($cond evaluates only
// the branch it takes).
func entryWriteByPipeline(w watch.EntryWrite) (filter bson.D, update bson.A) {
	user, pk := literal(w.User), literal(w.ProblemKey)
	isUser := bson.D{{Key: "$eq", Value: bson.A{"$$u.k", user}}}
	hasEntry := cond(isType("$studentStatus", "object"),
		bson.D{{Key: "$gt", Value: bson.A{
			bson.D{{Key: "$size", Value: filterExpr(objectToArray("$studentStatus"), "u",
				cond(isUser,
					cond(isType("$$u.v", "object"),
						bson.D{{Key: "$in", Value: bson.A{pk, mapExpr(objectToArray("$$u.v"), "p", "$$p.k")}}},
						false),
					false))}},
			0,
		}}},
		false)
	filter = bson.D{
		{Key: "_id", Value: w.Homework},
		{Key: "$expr", Value: hasEntry},
	}
	replaceEntry := mapExpr(objectToArray("$$u.v"), "p",
		cond(bson.D{{Key: "$eq", Value: bson.A{"$$p.k", pk}}},
			bson.D{{Key: "k", Value: "$$p.k"}, {Key: "v", Value: literal(w.Entry.Doc())}},
			"$$p"))
	rebuilt := bson.D{{Key: "$arrayToObject", Value: mapExpr(objectToArray("$studentStatus"), "u",
		cond(isUser,
			cond(isType("$$u.v", "object"),
				bson.D{{Key: "k", Value: "$$u.k"}, {Key: "v", Value: bson.D{{Key: "$arrayToObject", Value: replaceEntry}}}},
				"$$u"),
			"$$u"))}}
	guarded := cond(isType("$studentStatus", "object"), rebuilt, "$studentStatus")
	update = bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: materialize.FieldStudentStatus, Value: guarded}}}}}
	return filter, update
}

// keyPair is a pair as the key index stores it: {u: user, p: problem}.
// p is the Pair's int64, which the driver encodes as a long whatever the
// submission stored (Back-End writes an int, other writers a long or a
// double), so every record spells a problem one way; decodePairs reads any
// number type. Deduplication does not depend on it: the server's $addToSet
// compares by value, so {u, p: 5} and {u, p: NumberLong(5)} are one
// element.
func keyPair(p materialize.Pair) bson.D {
	return bson.D{{Key: "u", Value: p.User}, {Key: "p", Value: p.Problem}}
}

// recordKeysWrite returns the filter and update recording pairs for one
// submission: an upsert adding each pair once.
func recordKeysWrite(id bson.ObjectID, pairs []materialize.Pair) (filter, update bson.D) {
	each := make(bson.A, len(pairs))
	for i, p := range pairs {
		each[i] = keyPair(p)
	}
	return bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$addToSet", Value: bson.D{{Key: "pairs", Value: bson.D{{Key: "$each", Value: each}}}}}}
}

// userStatsPipeline counts the derived user fields of the named users on
// the server (Source.UserStats), over the index user_1_... ($match on its
// prefix): per user {_id: user, n: judged submissions, ac: judged with
// score 100, first: [{p: problem, f: {t: timestamp, i: _id}}] the first
// AC submission of each problem by (timestamp, _id), other: [[_id...]]}.
//
// Only submissions whose fields have the types Back-End writes are
// counted here ("plain": _id an ObjectId, user a string, problem an int or
// long, timestamp a date, languageType, status and score an int, a long,
// null or missing). Every other submission of the users is listed in
// other, uncounted: the caller reads those by _id and decodes them with
// materialize.DecodeSubmission, so whole doubles, malformed documents and
// every other edge case follow the Go decoder exactly. On plain documents
// the rule is materialize's: status missing or null reads -2 and score -1;
// judged is status not -2 and not -1, or status -1 with score >= 0 (a
// rejudge in flight); AC is judged with score == 100; languageType does
// not matter (handwritten submissions count on the user).
//
// $min ignores null and $push skips missing ($$REMOVE) values; documents
// {t, i} compare field by field, t first, so $min picks the earliest
// (timestamp, _id), and the $sort on it before the second $group makes
// order (each AC problem once, by its first AC submission) exactly
// AC_problem_ids when other is empty. Only a user with documents in other
// gets first, the (timestamp, _id) of each problem's first AC submission,
// to merge them with: the common case transfers a few bytes per solved
// problem.
func userStatsPipeline(users []string) bson.A {
	typeIn := func(field string, types ...string) bson.D {
		ts := make(bson.A, len(types))
		for i, t := range types {
			ts[i] = t
		}
		return bson.D{{Key: "$in", Value: bson.A{bson.D{{Key: "$type", Value: field}}, ts}}}
	}
	plain := bson.D{{Key: "$and", Value: bson.A{
		isType("$_id", "objectId"),
		isType("$user", "string"),
		typeIn("$problem", "int", "long"),
		isType("$timestamp", "date"),
		typeIn("$languageType", "missing", "null", "int", "long"),
		typeIn("$status", "missing", "null", "int", "long"),
		typeIn("$score", "missing", "null", "int", "long"),
	}}}
	status := bson.D{{Key: "$ifNull", Value: bson.A{"$status", int32(materialize.StatusCreated)}}}
	score := bson.D{{Key: "$ifNull", Value: bson.A{"$score", int32(-1)}}}
	eq := func(a, b any) bson.D { return bson.D{{Key: "$eq", Value: bson.A{a, b}}} }
	judged := cond(eq(status, int32(materialize.StatusCreated)), false,
		cond(eq(status, int32(materialize.StatusPending)),
			bson.D{{Key: "$gt", Value: bson.A{score, int32(-1)}}},
			true))
	countJudged := bson.D{{Key: "$and", Value: bson.A{plain, judged}}}
	countAC := bson.D{{Key: "$and", Value: bson.A{plain, judged, eq(score, int32(100))}}}
	hasOther := bson.D{{Key: "$gt", Value: bson.A{bson.D{{Key: "$size", Value: "$other"}}, int32(0)}}}
	return bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "user", Value: inValues(users)}}}},
		bson.D{{Key: "$group", Value: bson.D{
			// u is null unless user is a string: the server matches, groups
			// and sorts a symbol (and $match an array holding the name)
			// as equal to the name, and the second $group's _id is its
			// first document's, which must be a counted user's string.
			{Key: "_id", Value: bson.D{{Key: "u", Value: cond(isType("$user", "string"), "$user", nil)}, {Key: "p", Value: "$problem"}, {Key: "ok", Value: plain}}},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: cond(countJudged, int32(1), int32(0))}}},
			{Key: "ac", Value: bson.D{{Key: "$sum", Value: cond(countAC, int32(1), int32(0))}}},
			{Key: "first", Value: bson.D{{Key: "$min", Value: cond(countAC,
				bson.D{{Key: "t", Value: "$timestamp"}, {Key: "i", Value: "$_id"}}, nil)}}},
			{Key: "other", Value: bson.D{{Key: "$push", Value: cond(plain, "$$REMOVE", "$_id")}}},
		}}},
		bson.D{{Key: "$sort", Value: bson.D{{Key: "first", Value: 1}}}},
		bson.D{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: "$_id.u"},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: "$n"}}},
			{Key: "ac", Value: bson.D{{Key: "$sum", Value: "$ac"}}},
			{Key: "order", Value: bson.D{{Key: "$push", Value: cond(isType("$first", "object"), "$_id.p", "$$REMOVE")}}},
			{Key: "first", Value: bson.D{{Key: "$push", Value: cond(isType("$first", "object"),
				bson.D{{Key: "p", Value: "$_id.p"}, {Key: "f", Value: "$first"}}, "$$REMOVE")}}},
			{Key: "other", Value: bson.D{{Key: "$push", Value: cond("$_id.ok", "$$REMOVE", "$other")}}},
		}}},
		bson.D{{Key: "$project", Value: bson.D{
			{Key: "n", Value: 1}, {Key: "ac", Value: 1}, {Key: "other", Value: 1},
			{Key: "order", Value: cond(hasOther, "$$REMOVE", "$order")},
			{Key: "first", Value: cond(hasOther, "$first", "$$REMOVE")},
		}}},
	}
}
