package mongodb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// each iterates cur, calling fn with each document, and closes it. The
// document is only valid during the call (clone it to keep it).
func each(ctx context.Context, cur *mongo.Cursor, fn func(bson.Raw) error) error {
	defer func() {
		// The close outlives a cancelled ctx (a killCursors spares the
		// server the cursor) but not closeTimeout.
		cctx, cancel := boundClose(context.WithoutCancel(ctx))
		defer cancel()
		_ = cur.Close(cctx)
	}()
	for cur.Next(ctx) {
		if err := fn(cur.Current); err != nil {
			return err
		}
	}
	return cur.Err()
}

// causalCtx returns ctx for one read on coll: when ctx carries
// watch.ReadAfter(t) or the daemon wrote already (written is not zero), a
// context holding a new causally consistent session (mongo/session.go:63
// NewSessionContext) whose operationTime is advanced to the later of t
// and written, the operationTime of the daemon's own last acknowledged
// write (writeClock; mongo/session.go:397 AdvanceOperationTime), so the
// driver sends readConcern {level: <the collection's, majority>,
// afterClusterTime: that time} (x/mongo/driver/operation.go:1637-1641):
// the server answers only once its majority-committed snapshot includes
// the batch's last event and the daemon's own writes. Without the
// latter, a read after a fail-over could come from a snapshot before the
// daemon's last write (a new primary's commit point trails the old one's
// until it commits in its own term), and a value equal to that stale one
// would be skipped as "already stored"; that holds for a rebuild's scans
// too, which carry no ReadAfter. Reads stay on the primary (the client's
// read preference). end ends the session.
func causalCtx(ctx context.Context, coll *mongo.Collection, written bson.Timestamp) (_ context.Context, end func(), err error) {
	t, ok := watch.ReadAfter(ctx)
	if !ok && written.IsZero() {
		return ctx, func() {}, nil
	}
	if t.Before(written) {
		t = written
	}
	sess, err := coll.Database().Client().StartSession(options.Session().SetCausalConsistency(true))
	if err != nil {
		return nil, nil, fmt.Errorf("start session: %w", err)
	}
	if err := sess.AdvanceOperationTime(&t); err != nil {
		sess.EndSession(ctx)
		return nil, nil, fmt.Errorf("advance session operation time: %w", err)
	}
	return mongo.NewSessionContext(ctx, sess), func() { sess.EndSession(context.WithoutCancel(ctx)) }, nil
}

// find runs a find on coll and calls fn with each document (causally
// after watch.ReadAfter(ctx) when set and after the daemon's own writes).
func (d *DB) find(ctx context.Context, coll *mongo.Collection, filter any, opts *options.FindOptionsBuilder, fn func(bson.Raw) error) error {
	if opts == nil {
		opts = options.Find()
	}
	db, op, n := coll.Database().Name(), "find "+coll.Name(), needs(coll.Name(), "find")
	ctx, end, err := causalCtx(ctx, coll, d.written.load())
	if err != nil {
		return fail(db, n, op, err)
	}
	defer end()
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return fail(db, n, op, err)
	}
	if err := each(ctx, cur, fn); err != nil {
		return fail(db, n, op, err)
	}
	return nil
}

// aggregate runs a pipeline on coll and calls fn with each result
// (causally after watch.ReadAfter(ctx) when set and after the daemon's
// own writes).
func (d *DB) aggregate(ctx context.Context, coll *mongo.Collection, pipeline bson.A, fn func(bson.Raw) error) error {
	return d.aggregateAs(ctx, coll, pipeline, needs(coll.Name(), "find"), "aggregate "+coll.Name(), fn)
}

// aggregateAs is aggregate with the privilege n the pipeline needs, the
// name op its errors carry, and the aggregate's options.
func (d *DB) aggregateAs(ctx context.Context, coll *mongo.Collection, pipeline bson.A, n need, op string, fn func(bson.Raw) error, opts ...options.Lister[options.AggregateOptions]) error {
	db := coll.Database().Name()
	ctx, end, err := causalCtx(ctx, coll, d.written.load())
	if err != nil {
		return fail(db, n, op, err)
	}
	defer end()
	cur, err := coll.Aggregate(ctx, pipeline, opts...)
	if err != nil {
		return fail(db, n, op, err)
	}
	if err := each(ctx, cur, fn); err != nil {
		return fail(db, n, op, err)
	}
	return nil
}

