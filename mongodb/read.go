package mongodb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/watch"
)

// Tags of the parts of a combined Read: each result document comes as
// {p: <tag>, d: <the part's document as its own query returns it>}. One
// byte each, since every document of the reply repeats its tag.
const (
	partSubmissions = "s" // Submissions(nil, Pairs)
	partStats       = "t" // UserStats(Users)
	partUsers       = "u" // Users(Users)
	partProblems    = "p" // Problems(Problems)
	partHomeworks   = "h" // Homeworks(Homeworks, HomeworkUsers)
)

// readBatchSize is the cursor batch size of a combined Read, in the
// aggregate and in its getMores: no count limit, so the first reply holds
// every result up to the 16 MiB a reply may hold (the server's default
// first batch is 101 documents, and a user's submissions to one problem
// can be more). A result over 16 MiB continues in getMores on the same
// cursor: more round trips, the same documents.
const readBatchSize = math.MaxInt32

// readPart is one part of a combined Read: the stages its separate method
// sends, on its collection.
type readPart struct {
	tag    string
	name   string // in errors
	coll   *mongo.Collection
	stages bson.A
}

// readParts returns the parts r names (an empty part is not read), each
// with the stages of the one query its separate method sends for it;
// ok is false when a part needs more than one query (over queryTerms
// terms), which Read leaves to ReadSeparately: such a batch holds
// hundreds of landings, and its few more round trips are nothing per
// landing.
func (d *DB) readParts(r *watch.Reads) (parts []readPart, ok bool) {
	if len(r.Pairs) > 0 {
		fs := submissionFilters(nil, r.Pairs, queryTerms)
		if len(fs) != 1 {
			return nil, false
		}
		parts = append(parts, readPart{partSubmissions, "submissions", d.submissions, findStages(fs[0], submissionProjection)})
	}
	if len(r.Users) > queryTerms || len(r.Problems) > queryTerms || len(r.Homeworks) > queryTerms {
		return nil, false
	}
	if len(r.Users) > 0 {
		parts = append(parts,
			readPart{partStats, "user stats", d.submissions, userStatsPipeline(r.Users)},
			readPart{partUsers, "users", d.users, findStages(idIn(r.Users), userProjection)})
	}
	if len(r.Problems) > 0 {
		parts = append(parts, readPart{partProblems, "problems", d.problems, findStages(idIn(r.Problems), problemProjection)})
	}
	if len(r.Homeworks) > 0 {
		parts = append(parts, readPart{partHomeworks, "homeworks", d.homeworks, homeworkPipeline(r.Homeworks, r.HomeworkUsers)})
	}
	return parts, true
}

// wrapStage is {$replaceWith: {p: tag, d: "$$ROOT"}} (MongoDB 4.2+): the
// document as the part's stages left it, untouched, under d ($$ROOT is
// the whole current document; tag is a plain string, not a field path).
func wrapStage(tag string) bson.D {
	return bson.D{{Key: "$replaceWith", Value: bson.D{{Key: "p", Value: tag}, {Key: "d", Value: "$$ROOT"}}}}
}

// readPipeline is the one aggregate of a combined Read, run on parts[0]'s
// collection: that part's stages, then a $unionWith (MongoDB 4.4+) of
// each other part's collection with its stages, each part's documents
// wrapped by wrapStage. $unionWith returns its input's documents, then
// its sub-pipeline's (an empty or missing base collection included), and
// the server copies a $match, $project or $replaceWith that follows a
// $unionWith into its sub-pipeline (DocumentSourceUnionWith::doOptimizeAt);
// here only another $unionWith, or nothing, follows one, so each part's
// stages run as written, on its own collection.
func readPipeline(parts []readPart) bson.A {
	p := append(append(bson.A{}, parts[0].stages...), wrapStage(parts[0].tag))
	for _, x := range parts[1:] {
		p = append(p, bson.D{{Key: "$unionWith", Value: bson.D{
			{Key: "coll", Value: x.coll.Name()},
			{Key: "pipeline", Value: append(append(bson.A{}, x.stages...), wrapStage(x.tag))},
		}}})
	}
	return p
}

// readCollector decodes the results of a combined Read into the
// collectors of the separate methods, part by part.
type readCollector struct {
	subs  *submissionsPart
	stats *userStats
	users usersPart
	probs *problemsPart
	hws   *homeworksPart
}

func newReadCollector(r *watch.Reads) *readCollector {
	c := &readCollector{}
	if len(r.Pairs) > 0 {
		c.subs = newSubmissionsPart()
	}
	if len(r.Users) > 0 {
		c.stats = newUserStats(r.Users)
		c.users = make(usersPart, len(r.Users))
	}
	if len(r.Problems) > 0 {
		c.probs = newProblemsPart(len(r.Problems))
	}
	if len(r.Homeworks) > 0 {
		c.hws = newHomeworksPart(len(r.Homeworks))
	}
	return c
}

