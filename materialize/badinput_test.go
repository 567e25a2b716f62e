package materialize_test

// The bad-input corpus: hostile and malformed source documents, one table
// row each. Every malformed document must decode to a *DecodeError naming
// its collection, its _id and the offending field (never a panic, never a
// silent zero); every hostile but well-typed document (odd usernames, huge
// arrays, deep nesting) must decode to exactly what it holds. The corpus
// also seeds FuzzDecodeSource (fuzz_test.go).

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
	mtest "github.com/normal-oj/noj-materializer/materialize/materializetest"
)

// Hostile usernames: each is a legal BSON string and a legal BSON key
// (no NUL), and must be handled as an opaque string.
var badinputUsernames = map[string]string{
	"empty":        "",
	"dotted":       "a.b",
	"dotted-deep":  "x.y.z.1",
	"dollar":       "$where",
	"dollar-dot":   "$a.$b",
	"long-10KB":    strings.Repeat("L", 10<<10),
	"invalid-utf8": "bad\xff\xfeuser\xc3",
	"control":      "ctl\x01\x02\t\n\x7f",
	"unicode":      "學生_ü_🙂",
	"numeric":      "42",
}

var (
	badinputOID  = bson.ObjectIDFromHex
	badinputTime = bson.NewDateTimeFromTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
)

func badinputMustOID(h string) bson.ObjectID {
	id, err := badinputOID(h)
	if err != nil {
		panic(err)
	}
	return id
}

// badinputDoc edits a base document: pairs of key and value; the value
// badinputDel removes the key; a new key is appended.
type badinputDelT struct{}

var badinputDel = badinputDelT{}

func badinputDoc(base bson.D, kv ...any) bson.Raw {
	d := append(bson.D{}, base...)
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		j := -1
		for n := range d {
			if d[n].Key == k {
				j = n
				break
			}
		}
		switch {
		case kv[i+1] == badinputDel:
			if j >= 0 {
				d = append(d[:j], d[j+1:]...)
			}
		case j >= 0:
			d[j].Value = kv[i+1]
		default:
			d = append(d, bson.E{Key: k, Value: kv[i+1]})
		}
	}
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// badinputNest returns a document nested depth levels deep: {a: {a: ...}}.
func badinputNest(depth int, leaf any) bson.D {
	v := leaf
	for i := 0; i < depth; i++ {
		v = bson.D{{Key: "a", Value: v}}
	}
	return v.(bson.D)
}

func badinputDec(s string) bson.Decimal128 {
	d, err := bson.ParseDecimal128(s)
	if err != nil {
		panic(err)
	}
	return d
}

var (
	badinputSubID = badinputMustOID("65f000000000000000000001")
	badinputHwID  = badinputMustOID("65f0000000000000000000a1")
)

func badinputSubmissionBase() bson.D {
	return mtest.D("_id", badinputSubID, "user", "alice", "problem", int32(1), "languageType", int32(0),
		"timestamp", badinputTime, "status", int32(0), "score", int32(100), "tasks", bson.A{})
}

func badinputHomeworkBase() bson.D {
	return mtest.D("_id", badinputHwID, "homeworkName", "hw",
		"duration", mtest.D("start", badinputTime, "end", badinputTime),
		"penalty", "score = score * 0.5",
		"studentStatus", mtest.D("alice", mtest.D("1", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))))
}

func badinputProblemBase() bson.D {
	return mtest.D("_id", int32(1), "problemName", "p1", "homeworks", bson.A{badinputHwID})
}

// badinputCase is one corpus document. field names the DecodeError's
// field, or is empty when the document must decode; skipped names the
// studentStatus.<user> a homework must record in Skipped; check (when
// set) verifies the decoded value of a document that must decode.
type badinputCase struct {
	name    string
	coll    string
	doc     bson.Raw
	field   string
	skipped []string
	check   func(t *testing.T, v any)
}

func badinputWantSub(f func(s materialize.Submission) bool) func(*testing.T, any) {
	return func(t *testing.T, v any) {
		t.Helper()
		if s := v.(materialize.Submission); !f(s) {
			t.Fatalf("decoded %+v", s)
		}
	}
}

