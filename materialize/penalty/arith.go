package penalty

import (
	"math"
	"math/big"
	"math/bits"
)

// Python's binary operators on the value types of a penalty program.
// Dispatch follows CPython's binary_op1/PyNumber_* protocol as it plays
// out for int, float, complex and tuple: the "widest" numeric type of the
// two operands does the work (int < float < complex), converting the
// other operand first; the tuple takes part only in + (with a tuple) and
// * (with an int, as a repeat count); every other combination is a
// TypeError raised before any conversion.

// rank orders the numeric types as CPython's coercion does.
func rank(v value) int {
	switch v.k {
	case vInt, vBig:
		return 0
	case vFloat:
		return 1
	}
	return 2 // complex
}

func unsupported(op binOp, x, y value) *Error {
	return newError(KindType, "unsupported operand type(s) for "+op.String()+": '"+x.typeName()+"' and '"+y.typeName()+"'")
}

// binary applies op to x and y.
func binary(op binOp, x, y value) (value, *Error) {
	switch x.k | y.k {
	case vInt:
		if r, ok := smallIntBinary(op, x.i, y.i); ok {
			return intValue(r), nil
		}
		return intBinary(op, x, y)
	case vFloat:
		if op != bLShift && op != bRShift {
			// A float with a float or an int64, which converts exactly
			// or correctly rounded.
			a, b := x.f, y.f
			if x.k == vInt {
				a = float64(x.i)
			}
			if y.k == vInt {
				b = float64(y.i)
			}
			return floatBinary(op, a, b)
		}
	}
	if x.k == vTuple || y.k == vTuple {
		return tupleBinary(op, x, y)
	}
	r := max(rank(x), rank(y))
	switch r {
	case 0:
		return intBinary(op, x, y)
	case 1:
		switch op {
		case bLShift, bRShift:
			return value{}, unsupported(op, x, y)
		}
		a, err := x.toFloat()
		if err != nil {
			return value{}, err
		}
		b, err := y.toFloat()
		if err != nil {
			return value{}, err
		}
		return floatBinary(op, a, b)
	}
	switch op {
	case bFloorDiv, bLShift, bRShift:
		return value{}, unsupported(op, x, y)
	}
	a, err := x.toComplex()
	if err != nil {
		return value{}, err
	}
	b, err := y.toComplex()
	if err != nil {
		return value{}, err
	}
	return complexBinary(op, a, b)
}

// tupleBinary handles an operation with at least one empty tuple operand:
// () + () is (), () * n and n * () are () for any int n that fits in a
// Py_ssize_t (OverflowError otherwise: "cannot fit 'int' into an
// index-sized integer"), everything else is a TypeError.
func tupleBinary(op binOp, x, y value) (value, *Error) {
	switch op {
	case bAdd:
		if x.k == vTuple && y.k == vTuple {
			return value{k: vTuple}, nil
		}
		if x.k == vTuple {
			return value{}, newError(KindType, "can only concatenate tuple (not \""+y.typeName()+"\") to tuple")
		}
	case bMul:
		n := y
		if x.k != vTuple {
			n = x
		}
		switch n.k {
		case vInt:
			return value{k: vTuple}, nil
		case vBig:
			return value{}, newError(KindOverflow, "cannot fit 'int' into an index-sized integer")
		}
		return value{}, newError(KindType, "can't multiply sequence by non-int of type '"+n.typeName()+"'")
	}
	return value{}, unsupported(op, x, y)
}

// unary applies -x or +x.
func unary(op uint8, x value) (value, *Error) {
	switch x.k {
	case vInt:
		if op == unaryPos {
			return x, nil
		}
		if x.i == math.MinInt64 {
			return bigValue(new(big.Int).Neg(x.toBig()))
		}
		return intValue(-x.i), nil
	case vBig:
		if op == unaryPos {
			return x, nil
		}
		return bigValue(new(big.Int).Neg(x.b))
	case vFloat:
		if op == unaryPos {
			return x, nil
		}
		return floatValue(-x.f), nil
	case vComplex:
		if op == unaryPos {
			return x, nil
		}
		return complexValue(cplx{-x.f, -x.imag()}), nil
	}
	name := "-"
	if op == unaryPos {
		name = "+"
	}
	return value{}, newError(KindType, "bad operand type for unary "+name+": 'tuple'")
}

