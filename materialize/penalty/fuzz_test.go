package penalty

import (
	"errors"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowFuzzInput flags inputs whose compilation and four evaluations take
// unreasonably long: the work of a program is bounded by its size.
const slowFuzzInput = 3 * time.Second

// fuzzAlphabet maps fuzz bytes to pieces of whitelisted programs, so that
// the mutated inputs mostly pass the whitelist and reach the tokenizer,
// parser and evaluator.
var fuzzAlphabet = [...]string{
	" ", " ", "  ", "\n", "\n  ", "\n\t", "\t", "\f", "\r\n", "(", ")", "()", "+", "-", "*", "/",
	"//", "**", "<", ">", "<=", ">=", "==", "=", ":", ":=", ".", "...", "<<", ">>", "+=", "-=", "*=", "/=",
	"//=", "**=", "<<=", ">>=", "0", "1", "2", "3", "7", "10", "100", "0.5", ".25", "1.", "1_0", "00", "0.1",
	"score", "score", "overtime", "overtime", "if", "else", " if ", " else ", "(-8) ** 0.5", "2 ** 64",
	"2 ** 65535", "9 ** 9 ** 9", "score = ", "\nscore = ", "if score:\n    ", "\nelse:\n    ",
}

// project maps every byte of src to a piece of fuzzAlphabet.
func project(src string) string {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		b.WriteString(fuzzAlphabet[int(src[i])%len(fuzzAlphabet)])
	}
	return b.String()
}

// FuzzPenalty checks, for any program and arguments, that Compile and
// Eval return (no panic, no hang), that every error is an *Error of a
// kind its stage can produce, that an evaluation visits at most as many
// nodes as the program has, that evaluation is deterministic, and that
// EvalBig agrees with Eval. Each input is tried as it is and projected
// onto whitelisted pieces (project). The corpus is seeded with every
// program of the vector files.
func FuzzPenalty(f *testing.F) {
	for _, path := range []string{
		filepath.Join(vectorsDir(), "penalty.jsonl"),
		filepath.Join("testdata", "cpython_extra.jsonl"),
	} {
		cases, err := loadVectors(path)
		if err != nil {
			f.Fatal(err)
		}
		for _, c := range cases {
			s, o, err := caseArgs(c)
			if err != nil || !s.IsInt64() || !o.IsInt64() {
				f.Add(c.Program, int64(60), int64(1))
				continue
			}
			f.Add(c.Program, s.Int64(), o.Int64())
		}
	}
	f.Fuzz(func(t *testing.T, src string, score, overtime int64) {
		checkProgram(t, src, score, overtime)
		if len(src) <= 200 {
			checkProgram(t, project(src), score, overtime)
		}
	})
}

// checkProgram asserts the fuzz properties for one program.
func checkProgram(t *testing.T, src string, score, overtime int64) {
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > slowFuzzInput {
			t.Fatalf("%q (score=%d, overtime=%d) took %v", src, score, overtime, d)
		}
	}()
	p, err := Compile(src)
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("Compile(%q) returned a non-*Error: %v", src, err)
		}
		switch pe.Kind {
		case KindIllegal, KindSyntax, KindUnsupported:
		default:
			t.Fatalf("Compile(%q) returned kind %v", src, pe.Kind)
		}
		return
	}
	v1, steps, err1 := p.run([2]value{intValue(score), intValue(overtime)})
	if steps > len(p.nodes) {
		t.Fatalf("%q: %d steps for %d nodes", src, steps, len(p.nodes))
	}
	v2, steps2, err2 := p.run([2]value{intValue(score), intValue(overtime)})
	if steps2 != steps || !sameOutcome(v1, err1, v2, err2) {
		t.Fatalf("%q: nondeterministic: %v %v / %v %v", src, v1, err1, v2, err2)
	}
	r1, e1 := p.Eval(score, overtime)
	r2, e2 := p.EvalBig(big.NewInt(score), big.NewInt(overtime))
	if r1 != r2 || errorString(e1) != errorString(e2) {
		t.Fatalf("%q: Eval = %d, %v but EvalBig = %d, %v", src, r1, e1, r2, e2)
	}
	if e1 != nil {
		var pe *Error
		if !errors.As(e1, &pe) {
			t.Fatalf("Eval(%q) returned a non-*Error: %v", src, e1)
		}
		switch pe.Kind {
		case KindIllegal, KindSyntax, KindUnsupported:
			t.Fatalf("Eval(%q) returned compile-time kind %v", src, pe.Kind)
		}
	}
}

func errorString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sameOutcome compares two evaluation results exactly (NaN equal to NaN).
func sameOutcome(v1 value, e1 *Error, v2 value, e2 *Error) bool {
	if (e1 == nil) != (e2 == nil) {
		return false
	}
	if e1 != nil {
		return *e1 == *e2
	}
	if v1.k != v2.k || v1.i != v2.i {
		return false
	}
	switch v1.k {
	case vFloat, vComplex:
		return v1.f == v2.f || v1.f != v1.f && v2.f != v2.f
	case vBig:
		return v1.b.Cmp(v2.b) == 0
	}
	return true
}
