package materialize

import (
	"math"
	"math/big"
	"testing"
)

// TestCheckedInt64 compares addInt64 and subInt64 with exact big.Int
// arithmetic at the int64 boundaries: the result must be the wrapped sum
// or difference, and overflow reported exactly when the exact value leaves
// int64 (a running score of two MinInt64 penalties wraps to 0).
func TestCheckedInt64(t *testing.T) {
	vals := []int64{math.MinInt64, math.MinInt64 + 1, -2, -1, 0, 1, 2, math.MaxInt64 - 1, math.MaxInt64, 1 << 62, -(1 << 62)}
	for _, a := range vals {
		for _, b := range vals {
			for _, op := range []struct {
				name  string
				fn    func(a, b int64) (int64, bool)
				exact func(x, y *big.Int) *big.Int
			}{
				{"add", addInt64, func(x, y *big.Int) *big.Int { return new(big.Int).Add(x, y) }},
				{"sub", subInt64, func(x, y *big.Int) *big.Int { return new(big.Int).Sub(x, y) }},
			} {
				got, overflow := op.fn(a, b)
				exact := op.exact(big.NewInt(a), big.NewInt(b))
				if wantOverflow := !exact.IsInt64(); overflow != wantOverflow {
					t.Errorf("%s(%d, %d): overflow %v, want %v", op.name, a, b, overflow, wantOverflow)
				} else if !overflow && got != exact.Int64() {
					t.Errorf("%s(%d, %d) = %d, want %s", op.name, a, b, got, exact)
				}
			}
		}
	}
}
