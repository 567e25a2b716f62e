package penalty

import (
	"math"
	"syscall"
)

// Complex numbers enter a penalty program only through a negative base
// raised to a non-integer power, e.g. (-8) ** 0.5. From there they follow
// the algorithms of CPython 3.11's Objects/complexobject.c exactly, since
// a complex intermediate can still produce an int result (c == c, or a
// comparison of its parts after further arithmetic). Products are
// wrapped in float64() conversions so the Go compiler cannot fuse them
// into FMA instructions: CPython's C code rounds every operation.

// cplx is a Py_complex.
type cplx struct{ re, im float64 }

// complexBinary applies op to two complex numbers (complex_add, _sub,
// _mul, _div, _pow). Floor division and shifts never reach here.
func complexBinary(op binOp, a, b cplx) (value, *Error) {
	switch op {
	case bAdd:
		return complexValue(cplx{a.re + b.re, a.im + b.im}), nil
	case bSub:
		return complexValue(cplx{a.re - b.re, a.im - b.im}), nil
	case bMul:
		return complexValue(cProd(a, b)), nil
	case bTrueDiv:
		var errno syscall.Errno
		q := cQuot(a, b, &errno)
		if errno == syscall.EDOM {
			return value{}, newError(KindZeroDivision, "complex division by zero")
		}
		return complexValue(q), nil
	case bPow:
		return complexPow(a, b)
	}
	return value{}, newError(KindType, "unsupported operand type(s) for "+op.String()+": 'complex'")
}

// cProd is _Py_c_prod.
func cProd(a, b cplx) cplx {
	return cplx{
		float64(a.re*b.re) - float64(a.im*b.im),
		float64(a.re*b.im) + float64(a.im*b.re),
	}
}

// cQuot is _Py_c_quot (Smith's algorithm: divide through by the larger
// of |b.re| and |b.im|). A zero divisor sets errno to EDOM; a NaN in
// the divisor gives NaN parts.
func cQuot(a, b cplx, errno *syscall.Errno) cplx {
	absRe, absIm := math.Abs(b.re), math.Abs(b.im)
	switch {
	case absRe >= absIm:
		if absRe == 0 {
			*errno = syscall.EDOM
			return cplx{0, 0}
		}
		ratio := b.im / b.re
		denom := b.re + float64(b.im*ratio)
		return cplx{
			(a.re + float64(a.im*ratio)) / denom,
			(a.im - float64(a.re*ratio)) / denom,
		}
	case absIm >= absRe:
		ratio := b.re / b.im
		denom := float64(b.re*ratio) + b.im
		return cplx{
			(float64(a.re*ratio) + a.im) / denom,
			(float64(a.im*ratio) - a.re) / denom,
		}
	}
	return cplx{math.NaN(), math.NaN()}
}

// complexPow mirrors complex_pow: an exponent with a small integral real
// part and no imaginary part uses repeated multiplication (c_powi),
// anything else the polar formula (_Py_c_pow). errno collects what libm
// reports; _Py_ADJUST_ERANGE2 then turns an infinite part into ERANGE and
// forgets an ERANGE from a harmless underflow. EDOM is a
// ZeroDivisionError, ERANGE an OverflowError.
func complexPow(a, b cplx) (value, *Error) {
	var errno syscall.Errno
	var p cplx
	if b.im == 0 && b.re == math.Floor(b.re) && math.Abs(b.re) <= 100 {
		p = cPowi(a, int64(b.re), &errno)
	} else {
		p = cPow(a, b, &errno)
	}
	if math.IsInf(p.re, 0) || math.IsInf(p.im, 0) {
		if errno == 0 {
			errno = syscall.ERANGE
		}
	} else if errno == syscall.ERANGE {
		errno = 0
	}
	switch errno {
	case 0:
		return complexValue(p), nil
	case syscall.EDOM:
		return value{}, newError(KindZeroDivision, "0.0 to a negative or complex power")
	}
	return value{}, newError(KindOverflow, "complex exponentiation")
}

// cPowu is c_powu: x**n for n >= 0 by binary powering, starting from 1+0j
// and squaring once more than needed, as CPython does.
func cPowu(x cplx, n int64) cplx {
	r, p := cplx{1, 0}, x
	for mask := int64(1); mask > 0 && n >= mask; mask <<= 1 {
		if n&mask != 0 {
			r = cProd(r, p)
		}
		p = cProd(p, p)
	}
	return r
}

// cPowi is c_powi: x**n for a small integer n, with 1/x**-n for n <= 0.
func cPowi(x cplx, n int64, errno *syscall.Errno) cplx {
	if n > 0 {
		return cPowu(x, n)
	}
	return cQuot(cplx{1, 0}, cPowu(x, -n), errno)
}

// cPow is _Py_c_pow, the polar-form power, calling libm's hypot, pow,
// atan2, exp, log, cos and sin in CPython's order so that errno ends up
// as it does in C (the last function to set it wins).
func cPow(a, b cplx, errno *syscall.Errno) cplx {
	if b.re == 0 && b.im == 0 {
		return cplx{1, 0}
	}
	if a.re == 0 && a.im == 0 {
		if b.im != 0 || b.re < 0 {
			*errno = syscall.EDOM
		}
		return cplx{0, 0}
	}
	set := func(r float64, e syscall.Errno) float64 {
		if e != 0 {
			*errno = e
		}
		return r
	}
	vabs := set(libmHypot(a.re, a.im))
	length := set(libmPow(vabs, b.re))
	at := set(libmAtan2(a.im, a.re))
	phase := float64(at * b.re)
	if b.im != 0 {
		length /= set(libmExp(float64(at * b.im)))
		phase += float64(b.im * set(libmLog(vabs)))
	}
	return cplx{
		float64(length * set(libmCos(phase))),
		float64(length * set(libmSin(phase))),
	}
}
