package penalty

import (
	"math"
	"math/big"
)

// compare evaluates x op y with CPython's rich comparison semantics for
// the value types of a penalty program:
//
//   - int and float compare exactly, without converting the int to float
//     (long_richcompare / float_richcompare); a NaN compares false;
//   - a complex number supports only ==, equal when both parts are equal,
//     with a zero imaginary part compared exactly against an int
//     (complex_richcompare); ordering a complex number is a TypeError;
//   - the empty tuple equals itself and is ordered only against a tuple
//     (() <= () is True, () < () is False); == with anything else is
//     False, ordering against anything else a TypeError.
func compare(op cmpOp, x, y value) (bool, *Error) {
	if x.k == vTuple || y.k == vTuple {
		if x.k == vTuple && y.k == vTuple {
			return op == cEQ || op == cLE || op == cGE, nil
		}
		if op == cEQ {
			return false, nil
		}
		return false, notOrderable(op, x, y)
	}
	if x.k == vComplex || y.k == vComplex {
		if op != cEQ {
			return false, notOrderable(op, x, y)
		}
		return complexEqual(x, y), nil
	}
	c, ok := compareReal(x, y)
	if !ok {
		return false, nil // NaN
	}
	switch op {
	case cEQ:
		return c == 0, nil
	case cLT:
		return c < 0, nil
	case cGT:
		return c > 0, nil
	case cLE:
		return c <= 0, nil
	}
	return c >= 0, nil
}

func notOrderable(op cmpOp, x, y value) *Error {
	return newError(KindType, "'"+op.String()+"' not supported between instances of '"+x.typeName()+"' and '"+y.typeName()+"'")
}

// complexEqual is complex_richcompare for ==, with at least one complex
// operand.
func complexEqual(x, y value) bool {
	if x.k != vComplex {
		x, y = y, x
	}
	switch y.k {
	case vComplex:
		return x.f == y.f && x.imag() == y.imag()
	case vFloat:
		return x.f == y.f && x.imag() == 0
	}
	// An int: equal only with a zero imaginary part and an exactly equal
	// real part.
	if x.imag() != 0 {
		return false
	}
	c, ok := compareReal(floatValue(x.f), y)
	return ok && c == 0
}

// compareReal compares two real numbers (int or float) exactly and
// returns -1, 0 or 1; ok is false when a NaN makes them unordered.
func compareReal(x, y value) (c int, ok bool) {
	switch {
	case x.k == vFloat && y.k == vFloat:
		switch {
		case x.f < y.f:
			return -1, true
		case x.f > y.f:
			return 1, true
		case x.f == y.f:
			return 0, true
		}
		return 0, false
	case x.k == vFloat:
		return compareFloatInt(x.f, y)
	case y.k == vFloat:
		c, ok := compareFloatInt(y.f, x)
		return -c, ok
	case x.k == vInt && y.k == vInt:
		switch {
		case x.i < y.i:
			return -1, true
		case x.i > y.i:
			return 1, true
		}
		return 0, true
	}
	return x.toBig().Cmp(y.toBig()), true
}

// compareFloatInt compares a float with an int exactly.
func compareFloatInt(f float64, n value) (int, bool) {
	switch {
	case math.IsNaN(f):
		return 0, false
	case math.IsInf(f, 1):
		return 1, true
	case math.IsInf(f, -1):
		return -1, true
	}
	if n.k == vBig {
		return new(big.Float).SetFloat64(f).Cmp(new(big.Float).SetInt(n.b)), true
	}
	// f is finite; n fits in int64.
	if f >= 0x1p63 {
		return 1, true
	}
	if f < -0x1p63 {
		return -1, true
	}
	t := int64(f) // truncation, exact for |f| < 2**63
	switch {
	case t < n.i:
		return -1, true
	case t > n.i:
		return 1, true
	}
	frac := f - float64(t) // exact
	switch {
	case frac < 0:
		return -1, true
	case frac > 0:
		return 1, true
	}
	return 0, true
}
