package penalty

import (
	"math"
	"syscall"
)

// floatBinary applies op to two floats with CPython's float semantics
// (Objects/floatobject.c): + - * are plain IEEE 754 double arithmetic
// (overflow to inf is silent), / and // raise ZeroDivisionError for a
// zero divisor, ** is float_pow.
func floatBinary(op binOp, a, b float64) (value, *Error) {
	switch op {
	case bAdd:
		return floatValue(a + b), nil
	case bSub:
		return floatValue(a - b), nil
	case bMul:
		return floatValue(a * b), nil
	case bTrueDiv:
		if b == 0 {
			return value{}, newError(KindZeroDivision, "float division by zero")
		}
		return floatValue(a / b), nil
	case bFloorDiv:
		if b == 0 {
			return value{}, newError(KindZeroDivision, "float floor division by zero")
		}
		return floatValue(floatFloorDiv(a, b)), nil
	case bPow:
		return floatPow(a, b)
	}
	return value{}, newError(KindType, "unsupported operand type(s) for "+op.String()+": 'float'")
}

// floatFloorDiv mirrors the floor-division half of CPython's
// _float_div_mod (used by float_floor_div), for b != 0: it derives the
// quotient from fmod so that it is consistent with %, snaps it to the
// nearest integer, and keeps the sign of a zero quotient. math.Mod is
// exact, as C's fmod is.
func floatFloorDiv(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 {
		if (b < 0) != (mod < 0) {
			// The remainder must take the sign of the divisor.
			div -= 1.0
		}
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	floor := math.Floor(div)
	if div-floor > 0.5 {
		floor += 1.0
	}
	return floor
}

// floatPow mirrors CPython's float_pow, which settles the special cases
// itself before calling the C library's pow:
//
//	x**0 is 1 (even for NaN), NaN**y is NaN, x**NaN is NaN unless x is 1;
//	x**±inf and ±inf**y follow C99 Annex F;
//	0**y is a ZeroDivisionError for y < 0 (keeping the sign of 0 for odd y);
//	a negative base with a non-integer exponent gives a complex result
//	(complex_pow), an integer exponent is applied to |x| and the sign
//	restored; (-1)**n and 1**y are ±1;
//	otherwise pow(x, y) from libm, where ERANGE with a non-zero result
//	(overflow) is an OverflowError.
func floatPow(iv, iw float64) (value, *Error) {
	if iw == 0 {
		return floatValue(1), nil
	}
	if math.IsNaN(iv) {
		return floatValue(iv), nil
	}
	if math.IsNaN(iw) {
		if iv == 1 {
			return floatValue(1), nil
		}
		return floatValue(iw), nil
	}
	if math.IsInf(iw, 0) {
		iv = math.Abs(iv)
		switch {
		case iv == 1:
			return floatValue(1), nil
		case (iw > 0) == (iv > 1):
			return floatValue(math.Abs(iw)), nil
		}
		return floatValue(0), nil
	}
	if math.IsInf(iv, 0) {
		odd := isOddInteger(iw)
		if iw > 0 {
			if odd {
				return floatValue(iv), nil
			}
			return floatValue(math.Abs(iv)), nil
		}
		if odd {
			return floatValue(math.Copysign(0, iv)), nil
		}
		return floatValue(0), nil
	}
	if iv == 0 {
		if iw < 0 {
			return value{}, newError(KindZeroDivision, "0.0 cannot be raised to a negative power")
		}
		if isOddInteger(iw) {
			return floatValue(iv), nil
		}
		return floatValue(0), nil
	}
	negate := false
	if iv < 0 {
		if iw != math.Floor(iw) {
			// Negative numbers raised to fractional powers become complex.
			return complexPow(cplx{iv, 0}, cplx{iw, 0})
		}
		iv = -iv
		negate = isOddInteger(iw)
	}
	if iv == 1 {
		if negate {
			return floatValue(-1), nil
		}
		return floatValue(1), nil
	}
	ix, errno := libmPow(iv, iw)
	// _Py_ADJUST_ERANGE1: an infinite result is an overflow even if libm
	// did not say so; ERANGE with a zero result is a harmless underflow.
	if errno == 0 && math.IsInf(ix, 0) {
		errno = syscall.ERANGE
	} else if errno == syscall.ERANGE && ix == 0 {
		errno = 0
	}
	if negate {
		ix = -ix
	}
	switch errno {
	case 0:
		return floatValue(ix), nil
	case syscall.ERANGE:
		return value{}, newError(KindOverflow, "(34, 'Numerical result out of range')")
	}
	return value{}, newError(KindValue, "pow: "+errno.Error())
}

// isOddInteger mirrors DOUBLE_IS_ODD_INTEGER: fmod(fabs(x), 2.0) == 1.0.
func isOddInteger(x float64) bool {
	return math.Mod(math.Abs(x), 2) == 1
}
