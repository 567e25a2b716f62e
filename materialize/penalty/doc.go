// Package penalty evaluates Normal-OJ penalty programs exactly as the
// Back-End's CPython does.
//
// A homework stores a tiny Python program, its "penalty". For a late
// submission the Back-End runs
//
//	d = {"score": delta, "overtime": days}
//	exec(penalty, d)
//	return int(d["score"])
//
// and accepts only programs that pass its whitelist (check_penalty): once
// the characters + - * / = . ( ) : > < are replaced by spaces, the text
// must split (on any Unicode whitespace) into the words score, overtime,
// if, else and strings that Python's int() accepts. Compile checks that
// whitelist, then tokenizes and parses the program the way CPython 3.11
// compiles it; Eval runs it with Python's semantics and returns
// int(d["score"]) as an int64. A Program is immutable and may be shared
// by goroutines.
//
// # Language
//
// What survives the whitelist is this subset of Python 3.11:
//
//	statements:  expression
//	             target = target = ... = expression
//	             target op= expression     (op: + - * / // ** << >>)
//	             if expression: block [else: block]
//	targets:     score, overtime, (target), x.name, () (unpacking)
//	expression:  a if cond else b, comparison chains (== < > <= >=),
//	             << >>, + -, * / //, unary + -, **, calls f(...),
//	             attributes x.score, (name := value),
//	             names, int and float literals (1_000, 0.5, .5, 1.),
//	             parentheses, and the empty tuple ()
//
// The tokenizer follows CPython's: indentation with tabs to multiples of
// 8 and the tab/space consistency check (TabError), blank lines ignored,
// implicit line joining inside parentheses (at most 200 open), \r\n and \r
// as line ends, CPython's rules for numeric literals (no leading zeros,
// single underscores between digits, "1.if" accepted and "1.score"
// rejected). Any character that passes the whitelist but that CPython's
// tokenizer rejects (vertical tab, non-ASCII whitespace or digits) is a
// syntax error, as in CPython.
//
// Values are Python's: ints are unbounded, bool is int, / is correctly
// rounded true division, // floors, ** of ints is exact, a negative float
// raised to a non-integer power is complex, int and float compare
// exactly. float ** float and complex powers call the C library (see
// below); floor division, conversions and complex arithmetic reimplement
// CPython's algorithms (floatobject.c, longobject.c, complexobject.c).
// Evaluation is left to right and lazy where Python's is (conditional
// expressions and comparison chains), so an error in a branch that is not
// taken does not happen.
//
// # Errors
//
// Every failure is an *Error whose Kind says what happened:
// KindIllegal (whitelist), KindSyntax (CPython's SyntaxError, including
// IndentationError and TabError), the runtime exceptions
// (KindZeroDivision, KindOverflow, KindType, KindValue, KindAttribute),
// KindRange (the final int does not fit in int64), and the deviations
// below. All of them are "penalty errors" for the materializer.
//
// # Deviations from CPython
//
// The package refuses a few things CPython would run, always with an
// error, never with a different value:
//
//   - Annotated assignments ("score: 1 = 2") and the Ellipsis literal
//     ("...") pass the whitelist and are valid Python; Compile reports
//     them as KindUnsupported. (The walrus operator := is supported.)
//   - Programs nested more than 1000 levels deep (syntax tree depth,
//     counting every operator of a left-associative chain such as
//     1+1+...+1) are a KindSyntax error ("too complex"). CPython itself
//     fails at about 3000 levels with RecursionError or MemoryError.
//     Programs longer than 1 GiB are refused the same way.
//   - An intermediate integer needing more than 65,536 bits is a
//     KindLimit error. The decision is made from bit-length bounds before
//     computing, so 9 ** 9 ** 9 costs nothing; work per node is bounded.
//     Arguments to EvalBig are held to the same limit.
//   - Text that is not valid UTF-8 is KindIllegal (Back-End only ever
//     sees UTF-8 strings).
//
// # Python version
//
// The reference is CPython 3.11 with default settings. Two details of the
// whitelist depend on it: int() accepts the decimal digits of Unicode
// 14.0 (so U+0661 passes the whitelist, then fails to tokenize), and at
// most 4300 digits per number (int_max_str_digits, introduced in 3.11;
// older versions accept any length, where this package says
// KindIllegal). The test vectors come from CPython 3.11.7; other versions
// were not compared.
//
// # cgo
//
// CPython calls the C library's pow for float ** float and its hypot,
// pow, atan2, exp, log, cos and sin for complex powers, and inspects
// errno afterwards. Go's math package gives different last bits for a
// large share of inputs, which changes int() of results, so this package
// calls libm through cgo and requires cgo: building it with
// CGO_ENABLED=0 fails on purpose, on the identifier
// penalty_requires_cgo_for_libm_pow_parity_with_CPython. Parity assumes
// the same C library as the Back-End (glibc).
//
// # Cost
//
// Compile is linear in the program size. Eval visits every node of the
// syntax tree at most once (there are no loops), allocates nothing when
// the values stay within int64 and float64, and needs on the order of
// 100 ns for typical programs.
package penalty
