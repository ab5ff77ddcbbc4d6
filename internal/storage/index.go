package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// errCorruptIndex reports an index file that fails its sanity check; the segment's indexes are
// then rebuilt from the .log.
var errCorruptIndex = errors.New("storage: corrupt index")

// indexFile is what the offset index and the time index share: a file of fixed-size
// big-endian entries, sorted, with every entry also held in memory.
//
// File format: entries back to back, nothing else; the file length is a multiple of the entry
// size once trailing all-zero entries are dropped (Kafka preallocates index files with zeros,
// so zero entries at the end of a file read back after a crash are not entries).
//
// Memory: the active segment's entries live in a heap slice that grows as entries are added;
// a sealed segment's file is mmapped read-only when the FS is the OS (mapped != nil), so
// sealed indexes cost page cache, not heap.
//
// Persistence: entries are added in memory by the append path and written to the file lazily
// (writeTail) when the log is flushed, when the segment is sealed and on close, like Kafka's
// mmapped indexes. The active segment's index is always rebuilt after an unclean stop, so a
// tail lost in a crash never matters; a sealed segment's index is written and then fsynced by
// the next flush (dirty).
//
// Concurrency: an indexFile has no lock of its own. It is guarded by its Log's locks: buf and
// mapped are changed while holding Log.writeMu and Log.mu for writing and read while holding
// either; written, dirty and the file writes are Log.writeMu's alone.
type indexFile struct {
	path       string
	file       File
	entrySize  int
	maxEntries int // the segment rolls when an index is full

	buf     []byte // the entries; len(buf) is a multiple of entrySize
	mapped  []byte // the mmap buf points into, or nil when buf is on the heap
	written int    // bytes of buf known to be in the file (a prefix)
	dirty   bool   // bytes written to the file since its last fsync
}

func openIndexFile(fs FS, path string, entrySize int, maxBytes int32) (*indexFile, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &indexFile{path: path, file: f, entrySize: entrySize, maxEntries: maxEntriesFor(maxBytes, entrySize)}, nil
}

func maxEntriesFor(maxBytes int32, entrySize int) int {
	return max(1, int(maxBytes)/entrySize)
}

// load reads the file's entries into memory, mmapping them when useMmap and the FS allows.
// It returns errCorruptIndex (wrapped) when the size is not a multiple of the entry size.
func (x *indexFile) load(useMmap bool) error {
	fi, err := x.file.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size > int64(^uint32(0)) {
		return fmt.Errorf("%w: %s is %d bytes", errCorruptIndex, x.path, size)
	}
	if err := x.release(); err != nil {
		return err
	}
	var b []byte
	mapped := false
	if useMmap {
		if b, mapped, err = mmapFile(x.file, int(size)); err != nil {
			return err
		}
	}
	if !mapped {
		b = make([]byte, size)
		if _, err := x.file.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	if mapped {
		x.mapped = b
	}
	n := len(b) - len(b)%x.entrySize
	for n > 0 && allZero(b[n-x.entrySize:n]) {
		n -= x.entrySize
	}
	if n < len(b) && !allZero(b[n:]) {
		return fmt.Errorf("%w: %s has %d bytes, not a multiple of %d", errCorruptIndex, x.path, len(b), x.entrySize)
	}
	x.buf = b[:n]
	x.written = n
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (x *indexFile) entries() int { return len(x.buf) / x.entrySize }

func (x *indexFile) isFull() bool { return x.entries() >= x.maxEntries }

func (x *indexFile) entry(i int) []byte { return x.buf[i*x.entrySize : (i+1)*x.entrySize] }

// makeWritable moves mapped entries onto the heap so they can be appended to or truncated.
func (x *indexFile) makeWritable() error {
	if x.mapped == nil {
		return nil
	}
	b := make([]byte, len(x.buf), len(x.buf)+16*x.entrySize)
	copy(b, x.buf)
	m := x.mapped
	x.buf, x.mapped = b, nil
	return munmap(m)
}

// add appends one entry in memory.
func (x *indexFile) add(e []byte) error {
	if err := x.makeWritable(); err != nil {
		return err
	}
	x.buf = append(x.buf, e...)
	return nil
}

// truncateEntries keeps the first n entries, in memory and in the file.
func (x *indexFile) truncateEntries(n int) error {
	if n >= x.entries() && x.written <= n*x.entrySize {
		return nil
	}
	if err := x.makeWritable(); err != nil {
		return err
	}
	x.buf = x.buf[:n*x.entrySize]
	if err := x.file.Truncate(int64(len(x.buf))); err != nil {
		return err
	}
	x.written = min(x.written, len(x.buf))
	x.dirty = true
	return nil
}

// writeTail writes the entries not yet in the file.
func (x *indexFile) writeTail() error {
	if x.written >= len(x.buf) {
		return nil
	}
	if _, err := x.file.WriteAt(x.buf[x.written:], int64(x.written)); err != nil {
		return err
	}
	x.written = len(x.buf)
	x.dirty = true
	return nil
}

// seal writes the tail, trims the file to exactly the entries (a preallocated file from Kafka
// would be longer), and swaps the heap copy for an mmap of the file when possible.
func (x *indexFile) seal() error {
	if err := x.writeTail(); err != nil {
		return err
	}
	fi, err := x.file.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != int64(len(x.buf)) {
		if err := x.makeWritable(); err != nil {
			return err
		}
		if err := x.file.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		x.dirty = true
	}
	if x.mapped != nil || len(x.buf) == 0 {
		return nil
	}
	m, ok, err := mmapFile(x.file, len(x.buf))
	if err != nil || !ok {
		return err
	}
	x.buf, x.mapped = m, m
	return nil
}

// sync fsyncs the file if it was written since the last sync.
func (x *indexFile) sync() error {
	if !x.dirty {
		return nil
	}
	if err := x.file.Sync(); err != nil {
		return err
	}
	x.dirty = false
	return nil
}

// release drops the entries from memory (unmapping them).
func (x *indexFile) release() error {
	m := x.mapped
	x.buf, x.mapped, x.written = nil, nil, 0
	if m != nil {
		return munmap(m)
	}
	return nil
}

// close releases the entries and closes the file.
func (x *indexFile) close() error {
	return errors.Join(x.release(), x.file.Close())
}
