//go:build !cgo

package penalty

// This package calls the C library's pow (and, for complex powers, hypot,
// atan2, exp, log, cos, sin) through cgo, because CPython does and Go's
// pure-Go math.Pow differs from glibc's pow in the last bit for a large
// share of inputs, which changes int() of results. Building without cgo
// (CGO_ENABLED=0) would silently lose parity with CPython, so it fails
// here, on an identifier that says why.
var _ = penalty_requires_cgo_for_libm_pow_parity_with_CPython
