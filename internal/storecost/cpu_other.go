//go:build !linux

package storecost

import "time"

// ThreadCPU is not measured on this system.
func ThreadCPU() (time.Duration, bool) { return 0, false }

// Thread names an OS thread; its CPU is not measured on this system.
type Thread struct{}

// CurrentThread returns the calling OS thread.
func CurrentThread() Thread { return Thread{} }

// CPU is not measured on this system.
func (Thread) CPU() (time.Duration, bool) { return 0, false }