// intBinary applies op to two ints with CPython's long semantics in
// math/big (bigValue narrows a result that fits back to int64). binary
// tries smallIntBinary first, so + - * // of two int64s arrive here only
// when they overflow or divide by zero: no int64 fast path is repeated.
func intBinary(op binOp, x, y value) (value, *Error) {
	switch op {
	case bAdd:
		return bigValue(new(big.Int).Add(x.toBig(), y.toBig()))
	case bSub:
		return bigValue(new(big.Int).Sub(x.toBig(), y.toBig()))
	case bMul:
		if x.sign() == 0 || y.sign() == 0 {
			return intValue(0), nil
		}
		// |x*y| has bitLen(x)+bitLen(y)-1 or bitLen(x)+bitLen(y) bits.
		if x.bitLen()+y.bitLen()-1 > maxIntBits {
			return value{}, errLimit()
		}
		return bigValue(new(big.Int).Mul(x.toBig(), y.toBig()))
	case bTrueDiv:
		return intTrueDiv(x, y)
	case bFloorDiv:
		if y.sign() == 0 {
			return value{}, newError(KindZeroDivision, "integer division or modulo by zero")
		}
		q, r := new(big.Int).QuoRem(x.toBig(), y.toBig(), new(big.Int))
		if r.Sign() != 0 && r.Sign() != y.sign() {
			q.Sub(q, big.NewInt(1))
		}
		return bigValue(q)
	case bPow:
		if y.sign() < 0 {
			// long_pow hands a negative exponent to float_pow.
			a, err := x.toFloat()
			if err != nil {
				return value{}, err
			}
			b, err := y.toFloat()
			if err != nil {
				return value{}, err
			}
			return floatPow(a, b)
		}
		return intPow(x, y)
	case bLShift:
		return lshift(x, y)
	case bRShift:
		return rshift(x, y)
	}
	return value{}, unsupported(op, x, y)
}

// smallIntBinary is the int64 fast path of + - * //; ok is false when
// the operation needs intBinary (overflow, division by zero, others).
func smallIntBinary(op binOp, a, b int64) (int64, bool) {
	switch op {
	case bAdd:
		s := a + b
		return s, (a^s)&(b^s) >= 0
	case bSub:
		s := a - b
		return s, (a^b)&(a^s) >= 0
	case bMul:
		return mul64(a, b)
	case bFloorDiv:
		if b == 0 || b == -1 && a == math.MinInt64 {
			return 0, false
		}
		q := a / b
		if a%b != 0 && (a < 0) != (b < 0) {
			q--
		}
		return q, true
	}
	return 0, false
}

// mul64 returns a*b and whether it did not overflow int64.
func mul64(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if a < 0 {
		hi -= uint64(b)
	}
	if b < 0 {
		hi -= uint64(a)
	}
	p := int64(lo)
	return p, int64(hi) == p>>63
}

// intTrueDiv mirrors long_true_divide: the correctly rounded quotient,
// ZeroDivisionError for a zero divisor, OverflowError when the rounded
// quotient does not fit in a double; the sign of a zero result is the
// sign of the true quotient (0 / -5 is -0.0).
func intTrueDiv(x, y value) (value, *Error) {
	if y.sign() == 0 {
		return value{}, newError(KindZeroDivision, "division by zero")
	}
	const exact = 1 << 53 // ints up to 2**53 convert to float exactly
	if x.k == vInt && y.k == vInt && x.i >= -exact && x.i <= exact && y.i >= -exact && y.i <= exact {
		return floatValue(float64(x.i) / float64(y.i)), nil
	}
	neg := (x.sign() < 0) != (y.sign() < 0)
	var f float64
	if x.sign() != 0 {
		var overflow bool
		f, overflow = quotient(new(big.Int).Abs(x.toBig()), new(big.Int).Abs(y.toBig()))
		if overflow {
			return value{}, newError(KindOverflow, "integer division result too large for a float")
		}
	}
	if neg {
		f = -f
	}
	return floatValue(f), nil
}

