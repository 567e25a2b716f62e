//go:build unix

package dump

import "syscall"

// openNonBlock keeps an open of a named pipe from waiting for a writer.
const openNonBlock = syscall.O_NONBLOCK
