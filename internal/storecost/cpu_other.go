//go:build !linux

package storecost

import "time"

// ThreadCPU is not measured on this system.
func ThreadCPU() (time.Duration, bool) { return 0, false }
