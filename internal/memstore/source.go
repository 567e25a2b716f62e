package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	"github.com/normal-oj/noj-materializer/resume"
	"github.com/normal-oj/noj-materializer/watch"
)

func (s *Store) read() error {
	s.stats.Reads++
	return s.fail("read")
}

// Submissions implements watch.Source.
func (s *Store) Submissions(ctx context.Context, users []string, pairs []materialize.Pair) ([]materialize.Submission, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	uset := make(map[string]bool, len(users))
	for _, u := range users {
		uset[u] = true
	}
	pset := make(map[materialize.Pair]bool, len(pairs))
	for _, p := range pairs {
		pset[p] = true
	}
	var out []materialize.Submission
	var bad []*materialize.DecodeError
	for _, raw := range s.candidates(users, pairs) {
		sub, err := materialize.DecodeSubmission(raw)
		if err != nil {
			// A malformed submission matches the query when its user does.
			if slices.ContainsFunc(queryUsers(raw), func(u string) bool { return uset[u] }) {
				bad = append(bad, err.(*materialize.DecodeError))
			}
			continue
		}
		if uset[sub.User] || pset[materialize.Pair{User: sub.User, Problem: sub.Problem}] {
			out = append(out, sub)
		}
	}
	return out, bad, nil
}

// UserStats implements watch.Source: materialize.DeriveUser over the
// user's decodable submissions; a malformed one is reported when its user
// is a named user (the same rule as Submissions).
func (s *Store) UserStats(ctx context.Context, users []string) (map[string]materialize.UserStats, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	tally := make(map[string]*materialize.UserTally, len(users))
	for _, u := range users {
		tally[u] = new(materialize.UserTally)
	}
	var bad []*materialize.DecodeError
	for _, raw := range s.candidates(users, nil) {
		sub, err := materialize.DecodeSubmission(raw)
		if err != nil {
			if slices.ContainsFunc(queryUsers(raw), func(u string) bool { return tally[u] != nil }) {
				bad = append(bad, err.(*materialize.DecodeError))
			}
			continue
		}
		if t := tally[sub.User]; t != nil {
			t.Add(&sub)
		}
	}
	out := make(map[string]materialize.UserStats, len(users))
	for u, t := range tally {
		out[u] = t.Stats()
	}
	return out, bad, nil
}

// SubmissionsByID implements watch.Source.
func (s *Store) SubmissionsByID(ctx context.Context, ids []bson.ObjectID) ([]materialize.Submission, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	var out []materialize.Submission
	var bad []*materialize.DecodeError
	for _, id := range ids {
		t, data, _ := bson.MarshalValue(id)
		raw, ok := s.colls[materialize.CollSubmission][docKey(bson.RawValue{Type: t, Value: data})]
		if !ok {
			continue
		}
		sub, err := materialize.DecodeSubmission(raw)
		if err != nil {
			bad = append(bad, err.(*materialize.DecodeError))
			continue
		}
		out = append(out, sub)
	}
	return out, bad, nil
}

// Problems implements watch.Source.
func (s *Store) Problems(ctx context.Context, ids []int64) (map[int64]*materialize.Problem, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	out := make(map[int64]*materialize.Problem)
	var bad []*materialize.DecodeError
	for _, raw := range s.all(materialize.CollProblem) {
		p, err := materialize.DecodeProblem(raw)
		if err != nil {
			if id, ok := raw.Lookup("_id").AsInt64OK(); ok && want[id] {
				bad = append(bad, err.(*materialize.DecodeError))
			}
			continue
		}
		if want[p.ID] {
			out[p.ID] = &p
		}
	}
	return out, bad, nil
}

// ProblemsListing implements watch.Source.
func (s *Store) ProblemsListing(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	out := make(map[bson.ObjectID][]int64)
	for _, raw := range s.all(materialize.CollProblem) {
		p, err := materialize.DecodeProblem(raw)
		if err != nil {
			continue
		}
		for _, h := range homeworks {
			if slices.Contains(p.Homeworks, h) && !slices.Contains(out[h], p.ID) {
				out[h] = append(out[h], p.ID)
			}
		}
	}
	return out, nil
}