// decodeError returns err as a *DecodeError. materialize's decoders only
// return those; anything else is wrapped into one so it is still reported.
func decodeError(coll string, doc bson.Raw, err error) *materialize.DecodeError {
	var de *materialize.DecodeError
	if errors.As(err, &de) {
		return de
	}
	id := "?"
	if v, e := doc.LookupErr("_id"); e == nil {
		id = v.String()
	}
	return &materialize.DecodeError{Collection: coll, ID: id, Field: "", Reason: err.Error()}
}

// idKey identifies a document by its _id's type and bytes, for
// de-duplicating results of several queries.
func idKey(doc bson.Raw) string {
	v, err := doc.LookupErr("_id")
	if err != nil {
		return ""
	}
	return string(rune(v.Type)) + string(v.Value)
}

// Submissions implements watch.Source: the submissions of the named users
// and pairs, in as many queries of at most 500 terms as needed, projected
// to the fields the derivation reads. Each submission is returned once;
// undecodable ones are returned in bad.
func (d *DB) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	p := newSubmissionsPart()
	opts := options.Find().SetProjection(submissionProjection)
	for _, f := range submissionFilters(users, pairs, queryTerms) {
		if err := d.find(ctx, d.submissions, f, opts, p.add); err != nil {
			return nil, nil, fmt.Errorf("read submissions: %w", err)
		}
	}
	return p.subs, p.bad, nil
}

// submissionsPart collects the results of Submissions' queries: each
// submission once (by _id), undecodable ones in bad.
type submissionsPart struct {
	subs []materialize.Submission
	bad  []*materialize.DecodeError
	seen map[string]bool
}

func newSubmissionsPart() *submissionsPart { return &submissionsPart{seen: make(map[string]bool)} }

func (p *submissionsPart) add(raw bson.Raw) error {
	k := idKey(raw)
	if p.seen[k] {
		return nil
	}
	p.seen[k] = true
	s, err := materialize.DecodeSubmission(raw)
	if err != nil {
		p.bad = append(p.bad, decodeError(materialize.CollSubmission, raw, err))
		return nil
	}
	p.subs = append(p.subs, s)
	return nil
}

// SubmissionsByID implements watch.Source: the named submissions that
// exist, read with _id $in queries of at most 500 ids.
func (d *DB) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	var subs []materialize.Submission
	var bad []*materialize.DecodeError
	opts := options.Find().SetProjection(submissionProjection)
	for chunk := range slices.Chunk(ids, queryTerms) {
		err := d.find(ctx, d.submissions, idIn(chunk), opts, func(raw bson.Raw) error {
			s, err := materialize.DecodeSubmission(raw)
			if err != nil {
				bad = append(bad, decodeError(materialize.CollSubmission, raw, err))
				return nil
			}
			subs = append(subs, s)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read submissions by id: %w", err)
		}
	}
	return subs, bad, nil
}

// Problems implements watch.Source: the named problems that exist
// (_id and homeworks only); undecodable ones are returned in bad.
func (d *DB) Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	p := newProblemsPart(len(ids))
	opts := options.Find().SetProjection(problemProjection)
	for chunk := range slices.Chunk(ids, queryTerms) {
		if err := d.find(ctx, d.problems, idIn(chunk), opts, p.add); err != nil {
			return nil, nil, fmt.Errorf("read problems: %w", err)
		}
	}
	return p.out, p.bad, nil
}

// problemsPart collects the results of Problems' queries.
type problemsPart struct {
	out map[int64]*materialize.Problem
	bad []*materialize.DecodeError
}

func newProblemsPart(n int) *problemsPart {
	return &problemsPart{out: make(map[int64]*materialize.Problem, n)}
}

func (p *problemsPart) add(raw bson.Raw) error {
	pr, err := materialize.DecodeProblem(raw)
	if err != nil {
		p.bad = append(p.bad, decodeError(materialize.CollProblem, raw, err))
		return nil
	}
	p.out[pr.ID] = &pr
	return nil
}

