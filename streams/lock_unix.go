//go:build unix

package streams

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// dirLock is an exclusive flock of a directory's .lock file. flock locks belong to the open
// file, so a second open of the same file conflicts even in the same process.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		cerr := f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.Join(errDirLocked, cerr)
		}
		return nil, errors.Join(err, cerr)
	}
	return &dirLock{f: f}, nil
}

// unlock releases the lock (closing the file releases the flock).
func (l *dirLock) unlock() error { return l.f.Close() }
