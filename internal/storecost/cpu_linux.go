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

// Thread names an OS thread whose CPU clock can be read from any thread.
type Thread struct{ clock int32 }

// CurrentThread returns the calling OS thread, for a goroutine locked to
// it (runtime.LockOSThread).
func CurrentThread() Thread {
	// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) of linux/posix-timers.h.
	return Thread{clock: int32(^uint32(syscall.Gettid())<<3 | 6)}
}

// CPU returns the CPU time thread t has used; ok is false where it cannot
// be read.
func (t Thread) CPU() (time.Duration, bool) {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, uintptr(t.clock), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
