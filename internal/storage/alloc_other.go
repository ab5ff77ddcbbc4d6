//go:build !linux

package storage

import "fmt"

// allocate: see alloc_linux.go. Without fallocate the active indexes stay on the heap.
func allocate(f File, off, n int64) error {
	if a, ok := f.(allocator); ok {
		return a.Allocate(off, n)
	}
	return fmt.Errorf("%w: no fallocate on this platform", errNoAllocate)
}

// dataEnd: see alloc_linux.go; here the whole file counts as data.
func dataEnd(f File, size int64) int64 { return size }
