//go:build !unix

package streams

import (
	"path/filepath"
	"sync"
)

// Without flock, task directories are locked within the process only.
var dirLocks struct {
	sync.Mutex
	held map[string]bool
}

type dirLock struct{ dir string }

func lockDir(dir string) (*dirLock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	dirLocks.Lock()
	defer dirLocks.Unlock()
	if dirLocks.held[abs] {
		return nil, errDirLocked
	}
	if dirLocks.held == nil {
		dirLocks.held = map[string]bool{}
	}
	dirLocks.held[abs] = true
	return &dirLock{dir: abs}, nil
}

func (l *dirLock) unlock() error {
	dirLocks.Lock()
	defer dirLocks.Unlock()
	delete(dirLocks.held, l.dir)
	return nil
}