// add takes one result {p, d} to its part's collector.
func (c *readCollector) add(raw bson.Raw) error {
	tag, tok := raw.Lookup("p").StringValueOK()
	doc, dok := raw.Lookup("d").DocumentOK()
	if !tok || !dok {
		return fmt.Errorf("result %v is not {p: <part>, d: <document>}", raw)
	}
	switch {
	case tag == partSubmissions && c.subs != nil:
		return c.subs.add(doc)
	case tag == partStats && c.stats != nil:
		return c.stats.add(doc)
	case tag == partUsers && c.users != nil:
		return c.users.add(doc)
	case tag == partProblems && c.probs != nil:
		return c.probs.add(doc)
	case tag == partHomeworks && c.hws != nil:
		return c.hws.add(doc)
	}
	return fmt.Errorf("result of part %q, which was not read", tag)
}

// byIDReader reads submissions by _id (DB.SubmissionsByID).
type byIDReader func(context.Context, []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error)

// finish completes UserStats as the separate method does (the
// submissions its pipeline left to the Go decoder, read by _id with
// byID: one more round trip, only when there are such) and returns the
// result.
func (c *readCollector) finish(ctx context.Context, byID byIDReader) (*watch.ReadResult, error) {
	out := &watch.ReadResult{}
	if c.subs != nil {
		out.Submissions, out.SubmissionsBad = c.subs.subs, c.subs.bad
	}
	if c.stats != nil {
		subs, bad, err := othersOf(ctx, byID, c.stats)
		if err != nil {
			return nil, fmt.Errorf("read user stats: %w", err)
		}
		if out.Stats, out.StatsBad, err = c.stats.finish(subs, bad); err != nil {
			return nil, fmt.Errorf("read user stats: %w", err)
		}
		out.Users = c.users
	}
	if c.probs != nil {
		out.Problems, out.ProblemsBad = c.probs.out, c.probs.bad
	}
	if c.hws != nil {
		out.Homeworks, out.HomeworksBad = c.hws.out, c.hws.bad
	}
	return out, nil
}

// Read implements watch.Source in one round trip: one aggregate of every
// part of r (readPipeline), majority and causally after watch.ReadAfter
// and the daemon's own writes like every read (aggregateAs, causalCtx),
// decoded part by part by the separate methods' own collectors, so the
// result is ReadSeparately's. Exceptions, each left to ReadSeparately or
// to one more round trip, exact either way: a part over queryTerms terms
// (readParts); the submissions UserStats leaves to the Go decoder (read
// by _id, as UserStats does); a result the server refuses as too large
// (BSONObjectTooLarge, 10334), read again separately.
//
// The wrapper itself never causes the last. It adds 17 bytes to a part's
// document (the tag's element, d's header), and the server refuses a
// result document only over its internal limit, 16 MiB + 16 KiB
// ("BSONObj size: ... is invalid. Size must be between 0 and
// 16793600(16MB)"; the server's jstests/core/query/bson_size_limit.js
// returns an aggregate result over 16 MiB). A part's document is either
// a projection of a stored document (at most 16 MiB) or a UserStats
// result, which its separate read returns unwrapped: only a UserStats
// result within 17 bytes of the limit (other listing some 800,000
// undecodable submissions of one user) is refused wrapped and not
// alone, and one over it is refused by the separate read the same way.
//
// The aggregate needs find on each collection it reads (the server checks
// find on each $unionWith's collection), which the role in
// docs/install.md grants, and runs under the base collection's collation
// (the server ignores a $unionWith collection's own): Back-End's
// collections have none, which every read assumes.
func (d *DB) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	parts, ok := d.readParts(r)
	if !ok {
		return watch.ReadSeparately(ctx, d, r)
	}
	if len(parts) == 0 {
		return &watch.ReadResult{}, nil
	}
	var colls, names []string
	for _, p := range parts {
		if !slices.Contains(colls, p.coll.Name()) {
			colls = append(colls, p.coll.Name())
		}
		names = append(names, p.name)
	}
	c := newReadCollector(r)
	op := fmt.Sprintf("read %s in one aggregate of %s", strings.Join(names, ", "), strings.Join(colls, ", "))
	err := d.aggregateAs(ctx, parts[0].coll, readPipeline(parts), needsEach(colls, "find"), op, c.add,
		options.Aggregate().SetBatchSize(readBatchSize))
	var se mongo.ServerError
	if errors.As(err, &se) && se.HasErrorCode(codeBSONObjectTooLarge) {
		return watch.ReadSeparately(ctx, d, r)
	}
	if err != nil {
		return nil, err
	}
	return c.finish(ctx, d.SubmissionsByID)
}
