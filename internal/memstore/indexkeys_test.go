package memstore

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// backEndSubmission is a submission as Back-End stores it: the fields the
// derivation reads and a tasks list of cases (code in MinIO, named by a
// path) that it does not.
func backEndSubmission(id byte, user string, problem, status, score int32, ts time.Time) bson.Raw {
	cases := bson.A{}
	for j := range 6 {
		cases = append(cases, bson.D{{Key: "status", Value: int32(0)}, {Key: "execTime", Value: int32(12)}, {Key: "memoryUsage", Value: int32(4096)},
			{Key: "outputMinioPath", Value: "submissions/" + strings.Repeat("f", 24) + "_task00_case0" + string(rune('0'+j)) + "_" + strings.Repeat("0", 26) + ".zip"}})
	}
	doc, err := bson.Marshal(bson.D{
		{Key: "_id", Value: bson.ObjectID{11: id}}, {Key: "problem", Value: problem}, {Key: "user", Value: user},
		{Key: "languageType", Value: int32(1)}, {Key: "timestamp", Value: bson.NewDateTimeFromTime(ts)},
		{Key: "status", Value: status}, {Key: "score", Value: score},
		{Key: "tasks", Value: bson.A{bson.D{{Key: "status", Value: int32(0)}, {Key: "execTime", Value: int32(12)}, {Key: "memoryUsage", Value: int32(4096)}, {Key: "score", Value: score}, {Key: "cases", Value: cases}}}},
		{Key: "codeMinioPath", Value: "submissions/" + strings.Repeat("f", 24) + "_" + strings.Repeat("0", 26) + ".zip"},
	})
	if err != nil {
		panic(err)
	}
	return doc
}

// TestScanIndexExaminesEntriesNotDocuments: a read of a user's or a pair's
// submissions examines the covering index's entries of those documents
// only, sized as KeyString keys (computed by hand below from MongoDB's
// key_string.cpp) stored prefix-compressed, and no document, however
// large the documents; once any document stores an array under an index
// field (a multikey index, which cannot cover), every matching document
// is fetched too.
func TestScanIndexExaminesEntriesNotDocuments(t *testing.T) {
	ts := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s := New()
	for _, d := range []bson.Raw{
		backEndSubmission(1, "u", 1, 0, 100, ts),
		backEndSubmission(2, "u", 1, 1, 50, ts),
		backEndSubmission(3, "v", 1, 0, 100, ts),
	} {
		if err := s.Load(materialize.CollSubmission, d); err != nil {
			t.Fatal(err)
		}
	}
	// One entry, u's first: "u" 3 bytes (ctype, 'u', NUL), problem 1 2
	// (ctype, 1<<1), the date 9, the ObjectId 13, status 0 1 (the zero
	// ctype), score 100 2, languageType 1 2, the end byte 1, RecordId 1 2:
	// 35 bytes of key, 2 of cell header, no TypeBits (a string and int32
	// values). The second shares every byte up to its _id's last (2 vs 1):
	// user 3 + problem 2 + date 9 + 12 bytes of the ObjectId = 26; the
	// rest, 1 + status 1 2 + score 50 2 + languageType 2 + end 1 +
	// RecordId 2 = 10 bytes, and 2 of header.
	const first, second = 35 + 2, 10 + 2
	for _, c := range []struct {
		name  string
		users []string
		pairs []materialize.Pair
		keys  int64
		bytes int64
	}{
		{"user", []string{"u"}, nil, 2, first + second},
		{"pair", nil, []materialize.Pair{{User: "u", Problem: 1}}, 2, first + second},
		{"other user", []string{"v"}, nil, 1, first},
		{"nobody", []string{"w"}, nil, 0, 0},
	} {
		got := s.ScanIndex(c.users, c.pairs)
		if got.Keys != c.keys || got.KeyBytes != c.bytes || len(got.Fetched) != 0 {
			t.Errorf("%s: %d entries, %d bytes, %d documents fetched; want %d, %d, none", c.name, got.Keys, got.KeyBytes, len(got.Fetched), c.keys, c.bytes)
		}
	}
	arr, _ := bson.Marshal(bson.D{{Key: "_id", Value: bson.ObjectID{11: 9}}, {Key: "user", Value: "w"}, {Key: "status", Value: bson.A{int32(0)}}})
	if err := s.Load(materialize.CollSubmission, arr); err != nil {
		t.Fatal(err)
	}
	if got := s.ScanIndex([]string{"u"}, nil); got.Keys != 2 || len(got.Fetched) != 2 {
		t.Errorf("multikey index: %d entries, %d documents fetched; want 2 and 2", got.Keys, len(got.Fetched))
	}
}

// TestKeyStringIntegers: KeyString's integer encodings (key_string.cpp
// _appendInteger): zero one byte; else a ctype of the sign and width of
// magnitude<<1, then those bytes, inverted for negatives.
func TestKeyStringIntegers(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want []byte
	}{
		{0, []byte{41}},
		{1, []byte{43, 2}},
		{100, []byte{43, 200}},
		{128, []byte{44, 1, 0}},
		{-1, []byte{39, 0xFD}},
	} {
		if got := appendInteger(nil, c.n); string(got) != string(c.want) {
			t.Errorf("appendInteger(%d) = %v, want %v", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		rid  uint64
		want int
	}{{1, 2}, {1023, 2}, {1024, 3}, {1<<18 - 1, 3}, {1 << 18, 4}} {
		if got := len(appendRecordID(nil, c.rid)); got != c.want {
			t.Errorf("RecordId %d: %d bytes, want %d", c.rid, got, c.want)
		}
	}
}