func badinputWantHw(f func(h materialize.Homework) bool) func(*testing.T, any) {
	return func(t *testing.T, v any) {
		t.Helper()
		if h := v.(materialize.Homework); !f(h) {
			t.Fatalf("decoded homework: end %d penalty %q %d students, skipped %v", h.End, h.Penalty, len(h.Students), h.Skipped)
		}
	}
}

func badinputWantProblem(f func(p materialize.Problem) bool) func(*testing.T, any) {
	return func(t *testing.T, v any) {
		t.Helper()
		if p := v.(materialize.Problem); !f(p) {
			t.Fatalf("decoded problem: id %d, %d homeworks", p.ID, len(p.Homeworks))
		}
	}
}

// badinputCorpus is the whole table. It is rebuilt on each call (the
// huge documents are a few MB).
func badinputCorpus() []badinputCase {
	sub, hw, prob := badinputSubmissionBase(), badinputHomeworkBase(), badinputProblemBase()
	S := func(kv ...any) bson.Raw { return badinputDoc(sub, kv...) }
	H := func(kv ...any) bson.Raw { return badinputDoc(hw, kv...) }
	P := func(kv ...any) bson.Raw { return badinputDoc(prob, kv...) }
	entry := mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{})
	cs := []badinputCase{
		// ---- submission: every field the derivation reads, wrong types ----
		{name: "submission ok", coll: "submission", doc: S(), check: badinputWantSub(func(s materialize.Submission) bool {
			return s.User == "alice" && s.Problem == 1 && s.Score == 100 && s.Status == 0 && !s.Handwritten && s.Timestamp == int64(badinputTime)
		})},
		{name: "submission _id missing", coll: "submission", doc: S("_id", badinputDel), field: "_id"},
		{name: "submission _id string", coll: "submission", doc: S("_id", badinputSubID.Hex()), field: "_id"},
		{name: "submission _id int", coll: "submission", doc: S("_id", int32(7)), field: "_id"},
		{name: "submission _id null", coll: "submission", doc: S("_id", nil), field: "_id"},
		{name: "submission user int", coll: "submission", doc: S("user", int32(5)), field: "user"},
		{name: "submission user missing", coll: "submission", doc: S("user", badinputDel), field: "user"},
		{name: "submission user null", coll: "submission", doc: S("user", nil), field: "user"},
		{name: "submission user document", coll: "submission", doc: S("user", mtest.D("$ref", "user", "$id", "alice")), field: "user"},
		{name: "submission user array", coll: "submission", doc: S("user", bson.A{"alice"}), field: "user"},
		{name: "submission user ObjectId", coll: "submission", doc: S("user", badinputSubID), field: "user"},
		{name: "submission problem string", coll: "submission", doc: S("problem", "1"), field: "problem"},
		{name: "submission problem double 1.5", coll: "submission", doc: S("problem", 1.5), field: "problem"},
		{name: "submission problem decimal128", coll: "submission", doc: S("problem", badinputDec("1")), field: "problem"},
		{name: "submission problem bool", coll: "submission", doc: S("problem", true), field: "problem"},
		{name: "submission problem null", coll: "submission", doc: S("problem", nil), field: "problem"},
		{name: "submission problem missing", coll: "submission", doc: S("problem", badinputDel), field: "problem"},
		{name: "submission problem NaN", coll: "submission", doc: S("problem", math.NaN()), field: "problem"},
		{name: "submission problem +Inf", coll: "submission", doc: S("problem", math.Inf(1)), field: "problem"},
		{name: "submission problem 1e300", coll: "submission", doc: S("problem", 1e300), field: "problem"},
		{name: "submission problem 2^63 as double", coll: "submission", doc: S("problem", 9223372036854775808.0), field: "problem"},
		{name: "submission problem whole double", coll: "submission", doc: S("problem", 7.0),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Problem == 7 })},
		{name: "submission problem int64 max", coll: "submission", doc: S("problem", int64(math.MaxInt64)),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Problem == math.MaxInt64 })},
		{name: "submission timestamp string", coll: "submission", doc: S("timestamp", "2026-03-01T12:00:00Z"), field: "timestamp"},
		{name: "submission timestamp int64", coll: "submission", doc: S("timestamp", int64(badinputTime)), field: "timestamp"},
		{name: "submission timestamp int32", coll: "submission", doc: S("timestamp", int32(1)), field: "timestamp"},
		{name: "submission timestamp bson Timestamp", coll: "submission", doc: S("timestamp", bson.Timestamp{T: 1, I: 1}), field: "timestamp"},
		{name: "submission timestamp null", coll: "submission", doc: S("timestamp", nil), field: "timestamp"},
		{name: "submission timestamp missing", coll: "submission", doc: S("timestamp", badinputDel), field: "timestamp"},
		{name: "submission status string", coll: "submission", doc: S("status", "0"), field: "status"},
		{name: "submission status huge double", coll: "submission", doc: S("status", 1e19), field: "status"},
		{name: "submission status fractional", coll: "submission", doc: S("status", 0.5), field: "status"},
		{name: "submission status bool", coll: "submission", doc: S("status", false), field: "status"},
		{name: "submission status null (default -2)", coll: "submission", doc: S("status", nil),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Status == -2 && !s.Judged() })},
		{name: "submission status missing (default -2)", coll: "submission", doc: S("status", badinputDel),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Status == -2 })},
		{name: "submission score string", coll: "submission", doc: S("score", "100"), field: "score"},
		{name: "submission score huge double", coll: "submission", doc: S("score", 1e300), field: "score"},
		{name: "submission score -Inf", coll: "submission", doc: S("score", math.Inf(-1)), field: "score"},
		{name: "submission score NaN", coll: "submission", doc: S("score", math.NaN()), field: "score"},
		{name: "submission score decimal128", coll: "submission", doc: S("score", badinputDec("100")), field: "score"},
		{name: "submission score array", coll: "submission", doc: S("score", bson.A{int32(100)}), field: "score"},
		{name: "submission score null (default -1)", coll: "submission", doc: S("score", nil),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Score == -1 })},
		{name: "submission score int64 min", coll: "submission", doc: S("score", int64(math.MinInt64)),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Score == math.MinInt64 })},
		{name: "submission languageType string", coll: "submission", doc: S("languageType", "3"), field: "languageType"},
		{name: "submission languageType double 3.5", coll: "submission", doc: S("languageType", 3.5), field: "languageType"},
		{name: "submission languageType double 3.0 (handwritten)", coll: "submission", doc: S("languageType", 3.0),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.Handwritten })},
		{name: "submission languageType null", coll: "submission", doc: S("languageType", nil),
			check: badinputWantSub(func(s materialize.Submission) bool { return !s.Handwritten })},
		{name: "submission deep unrelated nesting", coll: "submission", doc: S("tasks", badinputNest(100, int32(1))),
			check: badinputWantSub(func(s materialize.Submission) bool { return s.User == "alice" && s.Score == 100 })},
		{name: "submission only _id", coll: "submission", doc: badinputDoc(mtest.D("_id", badinputSubID)), field: "user"},
		{name: "submission empty document", coll: "submission", doc: badinputDoc(bson.D{}), field: "_id"},

		// ---- homework ----
		{name: "homework ok", coll: "homework", doc: H(), check: badinputWantHw(func(h materialize.Homework) bool {
			return h.End == int64(badinputTime) && h.Penalty == "score = score * 0.5" && h.HasEntry("alice", 1)
		})},
		{name: "homework _id string", coll: "homework", doc: H("_id", badinputHwID.Hex()), field: "_id"},
		{name: "homework _id missing", coll: "homework", doc: H("_id", badinputDel), field: "_id"},
		{name: "homework duration string", coll: "homework", doc: H("duration", "2026"), field: "duration"},
		{name: "homework duration array", coll: "homework", doc: H("duration", bson.A{badinputTime}), field: "duration"},
		{name: "homework duration int", coll: "homework", doc: H("duration", int32(3)), field: "duration"},
		{name: "homework duration.end string", coll: "homework", doc: H("duration", mtest.D("start", badinputTime, "end", "2026-03-01")), field: "duration.end"},
		{name: "homework duration.end int64", coll: "homework", doc: H("duration", mtest.D("end", int64(badinputTime))), field: "duration.end"},
		{name: "homework duration.end document", coll: "homework", doc: H("duration", mtest.D("end", mtest.D("$date", "x"))), field: "duration.end"},
		{name: "homework duration null (default end)", coll: "homework", doc: H("duration", nil),
			check: badinputWantHw(func(h materialize.Homework) bool { return h.End == materialize.DefaultEnd })},
		{name: "homework duration.end missing (default end)", coll: "homework", doc: H("duration", mtest.D("start", badinputTime)),
			check: badinputWantHw(func(h materialize.Homework) bool { return h.End == materialize.DefaultEnd })},
		{name: "homework duration.end null (default end)", coll: "homework", doc: H("duration", mtest.D("end", nil)),
			check: badinputWantHw(func(h materialize.Homework) bool { return h.End == materialize.DefaultEnd })},
		{name: "homework penalty int", coll: "homework", doc: H("penalty", int32(0)), field: "penalty"},
		{name: "homework penalty document", coll: "homework", doc: H("penalty", mtest.D("code", "score = 0")), field: "penalty"},
		{name: "homework penalty array", coll: "homework", doc: H("penalty", bson.A{"score = 0"}), field: "penalty"},
		{name: "homework penalty null (default)", coll: "homework", doc: H("penalty", nil),
			check: badinputWantHw(func(h materialize.Homework) bool { return h.Penalty == materialize.DefaultPenalty })},
		{name: "homework penalty missing (default)", coll: "homework", doc: H("penalty", badinputDel),
			check: badinputWantHw(func(h materialize.Homework) bool { return h.Penalty == materialize.DefaultPenalty })},
		{name: "homework studentStatus array", coll: "homework", doc: H("studentStatus", bson.A{mtest.D("alice", entry)}), field: "studentStatus"},
		{name: "homework studentStatus string", coll: "homework", doc: H("studentStatus", "alice"), field: "studentStatus"},
		{name: "homework studentStatus int", coll: "homework", doc: H("studentStatus", int32(0)), field: "studentStatus"},
		{name: "homework studentStatus null (no entries)", coll: "homework", doc: H("studentStatus", nil),
			check: badinputWantHw(func(h materialize.Homework) bool { return len(h.Students) == 0 && len(h.Skipped) == 0 })},
		{name: "homework studentStatus missing (no entries)", coll: "homework", doc: H("studentStatus", badinputDel),
			check: badinputWantHw(func(h materialize.Homework) bool { return len(h.Students) == 0 })},
		{name: "homework studentStatus.<u> int/null/array/string", coll: "homework",
			doc:     H("studentStatus", mtest.D("bob", int32(3), "alice", mtest.D("1", entry), "carol", nil, "dave", bson.A{entry}, "erin", "x")),
			skipped: []string{"studentStatus.bob", "studentStatus.carol", "studentStatus.dave", "studentStatus.erin"},
			check: badinputWantHw(func(h materialize.Homework) bool {
				return h.HasEntry("alice", 1) && len(h.Students) == 1
			})},
		{name: "homework entries that are not documents", coll: "homework",
			doc: H("studentStatus", mtest.D("alice", mtest.D("1", int32(5), "2", nil, "3", bson.A{}, "4", "x"))),
			check: badinputWantHw(func(h materialize.Homework) bool {
				// The entry exists (its value is derived and will be overwritten).
				return h.HasEntry("alice", 1) && h.HasEntry("alice", 2) && h.HasEntry("alice", 3) && h.HasEntry("alice", 4)
			})},
		{name: "homework entry nested 100 levels", coll: "homework",
			doc:   H("studentStatus", mtest.D("alice", mtest.D("1", badinputNest(100, entry)))),
			check: badinputWantHw(func(h materialize.Homework) bool { return h.HasEntry("alice", 1) })},
		{name: "homework user value nested 100 levels", coll: "homework",
			doc: H("studentStatus", mtest.D("alice", badinputNest(100, entry))),
			check: badinputWantHw(func(h materialize.Homework) bool {
				_, ok := h.Students["alice"]["a"]
				return ok && len(h.Students["alice"]) == 1
			})},
		{name: "homework non-canonical problem keys", coll: "homework",
			doc: H("studentStatus", mtest.D("alice", mtest.D("01", entry, "-0", entry, "1.0", entry, "+1", entry, " 1", entry, "abc", entry, "", entry))),
			check: badinputWantHw(func(h materialize.Homework) bool {
				return !h.HasEntry("alice", 1) && !h.HasEntry("alice", 0) && len(h.Students["alice"]) == 7
			})},
		{name: "homework only _id", coll: "homework", doc: badinputDoc(mtest.D("_id", badinputHwID)),
			check: badinputWantHw(func(h materialize.Homework) bool {
				return h.End == materialize.DefaultEnd && h.Penalty == materialize.DefaultPenalty && len(h.Students) == 0
			})},

		// ---- problem ----
		{name: "problem ok", coll: "problem", doc: P(), check: badinputWantProblem(func(p materialize.Problem) bool {
			return p.ID == 1 && len(p.Homeworks) == 1 && p.Homeworks[0] == badinputHwID
		})},
		{name: "problem homeworks string", coll: "problem", doc: P("homeworks", badinputHwID.Hex()), field: "homeworks"},
		{name: "problem homeworks document", coll: "problem", doc: P("homeworks", mtest.D("0", badinputHwID)), field: "homeworks"},
		{name: "problem homeworks int", coll: "problem", doc: P("homeworks", int32(1)), field: "homeworks"},
		{name: "problem homeworks element int", coll: "problem", doc: P("homeworks", bson.A{badinputHwID, int32(3)}), field: "homeworks.1"},
		{name: "problem homeworks element hex string", coll: "problem", doc: P("homeworks", bson.A{badinputHwID.Hex()}), field: "homeworks.0"},
		{name: "problem homeworks element null", coll: "problem", doc: P("homeworks", bson.A{nil}), field: "homeworks.0"},
		{name: "problem homeworks element DBRef-like", coll: "problem", doc: P("homeworks", bson.A{badinputHwID, badinputHwID, mtest.D("$id", badinputHwID)}), field: "homeworks.2"},
		{name: "problem homeworks null (empty)", coll: "problem", doc: P("homeworks", nil),
			check: badinputWantProblem(func(p materialize.Problem) bool { return len(p.Homeworks) == 0 })},
		{name: "problem _id string", coll: "problem", doc: P("_id", "1"), field: "_id"},
		{name: "problem _id double 1.5", coll: "problem", doc: P("_id", 1.5), field: "_id"},
		{name: "problem _id decimal128", coll: "problem", doc: P("_id", badinputDec("1")), field: "_id"},
		{name: "problem _id bool", coll: "problem", doc: P("_id", true), field: "_id"},
		{name: "problem _id ObjectId", coll: "problem", doc: P("_id", badinputHwID), field: "_id"},
		{name: "problem _id missing", coll: "problem", doc: P("_id", badinputDel), field: "_id"},
		{name: "problem _id whole double", coll: "problem", doc: P("_id", 2.0),
			check: badinputWantProblem(func(p materialize.Problem) bool { return p.ID == 2 })},

		// ---- user ----
		{name: "user _id int", coll: "user", doc: badinputDoc(mtest.D("_id", int32(1), "submission", int32(0))), field: "_id"},
		{name: "user _id ObjectId", coll: "user", doc: badinputDoc(mtest.D("_id", badinputHwID)), field: "_id"},
		{name: "user _id null", coll: "user", doc: badinputDoc(mtest.D("_id", nil)), field: "_id"},
		{name: "user _id missing", coll: "user", doc: badinputDoc(mtest.D("username", "alice")), field: "_id"},
	}
	for _, k := range badinputSortedKeys(badinputUsernames) {
		u := badinputUsernames[k]
		cs = append(cs,
			badinputCase{name: "submission user " + k, coll: "submission", doc: S("user", u),
				check: badinputWantSub(func(s materialize.Submission) bool { return s.User == u })},
			badinputCase{name: "homework user key " + k, coll: "homework", doc: H("studentStatus", mtest.D(u, mtest.D("1", entry), "alice", mtest.D("2", entry))),
				check: badinputWantHw(func(h materialize.Homework) bool {
					return h.HasEntry(u, 1) && !h.HasEntry(u, 2) && h.HasEntry("alice", 2) && len(h.Students) == 2
				})},
			badinputCase{name: "user _id " + k, coll: "user", doc: badinputDoc(mtest.D("_id", u)),
				check: func(t *testing.T, v any) {
					if v.(string) != u {
						t.Fatalf("decoded %q", v)
					}
				}},
		)
	}
	return append(cs, badinputHuge()...)
}