// ProblemsListing implements watch.Source: for each named homework, the
// problems whose homeworks list contains it (problem.find({homeworks:
// {$in: ids}}), served by the homeworks_1 index). Undecodable problems are
// skipped: they list nothing the derivation can use.
func (d *DB) ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error) {
	out := make(map[bson.ObjectID][]int64)
	opts := options.Find().SetProjection(problemProjection)
	for chunk := range slices.Chunk(homeworks, queryTerms) {
		want := make(map[bson.ObjectID]bool, len(chunk))
		for _, h := range chunk {
			want[h] = true
		}
		err := d.find(ctx, d.problems, problemsListingFilter(chunk), opts, func(raw bson.Raw) error {
			p, err := materialize.DecodeProblem(raw)
			if err != nil {
				return nil
			}
			for _, h := range p.Homeworks {
				if want[h] && !slices.Contains(out[h], p.ID) {
					out[h] = append(out[h], p.ID)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read problems listing homeworks: %w", err)
		}
	}
	return out, nil
}

// homeworkDoc decodes a homework as homeworkPipeline returns it (raw is
// owned by the caller and kept by the result) and fills Stored with every
// entry value of the users it holds.
func homeworkDoc(raw bson.Raw) (*watch.HomeworkDoc, error) {
	h, err := materialize.DecodeHomework(raw)
	if err != nil {
		return nil, err
	}
	doc := &watch.HomeworkDoc{Homework: h, Stored: make(map[string]map[string]bson.RawValue, len(h.Students))}
	ss, ok := raw.Lookup(materialize.FieldStudentStatus).DocumentOK()
	if !ok {
		return doc, nil
	}
	users, err := ss.Elements()
	if err != nil {
		return doc, nil // DecodeHomework read it; cannot happen
	}
	for _, ue := range users {
		ud, ok := ue.Value().DocumentOK()
		if !ok {
			continue
		}
		probs, err := ud.Elements()
		if err != nil {
			continue
		}
		m := make(map[string]bson.RawValue, len(probs))
		for _, pe := range probs {
			m[pe.Key()] = pe.Value()
		}
		doc.Stored[ue.Key()] = m
	}
	return doc, nil
}

// readHomeworks runs homeworkPipeline and decodes each result.
func (d *DB) readHomeworks(ctx context.Context, ids []bson.ObjectID, users []string, fn func(*watch.HomeworkDoc), bad func(*materialize.DecodeError)) error {
	return d.aggregate(ctx, d.homeworks, homeworkPipeline(ids, users), homeworkResult(fn, bad))
}

// homeworkResult returns the function decoding one result of
// homeworkPipeline (cloned: the result keeps it) into fn, or into bad.
func homeworkResult(fn func(*watch.HomeworkDoc), bad func(*materialize.DecodeError)) func(bson.Raw) error {
	return func(raw bson.Raw) error {
		raw = slices.Clone(raw)
		doc, err := homeworkDoc(raw)
		if err != nil {
			bad(decodeError(materialize.CollHomework, raw, err))
			return nil
		}
		fn(doc)
		return nil
	}
}

// Homeworks implements watch.Source: the named homeworks that exist, with
// studentStatus restricted server-side to users (every user when users is
// nil). Undecodable homeworks are returned in bad and left out of the map;
// a user's value that is not a document is in the homework's Skipped.
func (d *DB) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	p := newHomeworksPart(len(ids))
	for chunk := range slices.Chunk(ids, queryTerms) {
		if err := d.aggregate(ctx, d.homeworks, homeworkPipeline(chunk, users), p.add); err != nil {
			return nil, nil, fmt.Errorf("read homeworks: %w", err)
		}
	}
	return p.out, p.bad, nil
}

// homeworksPart collects the results of Homeworks' queries.
type homeworksPart struct {
	out map[bson.ObjectID]*watch.HomeworkDoc
	bad []*materialize.DecodeError
	add func(bson.Raw) error
}

func newHomeworksPart(n int) *homeworksPart {
	p := &homeworksPart{out: make(map[bson.ObjectID]*watch.HomeworkDoc, n)}
	p.add = homeworkResult(func(h *watch.HomeworkDoc) { p.out[h.ID] = h },
		func(e *materialize.DecodeError) { p.bad = append(p.bad, e) })
	return p
}

// EntryKeys implements watch.Source: the (user, problem key) of every
// entry of each named homework, read with an aggregation that returns key
// names only.
func (d *DB) EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]watch.EntryRef, []*materialize.DecodeError, error) {
	out := make(map[bson.ObjectID][]watch.EntryRef, len(homeworks))
	var bad []*materialize.DecodeError
	for chunk := range slices.Chunk(homeworks, queryTerms) {
		err := d.aggregate(ctx, d.homeworks, entryKeysPipeline(chunk), func(raw bson.Raw) error {
			id, ok := raw.Lookup("_id").ObjectIDOK()
			if !ok {
				return nil
			}
			idStr := raw.Lookup("_id").String()
			switch t, _ := raw.Lookup("ssType").StringValueOK(); t {
			case "object", "missing", "null", "":
			default:
				bad = append(bad, &materialize.DecodeError{Collection: materialize.CollHomework, ID: idStr,
					Field: materialize.FieldStudentStatus, Reason: "want a document, have BSON " + t})
			}
			refs := []watch.EntryRef{}
			for _, uk := range arrayDocs(raw.Lookup("keys")) {
				u, ok := uk.Lookup("u").StringValueOK()
				if !ok {
					continue
				}
				if isDoc, ok := uk.Lookup("doc").BooleanOK(); ok && !isDoc {
					bad = append(bad, &materialize.DecodeError{Collection: materialize.CollHomework, ID: idStr,
						Field: materialize.FieldStudentStatus + "." + u, Reason: "want a document"})
					continue
				}
				for _, pk := range arrayStrings(uk.Lookup("p")) {
					refs = append(refs, watch.EntryRef{User: u, ProblemKey: pk})
				}
			}
			out[id] = refs
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read entry keys: %w", err)
		}
	}
	return out, bad, nil
}

// EntriesForProblems implements watch.Source: every (homework, user) with
// an entry keyed str(p), for each named problem, over all homeworks. The
// aggregation scans the homework collection (entry keys cannot be indexed)
// but returns only the matching names.
func (d *DB) EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error) {
	out := make(map[int64][]materialize.HomeworkUser, len(problems))
	for chunk := range slices.Chunk(problems, queryTerms) {
		keys := make([]string, len(chunk))
		byKey := make(map[string]int64, len(chunk))
		for i, p := range chunk {
			keys[i] = materialize.ProblemKey(p)
			byKey[keys[i]] = p
		}
		err := d.aggregate(ctx, d.homeworks, entriesForProblemsPipeline(keys), func(raw bson.Raw) error {
			id, ok := raw.Lookup("_id").ObjectIDOK()
			if !ok {
				return nil
			}
			for _, hit := range arrayDocs(raw.Lookup("hits")) {
				u, ok := hit.Lookup("u").StringValueOK()
				if !ok {
					continue
				}
				for _, pk := range arrayStrings(hit.Lookup("p")) {
					if p, ok := byKey[pk]; ok {
						out[p] = append(out[p], materialize.HomeworkUser{Homework: id, User: u})
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read entries for problems: %w", err)
		}
	}
	return out, nil
}

// Users implements watch.Source: the stored derived fields of the named
// users that have a document.
func (d *DB) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	p := usersPart(make(map[string]watch.StoredUser, len(names)))
	opts := options.Find().SetProjection(userProjection)
	for chunk := range slices.Chunk(names, queryTerms) {
		if err := d.find(ctx, d.users, idIn(chunk), opts, p.add); err != nil {
			return nil, fmt.Errorf("read users: %w", err)
		}
	}
	return p, nil
}

// usersPart collects the results of Users' queries (a document whose _id
// is not a username names no user).
type usersPart map[string]watch.StoredUser

func (p usersPart) add(raw bson.Raw) error {
	name, err := materialize.DecodeUserID(raw)
	if err != nil {
		return nil
	}
	st, ok := materialize.DecodeUserStats(raw)
	p[name] = watch.StoredUser{Stats: st, OK: ok}
	return nil
}

// arrayDocs returns the document elements of an array value (others are
// skipped); nil when v is not an array.
func arrayDocs(v bson.RawValue) []bson.Raw {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	out := make([]bson.Raw, 0, len(vals))
	for _, x := range vals {
		if d, ok := x.DocumentOK(); ok {
			out = append(out, d)
		}
	}
	return out
}

// arrayStrings returns the string elements of an array value.
func arrayStrings(v bson.RawValue) []string {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(vals))
	for _, x := range vals {
		if s, ok := x.StringValueOK(); ok {
			out = append(out, s)
		}
	}
	return out
}

// UserStats implements watch.Source: userStatsPipeline per 500 users (one
// small document per user, whatever the user submitted), then the
// submissions it could not count (listed in other) read by _id and
// decoded here, so they count, or are reported malformed, exactly as
// materialize decodes them.
func (d *DB) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	r := newUserStats(users)
	for chunk := range slices.Chunk(users, queryTerms) {
		if err := d.aggregate(ctx, d.submissions, userStatsPipeline(chunk), r.add); err != nil {
			return nil, nil, fmt.Errorf("read user stats: %w", err)
		}
	}
	subs, bad, err := othersOf(ctx, d.SubmissionsByID, r)
	if err != nil {
		return nil, nil, fmt.Errorf("read user stats: %w", err)
	}
	return r.finish(subs, bad)
}

// othersOf reads with byID the submissions userStatsPipeline left to the
// Go decoder (none: no round trip).
func othersOf(ctx context.Context, byID byIDReader, r *userStats) ([]materialize.Submission, []*materialize.DecodeError, error) {
	if len(r.others) == 0 {
		return nil, nil, nil
	}
	return byID(ctx, r.others)
}

// userStats combines userStatsPipeline's results with the submissions it
// left to the Go decoder.
type userStats struct {
	tally  map[string]*materialize.UserTally
	exact  map[string]materialize.UserStats // users with nothing in other: the server's result as is
	others []bson.ObjectID
	bad    []*materialize.DecodeError
}

func newUserStats(users []string) *userStats {
	r := &userStats{tally: make(map[string]*materialize.UserTally, len(users)), exact: make(map[string]materialize.UserStats)}
	for _, u := range users {
		r.tally[u] = new(materialize.UserTally)
	}
	return r
}

// add takes one result document of userStatsPipeline.
func (r *userStats) add(raw bson.Raw) error {
	for _, v := range arrayValues(raw.Lookup("other")) {
		for _, id := range arrayValues(v) {
			if oid, ok := id.ObjectIDOK(); ok {
				r.others = append(r.others, oid)
			} else {
				// Not an ObjectId: SubmissionsByID cannot name it, and
				// DecodeSubmission rejects it on _id before any other
				// field, so the decoder's report on {_id} alone is the
				// report on the document.
				doc, err := bson.Marshal(bson.D{{Key: "_id", Value: id}})
				if err != nil {
					return fmt.Errorf("user stats: _id %v: %w", id, err)
				}
				_, err = materialize.DecodeSubmission(doc)
				var de *materialize.DecodeError
				if !errors.As(err, &de) {
					return fmt.Errorf("user stats: _id %v: not rejected by the decoder: %v", id, err)
				}
				r.bad = append(r.bad, de)
			}
		}
	}
	u, ok := raw.Lookup("_id").StringValueOK()
	t := r.tally[u]
	if !ok || t == nil {
		return nil // a user value that is not one of the names: only other counts
	}
	n, nok := materialize.IntValue(raw.Lookup("n"))
	ac, aok := materialize.IntValue(raw.Lookup("ac"))
	if !nok || !aok {
		return fmt.Errorf("user stats of %q: counts are not integers", u)
	}
	if order, ok := raw.Lookup("order").ArrayOK(); ok {
		// Nothing left to the Go decoder: order is AC_problem_ids.
		vals, err := order.Values()
		if err != nil {
			return fmt.Errorf("user stats of %q: unreadable order: %w", u, err)
		}
		st := materialize.UserStats{Submission: n, ACSubmission: ac, ACProblemIDs: make([]int64, 0, len(vals))}
		for _, v := range vals {
			p, ok := materialize.IntValue(v)
			if !ok {
				return fmt.Errorf("user stats of %q: AC problem %v is not an integer", u, v)
			}
			st.ACProblemIDs = append(st.ACProblemIDs, p)
		}
		r.exact[u] = st
		return nil
	}
	t.AddCounted(n, ac)
	for _, f := range arrayDocs(raw.Lookup("first")) {
		p, pok := materialize.IntValue(f.Lookup("p"))
		first, fok := f.Lookup("f").DocumentOK()
		if !pok || !fok {
			return fmt.Errorf("user stats of %q: unreadable first AC %v", u, f)
		}
		ts, tok := first.Lookup("t").DateTimeOK()
		id, iok := first.Lookup("i").ObjectIDOK()
		if !tok || !iok {
			return fmt.Errorf("user stats of %q: unreadable first AC %v", u, f)
		}
		t.AddFirstAC(p, ts, id)
	}
	return nil
}

// finish adds the submissions read by _id (others) and returns the stats.
func (r *userStats) finish(others []materialize.Submission, bad []*materialize.DecodeError) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	for i := range others {
		if t := r.tally[others[i].User]; t != nil {
			t.Add(&others[i])
		}
	}
	out := make(map[string]materialize.UserStats, len(r.tally))
	for u, t := range r.tally {
		if st, ok := r.exact[u]; ok {
			out[u] = st
			continue
		}
		out[u] = t.Stats()
	}
	return out, append(r.bad, bad...), nil
}

// arrayValues returns the elements of an array value; nil when v is not
// an array.
func arrayValues(v bson.RawValue) []bson.RawValue {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	return vals
}
