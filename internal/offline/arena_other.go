//go:build !unix

package offline

// offHeap returns a slice of n zero values of T (on the Go heap where
// anonymous mappings are not available).
func offHeap[T any](n int) ([]T, func(), error) {
	return make([]T, n), func() {}, nil
}
