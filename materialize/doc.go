// Package materialize is the pure domain of the materializer: it decodes
// Back-End's source documents, derives the values Back-End's
// finish_judging would have produced (user counts, AC_problem_ids and
// homework studentStatus entries, with the late penalty), and extracts the
// keys a change makes dirty.
//
// Nothing here performs I/O. Callers hand in decoded documents (or raw
// BSON to decode) and receive plain values; the watch package moves them
// to and from MongoDB or an in-memory store.
//
// The contract is docs/derivation-spec.md. In short: the derived state
// equals what Back-End's Submission.finish_judging (mongo/submission.py)
// and User.add_submission (mongo/user.py) would produce if each ran exactly
// once for every judged submission, taken in (timestamp, _id) order, from
// default values, against the current homework and problem configuration.
// The unit of recomputation is the pair (user, problem) for studentStatus
// entries and the user for the counts.
package materialize
