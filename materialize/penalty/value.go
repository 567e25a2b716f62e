package penalty

import (
	"math"
	"math/big"
	"math/bits"
)

// maxIntBits bounds every integer a program may compute: an intermediate
// integer whose magnitude needs more than maxIntBits bits is a KindLimit
// error. Operations whose result could be large (*, **, <<) decide from
// bit-length bounds before computing.
const maxIntBits = 65536

// vkind is the Python type of a value. bool is folded into int: True and
// False behave as 1 and 0 in every operation a whitelisted program can
// perform, including int() of the result.
type vkind uint8

// vInt and vFloat are 0 and 1 so that x.k|y.k tells the fast paths of
// binary apart: 0 for two small ints, 1 for a float with a float or a
// small int.
const (
	vInt     vkind = iota // int that fits in int64: i
	vFloat                // float: f
	vBig                  // int outside int64: b
	vComplex              // complex: f + imag()*j
	vTuple                // the empty tuple, the only tuple "()" can make
)

// value is a Python object of a penalty program. It is passed by value;
// only the vBig kind refers to memory, and that memory is never modified
// after the value is made, so values may be shared freely.
type value struct {
	k vkind
	i int64   // vInt: the value; vComplex: the bits of the imaginary part
	f float64 // vFloat: the value; vComplex: the real part
	b *big.Int
}

func intValue(i int64) value     { return value{k: vInt, i: i} }
func floatValue(f float64) value { return value{k: vFloat, f: f} }

// complexValue stores the imaginary part in the bits of i, which keeps
// value small for the common kinds.
func complexValue(c cplx) value {
	return value{k: vComplex, f: c.re, i: int64(math.Float64bits(c.im))}
}

// imag is the imaginary part of a complex value.
func (v value) imag() float64 { return math.Float64frombits(uint64(v.i)) }

// boolValue is True or False, which behave as the ints 1 and 0.
func boolValue(t bool) value {
	if t {
		return value{k: vInt, i: 1}
	}
	return value{k: vInt}
}

// bigValue makes an int value from b, which the caller must not modify
// afterwards: an int64 if it fits, else a vBig value, or a KindLimit
// error if b needs more than maxIntBits bits.
func bigValue(b *big.Int) (value, *Error) {
	if b.IsInt64() {
		return intValue(b.Int64()), nil
	}
	if b.BitLen() > maxIntBits {
		return value{}, errLimit()
	}
	return value{k: vBig, b: b}, nil
}

func errLimit() *Error {
	return newError(KindLimit, "integer result would exceed 65536 bits")
}

func (v value) isInt() bool { return v.k == vInt || v.k == vBig }

// toBig returns v (an int) as a big.Int. The result may be v's own
// big.Int and must not be modified.
func (v value) toBig() *big.Int {
	if v.k == vBig {
		return v.b
	}
	return big.NewInt(v.i)
}

// sign returns -1, 0 or 1 for an int value.
func (v value) sign() int {
	if v.k == vBig {
		return v.b.Sign()
	}
	switch {
	case v.i < 0:
		return -1
	case v.i > 0:
		return 1
	}
	return 0
}

// bitLen is the bit length of |v| for an int value.
func (v value) bitLen() int {
	if v.k == vBig {
		return v.b.BitLen()
	}
	u := uint64(v.i)
	if v.i < 0 {
		u = -u
	}
	return bits.Len64(u)
}

// typeName is the Python type name of v, for error messages.
func (v value) typeName() string {
	switch v.k {
	case vInt, vBig:
		return "int"
	case vFloat:
		return "float"
	case vComplex:
		return "complex"
	}
	return "tuple"
}

// truth mirrors PyObject_IsTrue: nonzero numbers (NaN included) are true,
// the empty tuple is false.
func (v value) truth() bool {
	switch v.k {
	case vInt:
		return v.i != 0
	case vBig:
		return true
	case vFloat:
		return v.f != 0
	case vComplex:
		return v.f != 0 || v.imag() != 0
	}
	return false
}

// toFloat converts a real number to float64 as CPython's PyLong_AsDouble
// does for ints: correctly rounded (half to even), and an OverflowError
// when the rounded value does not fit in a double.
func (v value) toFloat() (float64, *Error) {
	switch v.k {
	case vInt:
		return float64(v.i), nil // exact or correctly rounded
	case vBig:
		f, _ := new(big.Float).SetInt(v.b).Float64()
		if math.IsInf(f, 0) {
			return 0, newError(KindOverflow, "int too large to convert to float")
		}
		return f, nil
	}
	return v.f, nil
}

// toComplex converts a number to complex as complexobject.c's to_complex:
// ints through PyLong_AsDouble, floats with a zero imaginary part.
func (v value) toComplex() (cplx, *Error) {
	if v.k == vComplex {
		return cplx{v.f, v.imag()}, nil
	}
	f, err := v.toFloat()
	return cplx{f, 0}, err
}

// resultInt64 mirrors int(d["score"]) followed by the int64 range check:
// an int must fit in int64 (else KindRange); a float is truncated toward
// zero (inf is an OverflowError, NaN a ValueError, as float.__trunc__
// raises) and must then fit; complex and tuple are TypeErrors.
func resultInt64(v value) (int64, *Error) {
	switch v.k {
	case vInt:
		return v.i, nil
	case vBig:
		return 0, newError(KindRange, "result does not fit in int64")
	case vFloat:
		switch {
		case math.IsNaN(v.f):
			return 0, newError(KindValue, "cannot convert float NaN to integer")
		case math.IsInf(v.f, 0):
			return 0, newError(KindOverflow, "cannot convert float infinity to integer")
		}
		t := math.Trunc(v.f)
		if t >= 0x1p63 || t < -0x1p63 {
			return 0, newError(KindRange, "result does not fit in int64")
		}
		return int64(t), nil
	}
	return 0, newError(KindType, "int() argument must be a string, a bytes-like object or a real number, not '"+v.typeName()+"'")
}