// badinputHuge are the large documents: 100k homework references, 50k
// students, a bad element at the very end of a huge array.
func badinputHuge() []badinputCase {
	const nHw, nUsers = 100_000, 50_000
	refs := make(bson.A, nHw)
	for i := range refs {
		var id bson.ObjectID
		id[0], id[9], id[10], id[11] = 0x65, byte(i>>16), byte(i>>8), byte(i)
		refs[i] = id
	}
	badTail := append(append(bson.A(nil), refs[:nHw-1]...), "not an ObjectId")
	students := make(bson.D, nUsers)
	for i := range students {
		students[i] = bson.E{Key: "u" + strconv.Itoa(i), Value: mtest.D("1", mtest.D("score", int32(0), "problemStatus", nil, "submissionIds", bson.A{}))}
	}
	students[nUsers/2].Value = int32(7) // one unreadable user in the middle
	return []badinputCase{
		{name: "problem with 100k homeworks", coll: "problem", doc: badinputDoc(badinputProblemBase(), "homeworks", refs),
			check: badinputWantProblem(func(p materialize.Problem) bool { return len(p.Homeworks) == nHw })},
		{name: "problem with 100k homeworks, last not an ObjectId", coll: "problem",
			doc: badinputDoc(badinputProblemBase(), "homeworks", badTail), field: "homeworks." + strconv.Itoa(nHw-1)},
		{name: "homework with 50k students", coll: "homework", doc: badinputDoc(badinputHomeworkBase(), "studentStatus", students),
			skipped: []string{"studentStatus.u" + strconv.Itoa(nUsers/2)},
			check: badinputWantHw(func(h materialize.Homework) bool {
				return len(h.Students) == nUsers-1 && h.HasEntry("u0", 1) && h.HasEntry("u49999", 1)
			})},
	}
}

func badinputSortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// badinputDecode runs the decoder of coll.
func badinputDecode(coll string, doc bson.Raw) (any, error) {
	switch coll {
	case "submission":
		return materialize.DecodeSubmission(doc)
	case "homework":
		return materialize.DecodeHomework(doc)
	case "problem":
		return materialize.DecodeProblem(doc)
	case "user":
		return materialize.DecodeUserID(doc)
	}
	panic("unknown collection " + coll)
}

// badinputWantID is how a DecodeError must name the document's _id.
func badinputWantID(doc bson.Raw) string {
	v, err := doc.LookupErr("_id")
	if err != nil {
		return "?"
	}
	return v.String()
}

func TestBadInputDecode(t *testing.T) {
	for _, c := range badinputCorpus() {
		t.Run(c.name, func(t *testing.T) {
			v, err := badinputDecode(c.coll, c.doc)
			if c.field == "" {
				if err != nil {
					t.Fatalf("want a decoded document, got %v", err)
				}
				if c.coll == "homework" {
					h := v.(materialize.Homework)
					var got []string
					for _, s := range h.Skipped {
						got = append(got, s.Field)
						badinputCheckErr(t, s, c.coll, c.doc, s.Field)
					}
					if strings.Join(got, "|") != strings.Join(c.skipped, "|") {
						t.Fatalf("Skipped = %q, want %q", got, c.skipped)
					}
				}
				if c.check != nil {
					c.check(t, v)
				}
				return
			}
			if err == nil {
				t.Fatalf("decoded %+v, want an error on field %q", v, c.field)
			}
			var de *materialize.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %T %v, want *materialize.DecodeError", err, err)
			}
			badinputCheckErr(t, de, c.coll, c.doc, c.field)
		})
	}
}

