package penalty

import "testing"

func benchmarkProgram(b *testing.B, src string, score, overtime int64, want int64) {
	p, err := Compile(src)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := p.Eval(score, overtime)
		if err != nil || got != want {
			b.Fatalf("Eval = %d, %v; want %d", got, err, want)
		}
	}
}

// BenchmarkPenaltyPower is the common exponential decay penalty.
func BenchmarkPenaltyPower(b *testing.B) {
	benchmarkProgram(b, "score = score * 0.8 ** overtime", 99, 6, 25)
}

// BenchmarkPenaltyIfElse is the multi-line program of the vectors.
func BenchmarkPenaltyIfElse(b *testing.B) {
	benchmarkProgram(b, "if overtime > 3:\n    score = 0\nelse:\n    score = score * (1 - overtime * 0.1)", 99, 3, 69)
}