// homeworkDoc decodes a homework with the stored entry values of users
// (every user when users is nil).
func homeworkDoc(raw bson.Raw, users map[string]bool) (*watch.HomeworkDoc, error) {
	h, err := materialize.DecodeHomework(raw)
	if err != nil {
		return nil, err
	}
	d := &watch.HomeworkDoc{Homework: h, Stored: make(map[string]map[string]bson.RawValue)}
	for u := range d.Students {
		if users != nil && !users[u] {
			delete(d.Students, u)
		}
	}
	// One pass over studentStatus (a Lookup per user would be quadratic);
	// like DecodeHomework, a later duplicate key wins.
	if ss, err := raw.LookupErr(materialize.FieldStudentStatus); err == nil {
		if ssd, ok := ss.DocumentOK(); ok {
			elems, _ := ssd.Elements()
			for _, ue := range elems {
				if _, want := d.Students[ue.Key()]; !want {
					continue
				}
				ud, ok := ue.Value().DocumentOK()
				if !ok {
					continue
				}
				pes, _ := ud.Elements()
				m := make(map[string]bson.RawValue, len(pes))
				for _, e := range pes {
					m[e.Key()] = e.Value()
				}
				d.Stored[ue.Key()] = m
			}
		}
	}
	if users != nil {
		d.Skipped = slices.DeleteFunc(d.Skipped, func(e *materialize.DecodeError) bool {
			for u := range users {
				if e.Field == materialize.FieldStudentStatus+"."+u {
					return false
				}
			}
			return true
		})
	}
	return d, nil
}

// Homeworks implements watch.Source.
func (s *Store) Homeworks(ctx context.Context, ids []bson.ObjectID, users []string) (map[bson.ObjectID]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	var uset map[string]bool
	if users != nil {
		uset = make(map[string]bool, len(users))
		for _, u := range users {
			uset[u] = true
		}
	}
	out := make(map[bson.ObjectID]*watch.HomeworkDoc)
	var bad []*materialize.DecodeError
	for _, id := range ids {
		t, data, _ := bson.MarshalValue(id)
		raw, ok := s.colls[materialize.CollHomework][docKey(bson.RawValue{Type: t, Value: data})]
		if !ok {
			continue
		}
		d, err := homeworkDoc(raw, uset)
		if err != nil {
			bad = append(bad, err.(*materialize.DecodeError))
			continue
		}
		out[id] = d
	}
	return out, bad, nil
}

// EntryKeys implements watch.Source.
func (s *Store) EntryKeys(ctx context.Context, homeworks []bson.ObjectID) (map[bson.ObjectID][]watch.EntryRef, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	out := make(map[bson.ObjectID][]watch.EntryRef)
	var bad []*materialize.DecodeError
	for _, id := range homeworks {
		t, data, _ := bson.MarshalValue(id)
		raw, ok := s.colls[materialize.CollHomework][docKey(bson.RawValue{Type: t, Value: data})]
		if !ok {
			continue
		}
		h, err := materialize.DecodeHomework(raw)
		if err != nil {
			bad = append(bad, err.(*materialize.DecodeError))
			continue
		}
		bad = append(bad, h.Skipped...)
		for u, ps := range h.Students {
			for pk := range ps {
				out[id] = append(out[id], watch.EntryRef{User: u, ProblemKey: pk})
			}
		}
	}
	return out, bad, nil
}

// EntriesForProblems implements watch.Source.
func (s *Store) EntriesForProblems(ctx context.Context, problems []int64) (map[int64][]materialize.HomeworkUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	out := make(map[int64][]materialize.HomeworkUser)
	for _, raw := range s.all(materialize.CollHomework) {
		h, err := materialize.DecodeHomework(raw)
		if err != nil {
			continue
		}
		for u, ps := range h.Students {
			for _, p := range problems {
				if _, ok := ps[materialize.ProblemKey(p)]; ok {
					out[p] = append(out[p], materialize.HomeworkUser{Homework: h.ID, User: u})
				}
			}
		}
	}
	return out, nil
}

// Users implements watch.Source.
func (s *Store) Users(ctx context.Context, names []string) (map[string]watch.StoredUser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	out := make(map[string]watch.StoredUser)
	for _, n := range names {
		raw, ok := s.colls[materialize.CollUser][userKey(n)]
		if !ok {
			continue
		}
		st, ok := materialize.DecodeUserStats(raw)
		out[n] = watch.StoredUser{Stats: st, OK: ok}
	}
	return out, nil
}

func userKey(name string) string {
	t, data, _ := bson.MarshalValue(name)
	return docKey(bson.RawValue{Type: t, Value: data})
}

// Apply implements watch.Writer. Each write is its own step for failure
// injection; a write equal to the stored value changes nothing and emits
// no event (as MongoDB's no-op updates write no oplog entry). Its
// operationTime is the cluster time of the latest event, the last one it
// emitted when it emitted any (as a write's operationTime is its last
// oplog entry's); the store is linearizable, so every later read is
// after it.
func (s *Store) Apply(ctx context.Context, w *watch.Writes) (bson.Timestamp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.apply(w); err != nil {
		return bson.Timestamp{}, err
	}
	if len(s.oplog) == 0 {
		return bson.Timestamp{}, nil
	}
	return clusterTime(len(s.oplog)), nil
}

