//go:build linux

package offline

import (
	"syscall"
	"unsafe"
)

// release gives the pages of b, a part of an offHeap mapping that will not
// be read again, back to the system while the mapping stays (MADV_DONTNEED;
// memory reads as zeros if touched again).
func release[T any](b []T) {
	if cap(b) == 0 {
		return
	}
	var zero T
	b = b[:cap(b)]
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), int(unsafe.Sizeof(zero))*len(b)), syscall.MADV_DONTNEED)
}
