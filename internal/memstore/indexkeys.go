package memstore

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/normal-oj/noj-materializer/materialize"
)

// CoveringFields are the keys, in order, of the submission index that
// answers the per-landing reads without fetching a document (the mongodb
// adapter's coverIndex): every field those reads filter, group or
// project on.
var CoveringFields = []string{"user", "problem", "timestamp", "_id", "status", "score", "languageType"}

// IndexScan is what the server examines to answer a read of submissions
// by user or by (user, problem) over the covering index.
type IndexScan struct {
	Keys     int64 // index entries examined
	KeyBytes int64 // their stored bytes (see entrySizes)
	// Fetched are the documents the server must read besides: none while
	// the plan is covered; every matching one once a document has stored
	// an array under one of CoveringFields, which makes the index multikey
	// on that path (for good: MongoDB keeps the flag until the index is
	// rebuilt) and a multikey path cannot be covered.
	Fetched []bson.Raw
}

// ScanIndex returns what reading the submissions of users and of pairs
// examines on the covering index, as the mongodb adapter's reads do: the
// entries of the matching documents, and, when the index is multikey, the
// documents themselves.
func (s *Store) ScanIndex(users []string, pairs []materialize.Pair) IndexScan {
	s.mu.Lock()
	defer s.mu.Unlock()
	x := s.subIndex()
	keys := x.keys(users, pairs)
	out := IndexScan{Keys: int64(len(keys))}
	entries := make([]indexEntry, len(keys))
	// One buffer for every key (a user's thousands of entries per read):
	// a key is a slice of it, valid when the buffer grows.
	buf := make([]byte, 0, 64*len(keys))
	for i, k := range keys {
		raw := s.colls[materialize.CollSubmission][k]
		start := len(buf)
		var tb int
		buf, tb = appendIndexEntry(buf, raw, x.seq[k])
		entries[i] = indexEntry{key: buf[start:len(buf):len(buf)], typeBits: tb}
		if x.multikey {
			out.Fetched = append(out.Fetched, raw)
		}
	}
	out.KeyBytes = entrySizes(entries)
	return out
}

// indexEntry is one entry of the covering index as WiredTiger stores it
// for MongoDB: the key (KeyString of the values, the end byte, the
// RecordId) and the value (the TypeBits, empty when every bit is zero).
type indexEntry struct {
	key      []byte
	typeBits int
}

// appendIndexEntry appends the key of doc's entry to key and returns it
// with the size of the entry's TypeBits; rid is its RecordId (the store's
// insertion sequence stands in for WiredTiger's, which is also a counter
// of inserts).
func appendIndexEntry(key []byte, doc bson.Raw, rid uint64) ([]byte, int) {
	var tb typeBits
	for _, f := range CoveringFields {
		key = appendKeyString(key, &tb, doc.Lookup(f))
	}
	key = append(key, 0x04) // kEnd: the key's values end, the RecordId follows
	key = appendRecordID(key, rid)
	return key, tb.size()
}

// entrySizes is the bytes the entries occupy in WiredTiger's leaf pages,
// as held in its cache: entries in index order, each key stored without
// the prefix it shares with the key before it (MongoDB creates indexes
// with prefix compression, and WiredTiger keeps pages prefix-compressed
// in memory), the first one whole; 2 bytes of cell header per key
// (descriptor and prefix length) and, when the TypeBits are not empty, a
// value cell of 1 byte plus them. Page boundaries (where a key is stored
// whole again) are not modelled.
func entrySizes(entries []indexEntry) int64 {
	slices.SortFunc(entries, func(a, b indexEntry) int { return bytes.Compare(a.key, b.key) })
	var n int64
	var prev []byte
	for _, e := range entries {
		shared := 0
		for shared < len(prev) && shared < len(e.key) && shared < 255 && prev[shared] == e.key[shared] {
			shared++
		}
		n += int64(len(e.key)-shared) + 2
		if e.typeBits > 0 {
			n += 1 + int64(e.typeBits)
		}
		prev = e.key
	}
	return n
}

// typeBits counts the TypeBits of a key: what the KeyString does not say
// about each value's BSON type (string or symbol, int32, int64 or
// double). Back-End's strings and int32 values have zero bits, which are
// not stored.
type typeBits struct {
	n       int
	nonZero bool
}