func (s *Store) apply(w *watch.Writes) error {
	s.stats.WriteCalls++
	for _, uw := range w.Users {
		if err := s.fail("write.user"); err != nil {
			return err
		}
		k := userKey(uw.User)
		raw, ok := s.colls[materialize.CollUser][k]
		if !ok {
			continue // never create a user
		}
		if uw.Stats.MatchesStored(raw) {
			s.stats.NoopWrites++
			continue
		}
		patched, err := materialize.PatchUser(raw, uw.Stats)
		if err != nil {
			return err
		}
		s.putOwned(materialize.CollUser, k, patched)
		s.stats.UserWrites++
		id, _ := idOf(patched)
		s.emitOwn("update", materialize.CollUser, id, nil,
			[]string{materialize.FieldSubmission, materialize.FieldACSubmission, materialize.FieldACProblemIDs}, true)
	}
	// Entries are applied in order, one failure-injection step each, but a
	// homework document is re-encoded once per call however many of its
	// entries the call writes (the server applies each $set in place), so
	// a rebuild's bulk writes do not copy a large homework once per entry.
	type group struct {
		id   bson.ObjectID
		want map[string]map[string]materialize.Entry
		refs []watch.EntryRef
	}
	var groups []*group
	byHW := make(map[bson.ObjectID]*group)
	var failed error
	for _, e := range w.Entries {
		if err := s.fail("write.entry"); err != nil {
			failed = err
			break
		}
		g := byHW[e.Homework]
		if g == nil {
			g = &group{id: e.Homework, want: make(map[string]map[string]materialize.Entry)}
			byHW[e.Homework] = g
			groups = append(groups, g)
		}
		if g.want[e.User] == nil {
			g.want[e.User] = make(map[string]materialize.Entry)
		}
		g.want[e.User][e.ProblemKey] = e.Entry
		g.refs = append(g.refs, watch.EntryRef{User: e.User, ProblemKey: e.ProblemKey})
	}
	var rejected []error
	for _, g := range groups {
		t, data, _ := bson.MarshalValue(g.id)
		id := bson.RawValue{Type: t, Value: data}
		k := docKey(id)
		raw, ok := s.colls[materialize.CollHomework][k]
		err := s.applyEntries(k, raw, ok, g.want, g.refs, id)
		var tooLarge *tooLargeError
		if errors.As(err, &tooLarge) {
			rejected = append(rejected, err) // the other homeworks still go, as in an unordered bulk write
			continue
		}
		if err != nil {
			return err
		}
	}
	if failed != nil {
		return failed
	}
	if len(rejected) > 0 {
		return watch.WithClass(watch.Refused, fmt.Errorf("%d entry updates refused: %w: %w", len(rejected), errors.Join(rejected...), watch.ErrWriteRejected))
	}
	return nil
}

// applyEntries patches one homework with the entries in want and emits
// one update event per entry whose stored value changed.
func (s *Store) applyEntries(k string, raw bson.Raw, exists bool, want map[string]map[string]materialize.Entry, refs []watch.EntryRef, id bson.RawValue) error {
	if !exists || len(want) == 0 {
		return nil
	}
	stored := storedEntries(raw, want)
	var changedFields []string
	for _, r := range refs {
		// Compare before patching to know which entries change. The
		// names are kept apart: a user or problem key may hold a dot,
		// which the MongoDB adapter writes literally (entryWriteByPipeline).
		user, pk := r.User, r.ProblemKey
		if v, ok := stored[user][pk]; ok {
			if !want[user][pk].MatchesStored(v) {
				changedFields = append(changedFields, materialize.FieldStudentStatus+"."+user+"."+pk)
			} else {
				s.stats.NoopWrites++
			}
		}
	}
	if len(changedFields) == 0 {
		return nil
	}
	patched, _, err := materialize.PatchHomework(raw, want)
	if err != nil {
		return err
	}
	if len(patched) > materialize.MaxDocumentSize {
		// The server refuses an update whose result exceeds 16 MiB (code
		// 17419, "Resulting document after update is larger than
		// 16777216") and leaves the document as it was.
		return &tooLargeError{id: id.String(), size: len(patched)}
	}
	s.putOwned(materialize.CollHomework, k, patched)
	for _, f := range changedFields {
		s.stats.EntryWrites++
		s.emitOwn("update", materialize.CollHomework, id, nil, []string{f}, true)
	}
	return nil
}