func badinputCheckErr(t *testing.T, de *materialize.DecodeError, coll string, doc bson.Raw, field string) {
	t.Helper()
	if de.Collection != coll || de.Field != field {
		t.Fatalf("DecodeError %+v: want collection %q field %q", de, coll, field)
	}
	if want := badinputWantID(doc); de.ID != want || de.ID == "" {
		t.Fatalf("DecodeError _id = %q, want %q", de.ID, want)
	}
	if de.Reason == "" {
		t.Fatalf("DecodeError without a reason: %+v", de)
	}
	if !errors.Is(de, materialize.ErrMalformed) {
		t.Fatalf("errors.Is(%v, ErrMalformed) = false", de)
	}
	if msg := de.Error(); !strings.Contains(msg, coll) || !strings.Contains(msg, strconv.Quote(field)) {
		t.Fatalf("message %q does not name collection %q and field %q", msg, coll, field)
	}
}

// TestBadInputCorruptBytes: truncated or garbled BSON never panics. The
// drivers hand the decoders validated BSON, so reading corrupt bytes as a
// document with defaults is reported (see badinputKnownBug), not failed.
func TestBadInputCorruptBytes(t *testing.T) {
	good := badinputDoc(badinputSubmissionBase())
	hw := badinputDoc(badinputHomeworkBase())
	inputs := map[string]bson.Raw{
		"nil":              nil,
		"empty":            {},
		"length only":      {5, 0, 0, 0},
		"length too large": append([]byte{0xff, 0xff, 0, 0}, good[4:]...),
		"truncated half":   good[:len(good)/2],
		"no terminator":    good[:len(good)-1],
		"bad type byte":    badinputSetByte(good, 4, 0x7e),
		"homework cut":     hw[:len(hw)-3],
		// The driver's Validate and Elements accept an element running
		// past the declared length (found by FuzzDecodeSource).
		"element overruns length": bson.Raw("z\x00\x00\x00\a\x00000000000000\x0200\x00B\x00\x00\x00" + strings.Repeat("0", 65) +
			"\x00\x10" + strings.Repeat("0", 28) + "\x000000\x000"),
	}
	for _, name := range []string{"nil", "empty", "length only", "length too large", "truncated half", "no terminator", "bad type byte", "homework cut",
		"element overruns length"} {
		raw := inputs[name]
		t.Run(name, func(t *testing.T) {
			for _, coll := range []string{"submission", "homework", "problem", "user"} {
				v, err := badinputDecode(coll, raw)
				if err == nil {
					badinputKnownBug(t, "Decode%s of corrupt BSON (%s) succeeds with defaults: %+v", coll, name, v)
				}
			}
			if _, ok := materialize.DecodeUserStats(raw); ok {
				t.Errorf("DecodeUserStats accepted corrupt bytes")
			}
			materialize.DecodeEntry(bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw})
			out, _, err := materialize.PatchHomework(raw, map[string]map[string]materialize.Entry{"alice": {"1": materialize.StartEntry()}})
			if err == nil {
				badinputKnownBug(t, "PatchHomework of corrupt BSON (%s) returns %d bytes and no error", name, len(out))
			}
			if _, err := materialize.PatchUser(raw, materialize.UserStats{ACProblemIDs: []int64{}}); err == nil {
				badinputKnownBug(t, "PatchUser of corrupt BSON (%s) returns no error", name)
			}
		})
	}
}

