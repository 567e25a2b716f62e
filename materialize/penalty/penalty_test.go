package penalty

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

func TestKindString(t *testing.T) {
	want := map[Kind]string{
		KindIllegal: "illegal", KindSyntax: "SyntaxError", KindUnsupported: "unsupported",
		KindZeroDivision: "ZeroDivisionError", KindOverflow: "OverflowError", KindType: "TypeError",
		KindValue: "ValueError", KindAttribute: "AttributeError", KindRange: "range", KindLimit: "limit",
		Kind(0): "Kind(0)", Kind(99): "Kind(99)",
	}
	for k, s := range want {
		if k.String() != s {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), k.String(), s)
		}
	}
	err := error(&Error{Kind: KindZeroDivision, Msg: "division by zero"})
	if got := err.Error(); got != "penalty: ZeroDivisionError: division by zero" {
		t.Errorf("Error() = %q", got)
	}
}

// TestWhitelist checks checkWhitelist against Back-End's check_penalty as
// run by CPython 3.11 (the accept column is its result).
func TestWhitelist(t *testing.T) {
	cases := []struct {
		program string
		accept  bool
	}{
		{"", true},
		{"score = 0", true},
		{"score = max(0, score)", false},
		{"import os", false},
		{"score = 1e3", false},
		{"score = score != 3", false},
		{"score = \u0661\u0662", true},
		{"score = 1\u0661", true},
		{"score = \uff11", true},
		{"score\u00a0= 1", true},
		{"score\u3000=\u20001", true},
		{"score\u001c=\u001f1", true},
		{"score\u000b= 1", true},
		{"score = 1_000", true},
		{"score = _1", false},
		{"score = 1_", false},
		{"score = 1__0", false},
		{"score = 0_0", true},
		{"Score = 1", false},
		{"score = True", false},
		{"scoreif = 1", false},
		{"score = 1 # x", false},
		{"score = 'a'", false},
		{"score = 1; score = 2", false},
		{"score = 1\u0000", false},
		{"score = \u00b2", false},
		{"score = \U00011f50", false}, // Kawi digit: Unicode 15, newer than CPython 3.11
		{"score = \U0001e4f0", false}, // Nag Mundari digit: Unicode 15
		{"score = \U0001d7ce", true},
		{"score = \u0966", true},
		{"score = 1\u2028", true},
		{"score = 1\u0085", true},
		{"score = \ufeff1", false},
		{"score = 1j", false},
		{"score = 0x1", false},
		{"score = -1", true},
		{"score=+1", true},
		{"score = " + strings.Repeat("1", 4300), true},
		{"score = " + strings.Repeat("1", 4301), false},
		{"score = " + strings.Repeat("1_", 4299) + "1", true},
		{"score = " + strings.Repeat("1_", 4300) + "1", false},
		{"score = " + strings.Repeat("0", 4301), false},
		{"score = 1." + strings.Repeat("5", 4301), false},
	}
	for _, c := range cases {
		err := checkWhitelist(c.program)
		if (err == nil) != c.accept {
			t.Errorf("checkWhitelist(%q) = %v, CPython check_penalty accepts: %v", quoteShort(c.program), err, c.accept)
		}
		if err != nil && err.Kind != KindIllegal {
			t.Errorf("checkWhitelist(%q) kind %v", quoteShort(c.program), err.Kind)
		}
	}
	// Not representable in Python: invalid UTF-8 is refused.
	if _, err := Compile("score = 1\xff"); !isKind(err, KindIllegal) {
		t.Errorf("invalid UTF-8: got %v", err)
	}
}

// TestPythonCharClasses relates the CPython 3.11 tables to Go's Unicode
// tables: Python's whitespace is Go's White_Space plus U+001C..U+001F, and
// Python's decimal digits are Go's Nd minus the digits added in Unicode
// 15.0 (Kawi, Nag Mundari), which CPython 3.11 (Unicode 14.0) lacks. If
// Go's tables move to a newer Unicode version this test names the change.
func TestPythonCharClasses(t *testing.T) {
	newerDigits := func(r rune) bool {
		return r >= 0x11F50 && r <= 0x11F59 || r >= 0x1E4F0 && r <= 0x1E4F9
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		wantSpace := unicode.IsSpace(r) || r >= 0x1C && r <= 0x1F
		if isPyWhitespace(r) != wantSpace {
			t.Errorf("isPyWhitespace(%U) = %v", r, isPyWhitespace(r))
		}
		wantDigit := unicode.Is(unicode.Nd, r) && !newerDigits(r)
		if isPyDecimal(r) != wantDigit {
			t.Errorf("isPyDecimal(%U) = %v", r, isPyDecimal(r))
		}
	}
}

