package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrInjected is the error a FaultFS returns for an injected fault (unless Fault.Err says
// otherwise).
var ErrInjected = errors.New("storage: injected fault")

// FaultOp names the file system operation a Fault applies to.
type FaultOp int

const (
	FaultWrite    FaultOp = iota // File.Write and File.WriteAt
	FaultSync                    // File.Sync
	FaultTruncate                // File.Truncate
	FaultOpen                    // FS.OpenFile
	FaultRename                  // FS.Rename (matched against the old path)
	FaultRemove                  // FS.Remove and FS.RemoveAll
	FaultSyncDir                 // FS.SyncDir
	FaultAllocate                // allocating file space ahead of writes (an index's fallocate)
)

func (op FaultOp) String() string {
	switch op {
	case FaultWrite:
		return "write"
	case FaultSync:
		return "sync"
	case FaultTruncate:
		return "truncate"
	case FaultOpen:
		return "open"
	case FaultRename:
		return "rename"
	case FaultRemove:
		return "remove"
	case FaultSyncDir:
		return "syncdir"
	case FaultAllocate:
		return "allocate"
	}
	return fmt.Sprintf("FaultOp(%d)", int(op))
}

// A Fault makes matching operations of a FaultFS fail.
type Fault struct {
	Op FaultOp
	// Pattern is a filepath.Match pattern matched against the file's base name ("*.log",
	// "00000000000000000000.index"); "" matches every file.
	Pattern string
	// Times is how many matching operations fail: 0 means once, a negative value forever.
	Times int
	// Torn, for FaultWrite, writes the first Torn bytes of the buffer before failing (a torn
	// write); 0 writes nothing.
	Torn int
	// Lose, for FaultSync, makes Sync report success without making anything durable: a later
	// DropUnsynced throws the data away (a lost fsync).
	Lose bool
	// Err is returned instead of ErrInjected when set.
	Err error
}

// FaultFS wraps another FS and fails chosen operations, for tests of the log's error handling.
// It also remembers, for each file written through it, how many bytes were durable at the
// last successful Sync, so DropUnsynced can simulate a machine crash that loses the page cache.
// Safe for concurrent use.
type FaultFS struct {
	inner FS

	mu struct {
		sync.Mutex
		faults []*faultState
		fired  int
		synced map[string]int64 // path -> durable size (for DropUnsynced)
	}
}

type faultState struct {
	Fault
	left int // remaining failures; <0 forever
}

// NewFaultFS wraps inner (usually OS).
func NewFaultFS(inner FS) *FaultFS {
	f := &FaultFS{inner: inner}
	f.mu.synced = make(map[string]int64)
	return f
}

// Inject adds a fault; faults are consulted in the order added.
func (f *FaultFS) Inject(ft Fault) {
	left := ft.Times
	if left == 0 {
		left = 1
	}
	f.mu.Lock()
	f.mu.faults = append(f.mu.faults, &faultState{Fault: ft, left: left})
	f.mu.Unlock()
}

// FailNextWrite makes the next write to a file matching pattern fail without writing.
func (f *FaultFS) FailNextWrite(pattern string) { f.Inject(Fault{Op: FaultWrite, Pattern: pattern}) }

// FailNextSync makes the next fsync of a file matching pattern fail.
func (f *FaultFS) FailNextSync(pattern string) { f.Inject(Fault{Op: FaultSync, Pattern: pattern}) }

// TornWrite makes the next write to a file matching pattern write only its first n bytes and
// then fail.
func (f *FaultFS) TornWrite(pattern string, n int) {
	f.Inject(Fault{Op: FaultWrite, Pattern: pattern, Torn: n})
}

// Clear removes every pending fault.
func (f *FaultFS) Clear() {
	f.mu.Lock()
	f.mu.faults = nil
	f.mu.Unlock()
}

// Fired reports how many faults have been injected so far.
func (f *FaultFS) Fired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.fired
}

// match returns the fault to apply to op on path, consuming one use of it, or nil.
func (f *FaultFS) match(op FaultOp, path string) *Fault {
	base := filepath.Base(path)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fs := range f.mu.faults {
		if fs.Op != op {
			continue
		}
		if fs.Pattern != "" {
			if ok, err := filepath.Match(fs.Pattern, base); err != nil || !ok {
				continue
			}
		}
		ft := fs.Fault
		if fs.left > 0 {
			fs.left--
			if fs.left == 0 {
				f.mu.faults = append(f.mu.faults[:i:i], f.mu.faults[i+1:]...)
			}
		}
		f.mu.fired++
		return &ft
	}
	return nil
}

func (ft *Fault) err(op FaultOp, path string) error {
	if ft.Err != nil {
		return ft.Err
	}
	return &os.PathError{Op: op.String(), Path: path, Err: ErrInjected}
}