// badinputKnownBug fails a check that once caught a (since fixed) defect of
// non-test code: it now guards against the regression.
func badinputKnownBug(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Errorf("regression: "+format, args...)
}

func badinputSetByte(b []byte, i int, v byte) []byte {
	c := bytes.Clone(b)
	c[i] = v
	return c
}

// TestBadInputPatchHomeworkUsernames: entries keyed by hostile usernames
// are replaced in place, under exactly their own user, never under a user
// whose name is a prefix of theirs or a dotted path through another.
func TestBadInputPatchHomeworkUsernames(t *testing.T) {
	stale := mtest.D("score", int32(99), "problemStatus", int32(1), "submissionIds", bson.A{"stale"}, "rawScore", int32(99))
	ss := bson.D{
		// "a" with problem key "b.1" and "a.b" with "1" both read as the
		// dotted path studentStatus.a.b.1.
		{Key: "a", Value: mtest.D("b.1", stale, "1", stale)},
		{Key: "a.b", Value: mtest.D("1", stale)},
		{Key: "$a", Value: mtest.D("1", stale)},
		{Key: "not-a-doc", Value: int32(4)},
	}
	for _, k := range badinputSortedKeys(badinputUsernames) {
		if u := badinputUsernames[k]; u != "a.b" {
			ss = append(ss, bson.E{Key: u, Value: mtest.D("1", stale, "2", stale)})
		}
	}
	doc := badinputDoc(badinputHomeworkBase(), "studentStatus", ss, "trailer", "kept")
	before, err := mtest.StoredEntries(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range append(badinputSortedKeys(badinputUsernames), "a-only") {
		u := badinputUsernames[k]
		if k == "a-only" {
			u = "a"
		}
		t.Run(k, func(t *testing.T) {
			want := materialize.Entry{Score: 40, ProblemStatus: 1, HasStatus: true, SubmissionIDs: []string{"65f000000000000000000001"}, RawScore: 80, HasRaw: true}
			out, changed, err := materialize.PatchHomework(doc, map[string]map[string]materialize.Entry{u: {"1": want, "404": want}})
			if err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Fatal("changed = false")
			}
			if err := out.Validate(); err != nil {
				t.Fatalf("patched document is invalid BSON: %v", err)
			}
			badinputSameShape(t, doc, out)
			after, err := mtest.StoredEntries(out)
			if err != nil {
				t.Fatal(err)
			}
			for user, ps := range before {
				for pk, e := range ps {
					got := after[user][pk]
					if user == u && pk == "1" {
						if !got.Equal(want) {
							t.Errorf("studentStatus[%q][1] = %+v, want %+v", user, got, want)
						}
					} else if !got.Equal(e) {
						t.Errorf("studentStatus[%q][%q] changed: %+v → %+v (patched user %q)", user, pk, e, got, u)
					}
				}
			}
			if len(after[u]["404"].SubmissionIDs) != 0 || len(after) != len(before) {
				t.Fatalf("an entry was added")
			}
		})
	}
}