func isKind(err error, k Kind) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Kind == k
}

// TestUnsupportedPrecedence: a syntax error anywhere wins over an
// unsupported construct, as CPython reports the SyntaxError.
func TestUnsupportedPrecedence(t *testing.T) {
	for _, c := range []struct {
		src  string
		want Kind
	}{
		{"score: 1 = 2", KindUnsupported},
		{"score = ...", KindUnsupported},
		{"score.score: 1", KindUnsupported},
		{"score = ...\nscore = (", KindSyntax},
		{"score: 1\nscore = 007", KindSyntax},
		{"(): 1", KindSyntax},
		{"score(): 1", KindSyntax},
		{"score = ... + *score", KindSyntax},
	} {
		if _, err := Compile(c.src); !isKind(err, c.want) {
			t.Errorf("Compile(%q) = %v, want kind %v", c.src, err, c.want)
		}
	}
}

// TestDepthLimit checks the documented nesting limit and that hostile
// nesting is refused quickly, without exhausting the stack.
func TestDepthLimit(t *testing.T) {
	ok := []string{
		"score = " + strings.Repeat("-", 990) + "1",
		"score = " + strings.Repeat("1 + ", 990) + "1",
		"score = " + strings.Repeat("1 ** ", 990) + "1",
		"score = " + strings.Repeat("1 if 0 else ", 990) + "1",
		"score = " + strings.Repeat("(-", 200) + "1" + strings.Repeat(")", 200),
		"score = 1" + strings.Repeat(" < 2", 5000), // a chain is one node
	}
	for _, src := range ok {
		p, err := Compile(src)
		if err != nil {
			t.Errorf("Compile(%.40q...) = %v", src, err)
			continue
		}
		if _, err := p.Eval(1, 1); err != nil {
			t.Errorf("Eval(%.40q...) = %v", src, err)
		}
	}
	tooDeep := []string{
		"score = " + strings.Repeat("-", 1000) + "1",
		"score = " + strings.Repeat("1 + ", 1000) + "1",
		"score = " + strings.Repeat("1 ** ", 1000) + "1",
		"score = " + strings.Repeat("1 if 0 else ", 1000) + "1",
		"score = " + strings.Repeat("-", 1_000_000) + "1",
		"score = " + strings.Repeat("1+", 1_000_000) + "1",
		"score = " + strings.Repeat("2**", 1_000_000) + "1",
		"score = " + strings.Repeat("score(", 150) + strings.Repeat("-", 900) + "1" + strings.Repeat(")", 150),
	}
	for _, src := range tooDeep {
		start := time.Now()
		_, err := Compile(src)
		if !isKind(err, KindSyntax) || !strings.Contains(err.Error(), "too complex") {
			t.Errorf("Compile(%.40q...) = %v, want too complex", src, err)
		}
		// Milliseconds when linear; a quadratic parse of 2 MB takes
		// hours: a bound far from both holds on a loaded machine.
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("Compile(%.40q...) took %v", src, d)
		}
	}
}

// TestEvalBig covers arguments outside int64 (results from CPython).
func TestEvalBig(t *testing.T) {
	p, err := Compile("score = score // overtime")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := new(big.Int).SetString("340282366920938463463374607431768211456", 10) // 2**128
	o, _ := new(big.Int).SetString("36893488147419103232", 10)                    // 2**65
	// 2**128 // 2**65 == 2**63, which does not fit in int64.
	if got, err := p.EvalBig(s, o); !isKind(err, KindRange) {
		t.Errorf("EvalBig(2**128, 2**65) = %d, %v; want range error", got, err)
	}
	o.Lsh(o, 1) // 2**66
	if got, err := p.EvalBig(s, o); err != nil || got != 1<<62 {
		t.Errorf("EvalBig(2**128, 2**66) = %d, %v; want %d", got, err, int64(1)<<62)
	}
	if got, err := p.EvalBig(big.NewInt(7), big.NewInt(2)); err != nil || got != 3 {
		t.Errorf("EvalBig(7, 2) = %d, %v", got, err)
	}
	if s.String() != "340282366920938463463374607431768211456" {
		t.Errorf("EvalBig modified its argument: %v", s)
	}
	huge := new(big.Int).Lsh(big.NewInt(1), 65536)
	if _, err := p.EvalBig(huge, big.NewInt(1)); !isKind(err, KindLimit) {
		t.Errorf("EvalBig(2**65536, 1) = %v, want limit", err)
	}
	if _, err := p.EvalBig(nil, big.NewInt(1)); !isKind(err, KindValue) {
		t.Errorf("EvalBig(nil, 1) = %v, want ValueError kind", err)
	}
}

