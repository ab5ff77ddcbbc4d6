//go:build linux

package storage

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// allocate makes sure the bytes [off, off+n) of f are allocated on disk, extending the file
// when they reach past its end (fallocate mode 0), so that writing them through a mapping
// cannot fault: a write fault on a page of a hole that the file system cannot allocate (the
// disk is full) is SIGBUS, which kills a Go process. ENOSPC is returned as the error it is;
// errNoAllocate (wrapped) says the file system or the FS cannot allocate ahead. A File
// implementing allocator (FaultFS's) takes over.
func allocate(f File, off, n int64) error {
	if a, ok := f.(allocator); ok {
		return a.Allocate(off, n)
	}
	osf := f.OSFile()
	if osf == nil {
		return fmt.Errorf("%w: %s is not an OS file", errNoAllocate, f.Name())
	}
	for {
		err := unix.Fallocate(int(osf.Fd()), 0, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR): // tmpfs gives up on any signal; the runtime sends many
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return fmt.Errorf("%w: %s: %w", errNoAllocate, f.Name(), err)
		default:
			return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
	}
}

// dataEnd returns where the first hole of f (size bytes long) begins: every byte from there
// to the end of a sparse file reads as zero, so the entries of a preallocated index file lie
// before it. Without SEEK_HOLE (a file system that does not track holes, or no OS file) it is
// size. It moves f's file offset, which the log never uses.
func dataEnd(f File, size int64) int64 {
	osf := f.OSFile()
	if osf == nil || size <= 0 {
		return size
	}
	off, err := osf.Seek(0, unix.SEEK_HOLE)
	if err != nil || off < 0 || off > size {
		return size
	}
	return off
}
