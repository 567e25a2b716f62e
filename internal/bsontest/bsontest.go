// Package bsontest builds, rewrites and walks BSON documents for the tests
// of every package, byte for byte: a rewrite keeps the order and the bytes
// of every element it does not name, as a test comparing a corrected dump
// with its input needs. (materialize/materializetest holds the derive
// vectors and the bson.D shorthands.)
package bsontest

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Doc assembles encoded elements into a document.
func Doc(elems ...[]byte) bson.Raw {
	n := 5
	for _, e := range elems {
		n += len(e)
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, n), uint32(n))
	for _, e := range elems {
		out = append(out, e...)
	}
	return append(out, 0)
}

// Element encodes one element from its type, key and value bytes.
func Element(typ bson.Type, key string, value []byte) []byte {
	out := append([]byte{byte(typ)}, key...)
	out = append(out, 0)
	return append(out, value...)
}

// Marshal is bson.Marshal, failing t on an error.
func Marshal(t testing.TB, v any) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Without returns doc without its top-level elements named keys, keeping
// every other element's bytes.
func Without(t testing.TB, doc bson.Raw, keys ...string) bson.Raw {
	t.Helper()
	els, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var keep [][]byte
	for _, e := range els {
		if !slices.Contains(keys, e.Key()) {
			keep = append(keep, e)
		}
	}
	return Doc(keep...)
}

// MapEntries returns homework doc with every studentStatus.<u>.<p> element
// replaced by fn's (an encoded element; fn is called in document order),
// keeping every other element's bytes and order. A studentStatus, or a
// studentStatus.<u>, that is not a document is kept as it is.
func MapEntries(t testing.TB, doc bson.Raw, fn func(user string, e bson.RawElement) []byte) bson.Raw {
	t.Helper()
	els, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range els {
		ss, ok := e.Value().DocumentOK()
		if e.Key() != "studentStatus" || !ok {
			out = append(out, e)
			continue
		}
		users, err := ss.Elements()
		if err != nil {
			t.Fatal(err)
		}
		var us [][]byte
		for _, u := range users {
			probs, ok := u.Value().DocumentOK()
			if !ok {
				us = append(us, u)
				continue
			}
			pels, err := probs.Elements()
			if err != nil {
				t.Fatal(err)
			}
			var ps [][]byte
			for _, p := range pels {
				ps = append(ps, fn(u.Key(), p))
			}
			us = append(us, Element(bson.TypeEmbeddedDocument, u.Key(), Doc(ps...)))
		}
		out = append(out, Element(bson.TypeEmbeddedDocument, "studentStatus", Doc(us...)))
	}
	return Doc(out...)
}

// NullEntries returns homework doc with the value of every
// studentStatus.<u>.<p> entry replaced by null, keeping every key, its
// order and every other byte: what a rewrite of the derived values may
// not change.
func NullEntries(t testing.TB, doc bson.Raw) bson.Raw {
	t.Helper()
	return MapEntries(t, doc, func(_ string, p bson.RawElement) []byte {
		return Element(bson.TypeNull, p.Key(), nil)
	})
}

// Entry is one studentStatus.<user>.<problem> element of a homework.
type Entry struct {
	User, Problem string
	Value         bson.RawValue
}

// Entries returns the studentStatus.<user>.<problem> elements of homework
// doc in document order. A studentStatus that is absent or not a document
// has none; a studentStatus.<user> that is not a document is skipped. An
// unreadable element list fails t.
func Entries(t testing.TB, doc bson.Raw) []Entry {
	t.Helper()
	ss, ok := doc.Lookup("studentStatus").DocumentOK()
	if !ok {
		return nil
	}
	users, err := ss.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for _, u := range users {
		probs, ok := u.Value().DocumentOK()
		if !ok {
			continue
		}
		ps, err := probs.Elements()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			out = append(out, Entry{User: u.Key(), Problem: p.Key(), Value: p.Value()})
		}
	}
	return out
}

// ConvertNumbers re-encodes the int32 values of doc, at any depth, whose
// path (keys from the top, array indexes included) sel accepts as typ,
// bson.TypeInt64 or bson.TypeDouble, keeping every other element's bytes.
func ConvertNumbers(t testing.TB, doc bson.Raw, typ bson.Type, sel func(path []string) bool) bson.Raw {
	t.Helper()
	var conv func(doc bson.Raw, path []string) bson.Raw
	conv = func(doc bson.Raw, path []string) bson.Raw {
		els, err := doc.Elements()
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for _, e := range els {
			p := append(slices.Clone(path), e.Key())
			val := e.Value()
			switch {
			case val.Type == bson.TypeInt32 && sel(p):
				n := val.Int32()
				if typ == bson.TypeInt64 {
					out = append(out, Element(typ, e.Key(), binary.LittleEndian.AppendUint64(nil, uint64(int64(n)))))
				} else {
					out = append(out, Element(typ, e.Key(), binary.LittleEndian.AppendUint64(nil, math.Float64bits(float64(n)))))
				}
			case val.Type == bson.TypeEmbeddedDocument || val.Type == bson.TypeArray:
				sub := conv(bson.Raw(val.Value), p)
				out = append(out, Element(val.Type, e.Key(), sub))
			default:
				out = append(out, e)
			}
		}
		return Doc(out...)
	}
	return conv(doc, nil)
}

// renameValue replaces a string value found in names.
func renameValue(v bson.RawValue, names map[string]string) (bson.Type, []byte) {
	if s, ok := v.StringValueOK(); ok {
		if n, ok := names[s]; ok {
			_, b, _ := bson.MarshalValue(n)
			return bson.TypeString, b
		}
	}
	return v.Type, v.Value
}

// RenameUsers returns doc with the string value of each field in fields
// and the keys of studentStatus renamed by names.
func RenameUsers(t testing.TB, doc bson.Raw, names map[string]string, fields ...string) bson.Raw {
	t.Helper()
	els, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range els {
		switch {
		case slices.Contains(fields, e.Key()):
			typ, val := renameValue(e.Value(), names)
			out = append(out, Element(typ, e.Key(), val))
		case e.Key() == "studentStatus" && e.Value().Type == bson.TypeEmbeddedDocument:
			users, err := e.Value().Document().Elements()
			if err != nil {
				t.Fatal(err)
			}
			var us [][]byte
			for _, u := range users {
				k := u.Key()
				if n, ok := names[k]; ok {
					k = n
				}
				us = append(us, Element(u.Value().Type, k, u.Value().Value))
			}
			out = append(out, Element(bson.TypeEmbeddedDocument, "studentStatus", Doc(us...)))
		default:
			out = append(out, e)
		}
	}
	return Doc(out...)
}
