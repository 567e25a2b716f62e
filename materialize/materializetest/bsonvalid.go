package materializetest

import "go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

// DeepValidBSON reports whether b is exactly one BSON document, valid at
// every depth (at most 200 levels): bson.Raw.Validate checks only the top
// level, and it accepts elements that run past the document's declared
// length. The fuzz targets use it to tell well-formed inputs.
func DeepValidBSON(b []byte) bool { return validDoc(b, 0) }

func validDoc(d []byte, depth int) bool {
	length, _, ok := bsoncore.ReadLength(d)
	if !ok || depth > 200 || length < 5 || int(length) != len(d) || d[length-1] != 0 {
		return false
	}
	rem := d[4 : length-1]
	for len(rem) > 0 {
		var e bsoncore.Element
		e, rem, ok = bsoncore.ReadElement(rem)
		if !ok || e.Validate() != nil {
			return false
		}
		v := e.Value()
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			if !validDoc(v.Data, depth+1) {
				return false
			}
		case bsoncore.TypeCodeWithScope:
			_, scope, ok := v.CodeWithScopeOK()
			if !ok || !validDoc(scope, depth+1) {
				return false
			}
		}
	}
	return true
}
