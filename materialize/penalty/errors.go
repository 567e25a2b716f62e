package penalty

import "strconv"

// Kind classifies a penalty error. Every Kind is a "penalty error" in the
// sense of the derivation contract; the Kind says which CPython exception
// (or which documented refusal) the failure corresponds to.
type Kind int

// The kinds of penalty errors. The compile-time kinds are returned by
// Compile, the others by Eval and EvalBig.
const (
	// KindIllegal: the program fails Back-End's whitelist (check_penalty),
	// so Back-End would never have run it.
	KindIllegal Kind = iota + 1
	// KindSyntax: CPython's compile step raises SyntaxError or one of its
	// subclasses (IndentationError, TabError). Programs nested deeper than
	// the documented depth limit are also reported as KindSyntax.
	KindSyntax
	// KindUnsupported: a construct that passes the whitelist and is valid
	// Python, but that this package deliberately refuses: annotated
	// assignments ("score: 1 = 2") and the Ellipsis literal ("...").
	KindUnsupported
	// KindZeroDivision mirrors CPython's ZeroDivisionError.
	KindZeroDivision
	// KindOverflow mirrors CPython's OverflowError (float overflow in **,
	// int too large to convert to float, huge repeat counts).
	KindOverflow
	// KindType mirrors CPython's TypeError (unsupported operand types,
	// calling a number, int() of a complex number, ...).
	KindType
	// KindValue mirrors CPython's ValueError (negative shift count,
	// int() of a NaN).
	KindValue
	// KindAttribute mirrors CPython's AttributeError (x.score).
	KindAttribute
	// KindRange: the final result int(d["score"]) does not fit in int64.
	KindRange
	// KindLimit: an intermediate integer would exceed MaxIntBits bits.
	// CPython would compute it (possibly for a very long time); this
	// package refuses, deciding from bit-length bounds before computing.
	KindLimit
)

// String returns the name used for k in the test vectors: CPython's
// exception class name for kinds that mirror a CPython exception
// ("SyntaxError", "ZeroDivisionError", ...), and "illegal", "unsupported",
// "range" or "limit" for the others.
func (k Kind) String() string {
	switch k {
	case KindIllegal:
		return "illegal"
	case KindSyntax:
		return "SyntaxError"
	case KindUnsupported:
		return "unsupported"
	case KindZeroDivision:
		return "ZeroDivisionError"
	case KindOverflow:
		return "OverflowError"
	case KindType:
		return "TypeError"
	case KindValue:
		return "ValueError"
	case KindAttribute:
		return "AttributeError"
	case KindRange:
		return "range"
	case KindLimit:
		return "limit"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is the error returned by Compile, Eval and EvalBig. Kind is the
// classification; Msg is a human-readable explanation, close to CPython's
// message where one exists.
type Error struct {
	Kind Kind
	Msg  string
}

// Error formats the error as "penalty: Kind: Msg".
func (e *Error) Error() string {
	return "penalty: " + e.Kind.String() + ": " + e.Msg
}

func newError(k Kind, msg string) *Error { return &Error{Kind: k, Msg: msg} }