// storedEntries returns the stored values of the entries of the users in
// want, in one pass over studentStatus, as DecodeHomework and
// PatchHomework see them: among duplicate user keys only document values
// count, the last winning.
func storedEntries(raw bson.Raw, want map[string]map[string]materialize.Entry) map[string]map[string]bson.RawValue {
	out := make(map[string]map[string]bson.RawValue, len(want))
	ss, err := raw.LookupErr(materialize.FieldStudentStatus)
	if err != nil {
		return out
	}
	ssd, ok := ss.DocumentOK()
	if !ok {
		return out
	}
	elems, _ := ssd.Elements()
	for _, ue := range elems {
		if _, ok := want[ue.Key()]; !ok {
			continue
		}
		ud, isDoc := ue.Value().DocumentOK()
		if !isDoc {
			continue
		}
		pes, _ := ud.Elements()
		m := make(map[string]bson.RawValue, len(pes))
		for _, e := range pes {
			m[e.Key()] = e.Value()
		}
		out[ue.Key()] = m
	}
	return out
}

// tooLargeError is an update refused because its result would exceed
// MongoDB's document limit.
type tooLargeError struct {
	id   string
	size int
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("homework %s: resulting document after update would be %d bytes, larger than %d", e.id, e.size, materialize.MaxDocumentSize)
}

// LookupKeys implements watch.KeyIndex.
func (s *Store) LookupKeys(ctx context.Context, ids []bson.ObjectID) (map[bson.ObjectID][]materialize.Pair, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, err
	}
	out := make(map[bson.ObjectID][]materialize.Pair)
	for _, id := range ids {
		if ps, ok := s.keys[id]; ok {
			out[id] = slices.Clone(ps)
		}
	}
	return out, nil
}

// RecordKeys implements watch.KeyIndex.
func (s *Store) RecordKeys(ctx context.Context, keys map[bson.ObjectID][]materialize.Pair) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("keys.record"); err != nil {
		return err
	}
	for id, ps := range keys {
		for _, p := range ps {
			if !slices.Contains(s.keys[id], p) {
				s.keys[id] = append(s.keys[id], p)
				s.stats.KeyRecords++
			}
		}
	}
	return nil
}

// ScanSubmissions implements watch.Scanner.
func (s *Store) ScanSubmissions(ctx context.Context, fn func(materialize.Submission) error, bad func(*materialize.DecodeError)) error {
	s.mu.Lock()
	if err := s.read(); err != nil {
		s.mu.Unlock()
		return err
	}
	raws := s.all(materialize.CollSubmission)
	s.mu.Unlock()
	subs := make([]materialize.Submission, 0, len(raws))
	for _, raw := range raws {
		sub, err := materialize.DecodeSubmission(raw)
		if err != nil {
			bad(err.(*materialize.DecodeError))
			continue
		}
		subs = append(subs, sub)
	}
	materialize.SortGrouped(subs)
	for _, sub := range subs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(sub); err != nil {
			return err
		}
	}
	return nil
}

// AllProblems implements watch.Scanner.
func (s *Store) AllProblems(ctx context.Context) ([]*materialize.Problem, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	var out []*materialize.Problem
	var bad []*materialize.DecodeError
	for _, raw := range s.all(materialize.CollProblem) {
		p, err := materialize.DecodeProblem(raw)
		if err != nil {
			bad = append(bad, err.(*materialize.DecodeError))
			continue
		}
		out = append(out, &p)
	}
	return out, bad, nil
}

// AllHomeworks implements watch.Scanner.
func (s *Store) AllHomeworks(ctx context.Context) ([]*watch.HomeworkDoc, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	var out []*watch.HomeworkDoc
	var bad []*materialize.DecodeError
	for _, raw := range s.all(materialize.CollHomework) {
		d, err := homeworkDoc(raw, nil)
		if err != nil {
			bad = append(bad, err.(*materialize.DecodeError))
			continue
		}
		out = append(out, d)
	}
	return out, bad, nil
}

// AllUsers implements watch.Scanner.
func (s *Store) AllUsers(ctx context.Context) (map[string]watch.StoredUser, []*materialize.DecodeError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return nil, nil, err
	}
	out := make(map[string]watch.StoredUser)
	var bad []*materialize.DecodeError
	for _, raw := range s.all(materialize.CollUser) {
		name, err := materialize.DecodeUserID(raw)
		if err != nil {
			bad = append(bad, err.(*materialize.DecodeError))
			continue
		}
		st, ok := materialize.DecodeUserStats(raw)
		out[name] = watch.StoredUser{Stats: st, OK: ok}
	}
	return out, bad, nil
}

