package penalty

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// vectorCase is one line of a vector file: CPython's outcome for running
// program with the given score and overtime. Exactly one of Want and Err
// is set. Note, if present, explains a documented deviation.
type vectorCase struct {
	Program  string      `json:"program"`
	Score    json.Number `json:"score"`
	Overtime json.Number `json:"overtime"`
	Want     json.Number `json:"want"`
	Err      string      `json:"error"`
	Value    string      `json:"value"` // exact final score before int(), if exec completed
	Note     string      `json:"note"`
}

// loadVectors reads a vector file.
func loadVectors(path string) ([]vectorCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cases []vectorCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for line := 1; sc.Scan(); line++ {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var c vectorCase
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if (c.Want == "") == (c.Err == "") {
			return nil, fmt.Errorf("%s:%d: need exactly one of want and error", path, line)
		}
		cases = append(cases, c)
	}
	return cases, sc.Err()
}

func readVectors(t *testing.T, path string) []vectorCase {
	t.Helper()
	cases, err := loadVectors(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	return cases
}

// runCase compiles and evaluates one case, with Eval when the arguments
// fit in int64 and EvalBig otherwise.
func runCase(c vectorCase) (int64, error) {
	p, err := Compile(c.Program)
	if err != nil {
		return 0, err
	}
	s, o, err := caseArgs(c)
	if err != nil {
		return 0, err
	}
	if s.IsInt64() && o.IsInt64() {
		return p.Eval(s.Int64(), o.Int64())
	}
	return p.EvalBig(s, o)
}

func caseArgs(c vectorCase) (s, o *big.Int, err error) {
	s, ok1 := new(big.Int).SetString(string(c.Score), 10)
	o, ok2 := new(big.Int).SetString(string(c.Overtime), 10)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("bad arguments %q, %q", c.Score, c.Overtime)
	}
	return s, o, nil
}

// checkFinalValue compares the final value of score, before int(), with
// the exact value CPython recorded: floats and complex parts bit for bit
// (any NaN matches any NaN), ints exactly.
func checkFinalValue(c vectorCase) error {
	p, err := Compile(c.Program)
	if err != nil {
		return err
	}
	s, o, err := caseArgs(c)
	if err != nil {
		return err
	}
	var vars [2]value
	for i, x := range [...]*big.Int{s, o} {
		if vars[i], err = bigValueErr(x); err != nil {
			return err
		}
	}
	v, _, perr := p.run(vars)
	if perr != nil {
		return perr
	}
	kind, want, _ := strings.Cut(c.Value, ":")
	switch {
	case kind == "int" && v.isInt():
		w, ok := new(big.Int).SetString(want, 0)
		if !ok {
			return fmt.Errorf("bad int %q in vectors", want)
		}
		if v.toBig().Cmp(w) != 0 {
			return fmt.Errorf("final int %v, CPython %s", v.toBig(), want)
		}
		return nil
	case kind == "float" && v.k == vFloat:
		return sameFloat("final float", v.f, want)
	case kind == "complex" && v.k == vComplex:
		re, im, _ := strings.Cut(want, ",")
		if err := sameFloat("final complex real part", v.f, re); err != nil {
			return err
		}
		return sameFloat("final complex imaginary part", v.imag(), im)
	case kind == "tuple" && v.k == vTuple:
		return nil
	}
	return fmt.Errorf("final value of type %s, CPython %s", v.typeName(), c.Value)
}

func bigValueErr(x *big.Int) (value, error) {
	v, err := bigValue(new(big.Int).Set(x))
	if err != nil {
		return value{}, err
	}
	return v, nil
}

// sameFloat compares f with a float.hex() string from CPython.
func sameFloat(what string, f float64, pyHex string) error {
	want, err := strconv.ParseFloat(pyHex, 64)
	if err != nil {
		return fmt.Errorf("bad float %q in vectors: %v", pyHex, err)
	}
	if math.Float64bits(f) == math.Float64bits(want) || math.IsNaN(f) && math.IsNaN(want) {
		return nil
	}
	return fmt.Errorf("%s %v (%x), CPython %s", what, f, f, pyHex)
}

// vectorResult compares the outcome with the case. ok is the pass
// criterion (an error exactly where CPython fails, the same value
// otherwise); kindOK additionally requires the error kind to match.
func vectorResult(c vectorCase, got int64, err error) (ok, kindOK bool, desc string) {
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			return false, false, fmt.Sprintf("got non-penalty error %v", err)
		}
		desc = "error " + pe.Kind.String() + " (" + pe.Msg + ")"
		if c.Err == "" {
			return false, false, desc
		}
		return true, pe.Kind.String() == c.Err, desc
	}
	desc = fmt.Sprint(got)
	if c.Err != "" {
		return false, false, desc
	}
	return desc == string(c.Want), true, desc
}

func vectorsDir() string {
	if d := os.Getenv("MATERIALIZER_VECTORS_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "testdata")
}

func runVectorFile(t *testing.T, label, path string) {
	cases := readVectors(t, path)
	passed, kindMismatches, exact := 0, 0, 0
	var kindLog []string
	for i, c := range cases {
		got, err := runCase(c)
		ok, kindOK, desc := vectorResult(c, got, err)
		want := string(c.Want)
		if c.Err != "" {
			want = "error " + c.Err
		}
		if !ok {
			t.Errorf("%s case %d: program %q score=%s overtime=%s: want %s, got %s",
				label, i+1, c.Program, c.Score, c.Overtime, want, desc)
			continue
		}
		if c.Value != "" {
			if err := checkFinalValue(c); err != nil {
				t.Errorf("%s case %d: program %q score=%s overtime=%s: %v", label, i+1, c.Program, c.Score, c.Overtime, err)
				continue
			}
			exact++
		}
		passed++
		if !kindOK {
			kindMismatches++
			kindLog = append(kindLog, fmt.Sprintf("%s case %d: program %q score=%s overtime=%s: want %s, got %s",
				label, i+1, c.Program, c.Score, c.Overtime, want, desc))
		}
	}
	// The error kind is informative, but every kind in the vectors is
	// matched, so a mismatch is a regression.
	for _, l := range kindLog {
		t.Errorf("error kind mismatch: %s", l)
	}
	summary := fmt.Sprintf("%s: %d/%d passed, %d error-kind mismatches", label, passed, len(cases), kindMismatches)
	if exact > 0 {
		summary += fmt.Sprintf(", %d final values bit-exact", exact)
	}
	t.Log(summary)
	fmt.Println(summary)
}

// TestVectors runs the shared CPython vectors (penalty.jsonl), from
// $MATERIALIZER_VECTORS_DIR or ../testdata.
func TestVectors(t *testing.T) {
	runVectorFile(t, "penalty vectors", filepath.Join(vectorsDir(), "penalty.jsonl"))
}

// TestCPythonExtra runs the differential cases generated by
// testdata/gen_extra.py with CPython 3.11; python3 is not needed here.
func TestCPythonExtra(t *testing.T) {
	runVectorFile(t, "cpython extra", filepath.Join("testdata", "cpython_extra.jsonl"))
}