// quotient returns a/b (a, b > 0) correctly rounded to float64, or
// overflow if the rounded value does not fit. It scales the division so
// that the integer quotient has at least 56 bits, and folds a non-zero
// remainder into the lowest bit ("sticky" bit): the value then rounds
// exactly as a/b does, including to subnormals, in one rounding by
// big.Float. The cost is one division, linear in the operand sizes.
func quotient(a, b *big.Int) (f float64, overflow bool) {
	d := a.BitLen() - b.BitLen() // 2**(d-1) < a/b < 2**(d+1)
	switch {
	case d-1 >= 1024:
		return 0, true
	case d+1 <= -1075:
		return 0, false // below half the smallest subnormal
	}
	shift := 56 - d // a * 2**shift / b >= 2**55
	num, den := a, b
	if shift > 0 {
		num = new(big.Int).Lsh(a, uint(shift))
	} else {
		den = new(big.Int).Lsh(b, uint(-shift))
	}
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	mant := q.Uint64() // q < 2**58
	if r.Sign() != 0 {
		mant |= 1
	}
	x := new(big.Float).SetUint64(mant) // exact: precision 64
	f, _ = x.SetMantExp(x, -shift).Float64()
	return f, math.IsInf(f, 0)
}

// intPow computes x ** y for ints with y >= 0, exactly, refusing (before
// computing) results known to exceed maxIntBits from the bounds
// (m-1)*y+1 <= bitLen(x**y) <= m*y where m = bitLen(x) >= 2.
func intPow(x, y value) (value, *Error) {
	if y.sign() == 0 {
		return intValue(1), nil
	}
	if x.k == vInt {
		switch x.i {
		case 0, 1:
			return x, nil
		case -1:
			odd := y.k == vInt && y.i&1 == 1 || y.k == vBig && y.b.Bit(0) == 1
			if odd {
				return x, nil
			}
			return intValue(1), nil
		}
	}
	if y.k == vBig || y.i > maxIntBits {
		return value{}, errLimit()
	}
	e := y.i
	if x.k == vInt && e < 64 {
		if r, ok := pow64(x.i, e); ok {
			return intValue(r), nil
		}
	}
	m := int64(x.bitLen())
	if (m-1)*e+1 > maxIntBits {
		return value{}, errLimit()
	}
	return bigValue(new(big.Int).Exp(x.toBig(), big.NewInt(e), nil))
}

// pow64 computes b**e by squaring; ok is false on int64 overflow.
func pow64(b, e int64) (r int64, ok bool) {
	r = 1
	for {
		if e&1 != 0 {
			if r, ok = mul64(r, b); !ok {
				return 0, false
			}
		}
		e >>= 1
		if e == 0 {
			return r, true
		}
		if b, ok = mul64(b, b); !ok {
			return 0, false
		}
	}
}

// lshift mirrors long_lshift: a negative count is a ValueError (checked
// first, even for 0 << -1), 0 << n is 0, and otherwise the result has
// bitLen(x)+n bits, which is refused beyond maxIntBits before shifting.
func lshift(x, y value) (value, *Error) {
	if y.sign() < 0 {
		return value{}, newError(KindValue, "negative shift count")
	}
	if x.sign() == 0 {
		return intValue(0), nil
	}
	if y.k == vBig || y.i > maxIntBits || int64(x.bitLen())+y.i > maxIntBits {
		return value{}, errLimit()
	}
	n := uint(y.i)
	if x.k == vInt && x.bitLen()+int(n) <= 62 {
		return intValue(x.i << n), nil
	}
	return bigValue(new(big.Int).Lsh(x.toBig(), n))
}

// rshift mirrors long_rshift: a negative count is a ValueError, and the
// shift rounds toward negative infinity, so a count at least the bit
// length gives 0 or -1.
func rshift(x, y value) (value, *Error) {
	if y.sign() < 0 {
		return value{}, newError(KindValue, "negative shift count")
	}
	if y.k == vBig || y.i >= int64(x.bitLen()) {
		if x.sign() < 0 {
			return intValue(-1), nil
		}
		return intValue(0), nil
	}
	if x.k == vInt {
		return intValue(x.i >> uint(y.i)), nil
	}
	return bigValue(new(big.Int).Rsh(x.b, uint(y.i)))
}