func (t *typeBits) add(v uint8, width int) {
	t.n += width
	if v != 0 {
		t.nonZero = true
	}
}

// size is the stored size of the TypeBits: none when all are zero, one
// byte for up to 7 bits, else a size byte and the bits.
func (t *typeBits) size() int {
	switch {
	case !t.nonZero:
		return 0
	case t.n <= 7:
		return 1
	}
	return 1 + (t.n+7)/8
}

// KeyString type bytes (MongoDB's key_string.cpp, CType).
const (
	ksNullish        = 20
	ksNumeric        = 30
	ksNumericZero    = ksNumeric + 11
	ksNegative1Byte  = ksNumeric + 9
	ksPositive1Byte  = ksNumeric + 13
	ksPositive8Byte  = ksNumeric + 20 // a fractional double: a ctype like it and 8 bytes
	ksStringLike     = 60
	ksOID            = 100
	ksBool           = 110
	ksDate           = 120
	ksOtherTypeBytes = 70 // objects, arrays and the rest: the ctype and the BSON value, an upper bound
)

// appendKeyString appends v's KeyString encoding (a missing field is
// indexed as null).
func appendKeyString(key []byte, tb *typeBits, v bson.RawValue) []byte {
	switch v.Type {
	case 0, bson.TypeNull, bson.TypeUndefined:
		return append(key, ksNullish)
	case bson.TypeString, bson.TypeSymbol:
		s, _ := v.StringValueOK()
		if v.Type == bson.TypeSymbol {
			s, _ = v.SymbolOK()
			tb.add(1, 1)
		} else {
			tb.add(0, 1)
		}
		key = append(key, ksStringLike)
		for i := 0; i < len(s); i++ {
			key = append(key, s[i])
			if s[i] == 0 {
				key = append(key, 0xFF)
			}
		}
		return append(key, 0)
	case bson.TypeInt32:
		tb.add(0, 2)
		return appendInteger(key, int64(v.Int32()))
	case bson.TypeInt64:
		tb.add(2, 2)
		return appendInteger(key, v.Int64())
	case bson.TypeDouble:
		tb.add(1, 2)
		f := v.Double()
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return appendInteger(key, int64(f))
		}
		return append(append(key, ksPositive8Byte), make([]byte, 8)...)
	case bson.TypeObjectID:
		id := v.ObjectID()
		return append(append(key, ksOID), id[:]...)
	case bson.TypeDateTime:
		return binary.BigEndian.AppendUint64(append(key, ksDate), uint64(v.DateTime())^(1<<63))
	case bson.TypeBoolean:
		if v.Boolean() {
			return append(key, ksBool+1)
		}
		return append(key, ksBool)
	}
	return append(append(key, ksOtherTypeBytes), v.Value...)
}

// appendInteger is KeyString's integer: zero as one byte, else a ctype
// naming the sign and the byte count of magnitude<<1, then those bytes
// (inverted when negative).
func appendInteger(key []byte, n int64) []byte {
	if n == 0 {
		return append(key, ksNumericZero)
	}
	neg := n < 0
	mag := uint64(n)
	if neg {
		mag = uint64(-n)
	}
	v := mag << 1
	width := (bits.Len64(v) + 7) / 8
	if neg {
		key = append(key, byte(ksNegative1Byte-(width-1)))
	} else {
		key = append(key, byte(ksPositive1Byte+(width-1)))
	}
	for i := width - 1; i >= 0; i-- {
		b := byte(v >> (8 * i))
		if neg {
			b = ^b
		}
		key = append(key, b)
	}
	return key
}

// appendRecordID is KeyString's RecordId of an int64: 2 bytes up to 10
// bits, one more per further 8 bits.
func appendRecordID(key []byte, rid uint64) []byte {
	extra := 0
	if b := bits.Len64(rid); b > 10 {
		extra = (b - 10 + 7) / 8
	}
	key = append(key, byte(extra<<5)|byte(rid>>(5+8*extra)))
	for i := extra - 1; i >= 0; i-- {
		key = append(key, byte(rid>>(5+8*i)))
	}
	return append(key, byte(rid<<3)|byte(extra))
}
