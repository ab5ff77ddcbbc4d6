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
// Memory: when the FS is the OS, index files are mmapped and cost page cache, not heap: a
// sealed segment's read-only and trimmed to its entries; the active segment's read-write over
// the file preallocated (with zeros, sparse) to hold maxEntries+1 entries, entries being
// written straight into the mapping, as Kafka does (rw). Otherwise (a test FS without an
// *os.File) the entries live in a heap slice that grows as entries are added. So the heap does
// not grow with the data a broker holds: ~20 bytes of index per 4 KiB of log would otherwise
// be ~5 MB per partition with a full 1 GiB active segment.
//
// Persistence: entries added to a heap index are written to the file lazily (writeTail) when
// the log is flushed, when the segment is sealed and on close; those added to a read-write
// mapping are in the page cache at once. Either way the active segment's index is rebuilt
// after an unclean stop, so a tail lost in a crash never matters (nor do the zero entries a
// preallocated file ends with: load drops them); a sealed segment's index is written and then
// fsynced by the next flush (dirty).
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
	rw      bool   // mapped is read-write over the preallocated file (the active segment)
	noRW    bool   // mapping it read-write failed once: entries stay on the heap
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

// load reads the file's entries back: a sealed segment's (sealed) mmapped read-only, the
// active segment's mmapped read-write over the preallocated file, each when the FS allows,
// else into the heap. It returns errCorruptIndex (wrapped) when the size is not a multiple of
// the entry size once trailing zero entries are dropped.
func (x *indexFile) load(sealed bool) error {
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
	mapped, rw := false, false
	if sealed {
		b, mapped, err = mmapFile(x.file, int(size))
	} else if x.file.OSFile() != nil {
		full := max(int(size), x.preallocBytes())
		if int(size) < full {
			if err := x.file.Truncate(int64(full)); err != nil {
				return err
			}
		}
		if b, mapped, err = mmapFileRW(x.file, full); err != nil {
			mapped, err, x.noRW = false, nil, true // a failed mmap (say vm.max_map_count reached): the heap
		}
		rw = mapped
		b = b[:min(len(b), int(size))] // the preallocated zeros past the old size are no entries
	}
	if err != nil {
		return err
	}
	if !mapped {
		b = make([]byte, size)
		if _, err := x.file.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	n := len(b) - len(b)%x.entrySize
	for n > 0 && allZero(b[n-x.entrySize:n]) {
		n -= x.entrySize
	}
	if n < len(b) && !allZero(b[n:]) {
		if mapped {
			x.mapped = b[:cap(b)]
			err := x.release()
			return errors.Join(fmt.Errorf("%w: %s has %d bytes, not a multiple of %d", errCorruptIndex, x.path, len(b), x.entrySize), err)
		}
		return fmt.Errorf("%w: %s has %d bytes, not a multiple of %d", errCorruptIndex, x.path, len(b), x.entrySize)
	}
	if mapped {
		x.mapped, x.rw = b[:cap(b)], rw
	} else if n < len(b)/2 {
		b = append([]byte(nil), b[:n]...) // do not keep a preallocated file's zeros on the heap
	}
	x.buf = b[:n]
	x.written = n
	return nil
}

// preallocBytes is the size of an active index file: room for maxEntries entries and the one
// more that sealing the time index may add.
func (x *indexFile) preallocBytes() int { return (x.maxEntries + 1) * x.entrySize }

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

// makeWritable prepares the entries to be appended to or truncated: mmapped read-write over
// the file preallocated to at least minBytes (written first if entries were on the heap), or,
// when the FS has no *os.File, on the heap.
func (x *indexFile) makeWritable(minBytes int) error {
	if x.rw && len(x.mapped) >= minBytes {
		return nil
	}
	if x.file.OSFile() != nil && !x.noRW {
		if err := x.writeTail(); err != nil { // a heap index's entries must be in the file
			return err
		}
		full := max(x.preallocBytes(), minBytes, len(x.buf))
		if x.rw {
			full = max(full, 2*len(x.mapped))
		}
		// Cut the file to the entries, then extend it: whatever followed them (a stale or
		// corrupt tail) becomes zeros.
		if err := x.file.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		if err := x.file.Truncate(int64(full)); err != nil {
			return err
		}
		// A failed mmap (say vm.max_map_count reached) leaves the entries on the heap.
		m, ok, err := mmapFileRW(x.file, full)
		if err == nil && ok {
			old := x.mapped
			x.buf, x.mapped, x.rw = m[:len(x.buf)], m, true
			x.written = len(x.buf)
			if old != nil {
				return munmap(old)
			}
			return nil
		}
		x.noRW = true
	}
	if x.mapped == nil {
		return nil
	}
	b := make([]byte, len(x.buf), len(x.buf)+16*x.entrySize)
	copy(b, x.buf)
	m := x.mapped
	x.buf, x.mapped, x.rw = b, nil, false
	return munmap(m)
}

// add appends one entry: into the read-write mapping (and so the file), or in memory.
func (x *indexFile) add(e []byte) error {
	if err := x.makeWritable(len(x.buf) + len(e)); err != nil {
		return err
	}
	if x.rw {
		n := len(x.buf)
		copy(x.mapped[n:], e)
		x.buf = x.mapped[:n+len(e)]
		x.written = len(x.buf)
		x.dirty = true
		return nil
	}
	x.buf = append(x.buf, e...)
	return nil
}

// truncateEntries keeps the first n entries, in memory and in the file. A read-write mapping
// keeps its preallocated size, the dropped entries zeroed (zero entries at the end are none).
func (x *indexFile) truncateEntries(n int) error {
	if n >= x.entries() && x.written <= n*x.entrySize {
		return nil
	}
	if err := x.makeWritable(0); err != nil {
		return err
	}
	if x.rw {
		clear(x.mapped[n*x.entrySize : len(x.buf)])
		x.buf = x.mapped[:n*x.entrySize]
		x.written = len(x.buf)
		x.dirty = true
		return nil
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

// seal writes the tail, trims the file to exactly the entries (a preallocated file would be
// longer), and maps them read-only when possible.
func (x *indexFile) seal() error {
	if x.rw {
		// Trim under the read-write mapping (nothing reads past the entries), map the
		// entries read-only, then drop the read-write mapping.
		if err := x.file.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		x.dirty = true
		var m []byte
		if len(x.buf) > 0 {
			var ok bool
			var err error
			if m, ok, err = mmapFile(x.file, len(x.buf)); err != nil || !ok {
				if err == nil {
					err = fmt.Errorf("storage: cannot map %s again", x.path)
				}
				return err
			}
		}
		old := x.mapped
		x.buf, x.mapped, x.rw = m, m, false
		return munmap(old)
	}
	if err := x.writeTail(); err != nil {
		return err
	}
	fi, err := x.file.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != int64(len(x.buf)) {
		if x.mapped != nil { // a read-only mapping of a longer file: copy, trim, map again
			b := append([]byte(nil), x.buf...)
			m := x.mapped
			x.buf, x.mapped = b, nil
			if err := munmap(m); err != nil {
				return err
			}
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
	x.buf, x.mapped, x.rw, x.written = nil, nil, false, 0
	if m != nil {
		return munmap(m)
	}
	return nil
}

// close releases the entries and closes the file.
func (x *indexFile) close() error {
	return errors.Join(x.release(), x.file.Close())
}