// TestEmptyProgram: the empty program leaves score unchanged.
func TestEmptyProgram(t *testing.T) {
	for _, src := range []string{"", "\n", "   \n\t\n", "\r\n"} {
		p, err := Compile(src)
		if err != nil {
			t.Fatalf("Compile(%q): %v", src, err)
		}
		for _, s := range []int64{0, 57, -3, math.MaxInt64, math.MinInt64} {
			if got, err := p.Eval(s, 9); err != nil || got != s {
				t.Errorf("Eval(%q, %d) = %d, %v", src, s, got, err)
			}
		}
	}
}

// TestNoAllocs: the int64/float64 paths allocate nothing.
func TestNoAllocs(t *testing.T) {
	for _, src := range []string{
		"score = score * 0.8 ** overtime",
		"if overtime > 3:\n    score = 0\nelse:\n    score = score * (1 - overtime * 0.1)",
		"score = score * 0.9 if 0 < overtime < 3 else (score * 0.5 if overtime < 7 else 0)",
		"score -= overtime * 5\nscore //= 3\nscore /= 2",
		"score = (score := score - 1) ** 0.5 if score > 1 else -score << 2",
	} {
		p, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = p.Eval(87, 2) }); n != 0 {
			t.Errorf("Eval(%q) allocates %v times", src, n)
		}
	}
}

// TestConcurrentEval runs one Program from many goroutines (meaningful
// under -race).
func TestConcurrentEval(t *testing.T) {
	p, err := Compile("overtime -= 1\nscore = score * 0.5 ** overtime if overtime > 0 else score")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 50)
	for d := range want {
		want[d], _ = p.Eval(100, int64(d))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				d := i % len(want)
				if got, err := p.Eval(100, int64(d)); err != nil || got != want[d] {
					t.Errorf("Eval(100, %d) = %d, %v; want %d", d, got, err, want[d])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestMathModMatchesFmod backs the use of math.Mod in floor division:
// it must agree bit for bit with C's fmod, which CPython uses.
func TestMathModMatchesFmod(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	special := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, -0.7, 3, math.Inf(1), math.Inf(-1), math.NaN(),
		math.MaxFloat64, math.SmallestNonzeroFloat64, 1e308, 1e-308, 2.5, 1 << 53}
	check := func(x, y float64) {
		got, want := math.Mod(x, y), libmFmod(x, y)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("math.Mod(%v, %v) = %v, fmod = %v", x, y, got, want)
		}
	}
	for _, x := range special {
		for _, y := range special {
			check(x, y)
		}
	}
	for i := 0; i < 200000; i++ {
		x := math.Float64frombits(r.Uint64())
		y := math.Float64frombits(r.Uint64())
		if i%2 == 0 {
			x, y = (r.Float64()-0.5)*math.Pow(10, float64(r.IntN(40)-20)), (r.Float64()-0.5)*math.Pow(10, float64(r.IntN(40)-20))
		}
		check(x, y)
	}
}

// TestStepsWithinNodes checks, on every program of the vectors, that an
// evaluation visits at most as many nodes as the program has.
func TestStepsWithinNodes(t *testing.T) {
	for _, path := range []string{vectorsDir() + "/penalty.jsonl", "testdata/cpython_extra.jsonl"} {
		for _, c := range readVectors(t, path) {
			p, err := Compile(c.Program)
			if err != nil {
				continue
			}
			s, o, _ := caseArgs(c)
			sv, _ := bigValueErr(s)
			ov, _ := bigValueErr(o)
			if _, steps, _ := p.run([2]value{sv, ov}); steps > len(p.nodes) {
				t.Errorf("%q: %d steps for %d nodes", c.Program, steps, len(p.nodes))
			}
		}
	}
}

func ExampleCompile() {
	p, err := Compile("score = score * 0.8 ** overtime")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, days := range []int64{0, 1, 3} {
		got, err := p.Eval(100, days)
		fmt.Println(days, got, err)
	}
	_, err = Compile("score = max(0, score)")
	fmt.Println(err)
	// Output:
	// 0 100 <nil>
	// 1 80 <nil>
	// 3 51 <nil>
	// penalty: illegal: token "max" is not allowed
}

func TestZeroProgram(t *testing.T) {
	var zero Program
	var nilp *Program
	for _, p := range []*Program{&zero, nilp} {
		if got, err := p.Eval(42, 3); err != nil || got != 42 {
			t.Errorf("Eval on %v = %d, %v", p, got, err)
		}
		if got, err := p.EvalBig(big.NewInt(42), big.NewInt(3)); err != nil || got != 42 {
			t.Errorf("EvalBig on %v = %d, %v", p, got, err)
		}
	}
}