// ClusterTime implements watch.Scanner: the cluster time of the latest
// event, so a stream started there re-delivers it (at-least-once).
func (s *Store) ClusterTime(ctx context.Context) (bson.Timestamp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.read(); err != nil {
		return bson.Timestamp{}, err
	}
	return clusterTime(max(len(s.oplog), 1)), nil
}

// ---- resume.Store and resume.LeaseStore ----

// LoadCheckpoint implements resume.Store.
func (s *Store) LoadCheckpoint(ctx context.Context) (resume.Checkpoint, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("checkpoint.load"); err != nil {
		return resume.Checkpoint{}, false, err
	}
	if s.cp == nil {
		return resume.Checkpoint{}, false, nil
	}
	return *s.cp, true, nil
}

// SaveCheckpoint implements resume.Store, fenced by the lease epoch.
func (s *Store) SaveCheckpoint(ctx context.Context, cp resume.Checkpoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("checkpoint.save"); err != nil {
		return err
	}
	cur := int64(0)
	if s.lease != nil {
		cur = s.lease.Epoch
	}
	if cp.Epoch != cur {
		s.stats.FencedSaves++
		return resume.ErrFenced
	}
	s.stats.Saves++
	rec := SaveRecord{Epoch: cp.Epoch, Owner: cp.Owner}
	if s.lease != nil {
		rec.LeaseOwner, rec.LeaseEpoch = s.lease.Owner, s.lease.Epoch
	}
	s.saves = append(s.saves, rec)
	c := cp
	c.Token = slices.Clone(cp.Token)
	s.cp = &c
	return nil
}

// Acquire implements resume.LeaseStore: expiry is decided by the store's
// clock (Store.Clock), as MongoDB decides it by $$NOW, never by the
// caller's.
func (s *Store) Acquire(ctx context.Context, owner string, ttl time.Duration) (resume.Lease, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("lease.acquire"); err != nil {
		return resume.Lease{}, false, err
	}
	now := s.clock()
	switch {
	case s.lease == nil:
		s.lease = &resume.Lease{Owner: owner, Epoch: 1, Expires: now.Add(ttl)}
	case !now.Before(s.lease.Expires):
		s.lease = &resume.Lease{Owner: owner, Epoch: s.lease.Epoch + 1, Expires: now.Add(ttl)}
	default:
		return *s.lease, false, nil
	}
	return *s.lease, true, nil
}

// Renew implements resume.LeaseStore: owner and epoch must both match.
func (s *Store) Renew(ctx context.Context, owner string, epoch int64, ttl time.Duration) (resume.Lease, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("lease.renew"); err != nil {
		return resume.Lease{}, false, err
	}
	if s.lease == nil {
		return resume.Lease{}, false, nil
	}
	if s.lease.Owner != owner || s.lease.Epoch != epoch {
		return *s.lease, false, nil
	}
	s.lease.Expires = s.clock().Add(ttl)
	return *s.lease, true, nil
}

// Release implements resume.LeaseStore.
func (s *Store) Release(ctx context.Context, owner string, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease != nil && s.lease.Owner == owner && s.lease.Epoch == epoch {
		s.lease.Expires = time.Time{}
	}
	return nil
}

// Current implements resume.LeaseStore.
func (s *Store) Current(ctx context.Context) (resume.Lease, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		return resume.Lease{}, false, nil
	}
	return *s.lease, true, nil
}

// RewindCheckpoint moves the saved checkpoint back to just after event
// seq (0: the start of the oplog), as if a token had been saved late: the
// events after it are delivered again. It never moves the checkpoint
// forward.
func (s *Store) RewindCheckpoint(seq int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cp == nil || seq < s.horizon || len(s.cp.Token) == 0 {
		return
	}
	if cur, err := tokenSeq(s.cp.Token); err != nil || seq >= cur {
		return
	}
	b, err := bson.Marshal(token(seq))
	if err != nil {
		return
	}
	s.cp.Token = b
	s.cp.StartAt = bson.Timestamp{}
}

// SaveRecord is one successful checkpoint save: who saved it (Owner, Epoch
// as the checkpoint carries them) and who held the lease at that moment.
type SaveRecord struct {
	Epoch      int64
	Owner      string
	LeaseEpoch int64
	LeaseOwner string
}

// Saves returns every successful checkpoint save so far.
func (s *Store) Saves() []SaveRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.saves)
}

// Read implements watch.Source: memory has no round trips to save.
func (s *Store) Read(ctx context.Context, r *watch.Reads) (*watch.ReadResult, error) {
	return watch.ReadSeparately(ctx, s, r)
}
