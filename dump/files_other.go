//go:build !unix

package dump

// openNonBlock: no named pipes to wait on here.
const openNonBlock = 0
