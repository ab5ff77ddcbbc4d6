//go:build unix

package storage

import (
	"errors"

	"golang.org/x/sys/unix"
)

// mmapFile maps the first size bytes of f read-only, or returns ok=false when f is not an OS
// file (the caller then reads the bytes into memory).
func mmapFile(f File, size int) (b []byte, ok bool, err error) {
	osf := f.OSFile()
	if osf == nil || size <= 0 {
		return nil, false, nil
	}
	b, err = unix.Mmap(int(osf.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// mmapFileRW maps the first size bytes of f read-write and shared (writes reach the file's
// page cache), or returns ok=false when f is not an OS file. The file must be at least size
// bytes long.
func mmapFileRW(f File, size int) (b []byte, ok bool, err error) {
	osf := f.OSFile()
	if osf == nil || size <= 0 {
		return nil, false, nil
	}
	b, err = unix.Mmap(int(osf.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, false, err
	}
	// The file is mostly a sparse preallocated tail. Without MADV_RANDOM each page fault reads
	// ahead (zero-filling) a large window of that tail: with a thousand partitions, gigabytes
	// of memset in the append path (perf: 75% of broker CPU in ext4_mpage_readpages' memset).
	if err := unix.Madvise(b, unix.MADV_RANDOM); err != nil {
		return nil, false, errors.Join(err, unix.Munmap(b))
	}
	return b, true, nil
}

func munmap(b []byte) error { return unix.Munmap(b) }
