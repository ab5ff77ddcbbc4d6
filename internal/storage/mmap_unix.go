//go:build unix

package storage

import "golang.org/x/sys/unix"

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
	return b, true, nil
}

func munmap(b []byte) error { return unix.Munmap(b) }