// badinputSameShape asserts that patched has the same top-level elements
// as orig (byte-identical except studentStatus), the same studentStatus
// users in the same order, and the same problem keys per user.
func badinputSameShape(t *testing.T, orig, patched bson.Raw) {
	t.Helper()
	oe, err := orig.Elements()
	if err != nil {
		t.Fatal(err)
	}
	pe, err := patched.Elements()
	if err != nil {
		t.Fatalf("patched: %v", err)
	}
	if len(oe) != len(pe) {
		t.Fatalf("top-level elements: %d → %d", len(oe), len(pe))
	}
	for i := range oe {
		if oe[i].Key() != pe[i].Key() {
			t.Fatalf("element %d: key %q → %q", i, oe[i].Key(), pe[i].Key())
		}
		od, oIsDoc := oe[i].Value().DocumentOK()
		if oe[i].Key() != materialize.FieldStudentStatus || !oIsDoc {
			if !bytes.Equal(oe[i], pe[i]) {
				t.Fatalf("element %q changed", oe[i].Key())
			}
			continue
		}
		pd, ok := pe[i].Value().DocumentOK()
		if !ok {
			t.Fatalf("studentStatus is no longer a document")
		}
		if got, want := badinputKeyShape(t, pd), badinputKeyShape(t, od); got != want {
			t.Fatalf("studentStatus keys changed:\n got %q\nwant %q", got, want)
		}
	}
}

