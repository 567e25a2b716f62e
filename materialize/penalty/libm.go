package penalty

// CPython computes float ** float with the C library's pow, and complex
// powers with hypot, pow, atan2, exp, log, cos and sin. Go's math.Pow
// and friends are different implementations and disagree with glibc in
// the last bit for a large share of inputs, so these wrappers call libm
// through cgo. They also return errno, which CPython inspects (ERANGE is
// an OverflowError, EDOM a ZeroDivisionError in complex_pow).
//
// Parity assumes the same libm as the Back-End's CPython (glibc).
//
// The C wrappers call libm through a volatile function pointer so that
// the C compiler cannot treat the call as a known builtin: GCC models cos
// and sin as never setting errno (and, under -fno-math-errno, every math
// function) and would fold the errno read after them to 0, while glibc
// sets EDOM for cos(inf) and sin(inf) and CPython sees it.

/*
#cgo LDFLAGS: -lm
#include <errno.h>
#include <math.h>

typedef struct { double r; int err; } penalty_result;

typedef double (*penalty_fn1)(double);
typedef double (*penalty_fn2)(double, double);

static penalty_result penalty_call1(penalty_fn1 fn, double x) {
	penalty_fn1 volatile f = fn;
	penalty_result out;
	errno = 0;
	out.r = f(x);
	out.err = errno;
	return out;
}

static penalty_result penalty_call2(penalty_fn2 fn, double x, double y) {
	penalty_fn2 volatile f = fn;
	penalty_result out;
	errno = 0;
	out.r = f(x, y);
	out.err = errno;
	return out;
}

static penalty_result penalty_pow(double x, double y)   { return penalty_call2(pow, x, y); }
static penalty_result penalty_hypot(double x, double y) { return penalty_call2(hypot, x, y); }
static penalty_result penalty_atan2(double y, double x) { return penalty_call2(atan2, y, x); }
static penalty_result penalty_exp(double x)             { return penalty_call1(exp, x); }
static penalty_result penalty_log(double x)             { return penalty_call1(log, x); }
static penalty_result penalty_cos(double x)             { return penalty_call1(cos, x); }
static penalty_result penalty_sin(double x)             { return penalty_call1(sin, x); }
static double penalty_fmod(double x, double y)          { return fmod(x, y); }
*/
import "C"

import "syscall"

func result(r C.penalty_result) (float64, syscall.Errno) {
	return float64(r.r), syscall.Errno(r.err)
}

func libmPow(x, y float64) (float64, syscall.Errno) {
	return result(C.penalty_pow(C.double(x), C.double(y)))
}

func libmHypot(x, y float64) (float64, syscall.Errno) {
	return result(C.penalty_hypot(C.double(x), C.double(y)))
}

func libmAtan2(y, x float64) (float64, syscall.Errno) {
	return result(C.penalty_atan2(C.double(y), C.double(x)))
}

func libmExp(x float64) (float64, syscall.Errno) { return result(C.penalty_exp(C.double(x))) }
func libmLog(x float64) (float64, syscall.Errno) { return result(C.penalty_log(C.double(x))) }
func libmCos(x float64) (float64, syscall.Errno) { return result(C.penalty_cos(C.double(x))) }
func libmSin(x float64) (float64, syscall.Errno) { return result(C.penalty_sin(C.double(x))) }

// libmFmod is C's fmod. The evaluator uses math.Mod, which is exact like
// fmod; tests use libmFmod to check that they agree.
func libmFmod(x, y float64) float64 {
	return float64(C.penalty_fmod(C.double(x), C.double(y)))
}
