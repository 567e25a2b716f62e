//go:build unix

package offline

import (
	"fmt"
	"syscall"
	"unsafe"
)

// offHeap returns a slice of n zero values of T in anonymous memory
// mapped outside the Go heap, and the function that unmaps it. The
// garbage collector neither scans this memory nor counts it when pacing
// itself, so the per-submission records cost their size in resident
// memory, not twice their size (GOGC=100 lets the heap grow to twice what
// is live). T must hold no pointers.
func offHeap[T any](n int) ([]T, func(), error) {
	if n == 0 {
		return nil, func() {}, nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero)) * n
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("map %d bytes: %w", size, err)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n), func() { _ = syscall.Munmap(b) }, nil
}