// badinputKeyShape renders the user keys and, for document values, their
// problem keys; non-document values are rendered with their bytes.
func badinputKeyShape(t *testing.T, ss bson.Raw) string {
	t.Helper()
	users, err := ss.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ue := range users {
		b.WriteString(strconv.Quote(ue.Key()))
		ud, ok := ue.Value().DocumentOK()
		if !ok {
			b.WriteString("=" + strconv.Quote(string(ue)) + ";")
			continue
		}
		probs, err := ud.Elements()
		if err != nil {
			b.WriteString("=" + strconv.Quote(string(ue)) + ";")
			continue
		}
		b.WriteString(":{")
		for _, p := range probs {
			b.WriteString(strconv.Quote(p.Key()) + ",")
		}
		b.WriteString("};")
	}
	return b.String()
}

// TestBadInputHugeHomeworkList: a problem listing 100k homeworks resolves
// to the one that exists. (ResolveHomeworks was once quadratic in the list;
// it now de-duplicates long lists with a set, so this runs in every test
// run instead of behind a flag.)
func TestBadInputHugeHomeworkList(t *testing.T) {
	const n = 100_000
	p := materialize.Problem{ID: 1, Homeworks: make([]bson.ObjectID, n)}
	for i := range p.Homeworks {
		p.Homeworks[i][0], p.Homeworks[i][9], p.Homeworks[i][10], p.Homeworks[i][11] = 0x65, byte(i>>16), byte(i>>8), byte(i)
	}
	hw := &materialize.Homework{ID: p.Homeworks[n-1]}
	get := func(id bson.ObjectID) *materialize.Homework {
		if id == hw.ID {
			return hw
		}
		return nil
	}
	got := materialize.ResolveHomeworks(&p, get)
	if len(got) != 1 || got[0] != hw {
		t.Fatalf("resolved %d homeworks", len(got))
	}
}
