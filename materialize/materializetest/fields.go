package materializetest

import (
	"reflect"
	"slices"
	"testing"
)

// FieldsNamed keeps a list of struct fields in step with the structs:
// named maps "Prefix.Field" to what covers the field (or why it needs no
// cover), types maps each prefix ("Store.") to its struct type. It fails
// t for every field named lacks (what adds a field must say how it is
// covered) and every name no field has.
func FieldsNamed(t testing.TB, named map[string]string, types map[string]reflect.Type) {
	t.Helper()
	var names []string
	for prefix, typ := range types {
		for f := range typ.Fields() {
			names = append(names, prefix+f.Name)
		}
	}
	for _, n := range names {
		if _, ok := named[n]; !ok {
			t.Errorf("%s is not named: cover it or say why it needs no cover", n)
		}
	}
	for n := range named {
		if !slices.Contains(names, n) {
			t.Errorf("%s is named but no longer exists", n)
		}
	}
}
