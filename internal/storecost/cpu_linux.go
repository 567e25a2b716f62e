package storecost

import (
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTimeID is CLOCK_THREAD_CPUTIME_ID (linux/time.h).
const clockThreadCPUTimeID = 3

// ThreadCPU returns the CPU time the calling OS thread has used, for a
// goroutine locked to it (runtime.LockOSThread); ok is false where it
// cannot be read.
func ThreadCPU() (d time.Duration, ok bool) {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