// DropUnsynced simulates a crash that loses everything not fsynced: each file written through
// this FS is truncated back to its size at its last successful Sync (files that existed when
// first opened count as durable up to their size then). Only appended data is modelled, which
// is how the log writes. Call it after closing or abandoning the files.
func (f *FaultFS) DropUnsynced() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for path, size := range f.mu.synced {
		fi, err := f.inner.Stat(path)
		if err != nil {
			continue // removed since
		}
		if fi.Size() <= size {
			continue
		}
		fl, err := f.inner.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := fl.Truncate(size); err != nil {
			errs = append(errs, err)
		}
		if err := fl.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *FaultFS) noteSynced(path string, size int64) {
	f.mu.Lock()
	f.mu.synced[path] = size
	f.mu.Unlock()
}

func (f *FaultFS) noteTruncated(path string, size int64) {
	f.mu.Lock()
	if s, ok := f.mu.synced[path]; ok && size < s {
		f.mu.synced[path] = size
	}
	f.mu.Unlock()
}

// OpenFile implements FS.
func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if ft := f.match(FaultOpen, name); ft != nil {
		return nil, ft.err(FaultOpen, name)
	}
	fl, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if _, ok := f.mu.synced[name]; !ok {
		var size int64
		if fi, err := fl.Stat(); err == nil {
			size = fi.Size()
		}
		f.mu.synced[name] = size
	} else if flag&os.O_TRUNC != 0 {
		f.mu.synced[name] = 0
	}
	f.mu.Unlock()
	return &faultFile{File: fl, fs: f, path: name}, nil
}

// Remove implements FS.
func (f *FaultFS) Remove(name string) error {
	if ft := f.match(FaultRemove, name); ft != nil {
		return ft.err(FaultRemove, name)
	}
	f.mu.Lock()
	delete(f.mu.synced, name)
	f.mu.Unlock()
	return f.inner.Remove(name)
}

// RemoveAll implements FS.
func (f *FaultFS) RemoveAll(path string) error {
	if ft := f.match(FaultRemove, path); ft != nil {
		return ft.err(FaultRemove, path)
	}
	return f.inner.RemoveAll(path)
}

// Rename implements FS.
func (f *FaultFS) Rename(oldpath, newpath string) error {
	if ft := f.match(FaultRename, oldpath); ft != nil {
		return ft.err(FaultRename, oldpath)
	}
	if err := f.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.mu.Lock()
	if s, ok := f.mu.synced[oldpath]; ok {
		delete(f.mu.synced, oldpath)
		f.mu.synced[newpath] = s
	}
	f.mu.Unlock()
	return nil
}

// MkdirAll implements FS.
func (f *FaultFS) MkdirAll(path string, perm os.FileMode) error { return f.inner.MkdirAll(path, perm) }

// ReadDir implements FS.
func (f *FaultFS) ReadDir(name string) ([]os.DirEntry, error) { return f.inner.ReadDir(name) }

// Stat implements FS.
func (f *FaultFS) Stat(name string) (os.FileInfo, error) { return f.inner.Stat(name) }

// SyncDir implements FS.
func (f *FaultFS) SyncDir(path string) error {
	if ft := f.match(FaultSyncDir, path); ft != nil {
		if ft.Lose {
			return nil
		}
		return ft.err(FaultSyncDir, path)
	}
	return f.inner.SyncDir(path)
}

// faultFile is a File of a FaultFS.
type faultFile struct {
	File
	fs   *FaultFS
	path string
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if ft := f.fs.match(FaultWrite, f.path); ft != nil {
		n := 0
		if ft.Torn > 0 {
			var err error
			if n, err = f.File.WriteAt(p[:min(ft.Torn, len(p))], off); err != nil {
				return n, err
			}
		}
		return n, ft.err(FaultWrite, f.path)
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if ft := f.fs.match(FaultWrite, f.path); ft != nil {
		n := 0
		if ft.Torn > 0 {
			var err error
			if n, err = f.File.Write(p[:min(ft.Torn, len(p))]); err != nil {
				return n, err
			}
		}
		return n, ft.err(FaultWrite, f.path)
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if ft := f.fs.match(FaultSync, f.path); ft != nil {
		if ft.Lose {
			return nil
		}
		return ft.err(FaultSync, f.path)
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	fi, err := f.File.Stat()
	if err != nil {
		return err
	}
	f.fs.noteSynced(f.path, fi.Size())
	return nil
}

// Allocate makes the file an allocator, so allocating can be failed too (Fault.Err set to
// ENOSPC for a full disk, or wrapping errNoAllocate for a file system without fallocate).
func (f *faultFile) Allocate(off, n int64) error {
	if ft := f.fs.match(FaultAllocate, f.path); ft != nil {
		return ft.err(FaultAllocate, f.path)
	}
	return allocate(f.File, off, n)
}

func (f *faultFile) Truncate(size int64) error {
	if ft := f.fs.match(FaultTruncate, f.path); ft != nil {
		return ft.err(FaultTruncate, f.path)
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.noteTruncated(f.path, size)
	return nil
}
