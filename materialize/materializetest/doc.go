package materializetest

import (
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// D builds an ordered document from alternating keys and values:
// D("_id", 1, "homeworks", bson.A{}) — shorter than keyed bson.E literals.
func D(kv ...any) bson.D {
	if len(kv)%2 != 0 {
		panic("materializetest.D: odd number of arguments")
	}
	d := make(bson.D, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return d
}

// Raw is D marshalled to BSON; it panics on values BSON cannot encode.
func Raw(kv ...any) bson.Raw {
	b, err := bson.Marshal(D(kv...))
	if err != nil {
		panic(fmt.Sprintf("materializetest.Raw: %v", err))
	}
	return b
}
