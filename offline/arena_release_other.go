//go:build !linux

package offline

// release does nothing here: the pages stay until the mapping is freed.
func release[T any]([]T) {}
