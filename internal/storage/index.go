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
// *os.File, or a read-write mmap that failed: noRW) the entries live in a heap slice that
// grows as entries are added. So the heap does not grow with the data a broker holds: ~20
// bytes of index per 4 KiB of log would otherwise be ~5 MB per partition with a full 1 GiB
// active segment.
//
// File descriptors: a mapped index holds none (as Kafka's AbstractIndex), so a segment costs
// one, its .log's, and a broker's descriptors do not grow with its index files. The file is
// opened by path (useFile) for the operations that need it: load and mmap, preallocating or
// trimming it (makeWritable, seal, truncateEntries), writing a heap index's tail, fsyncing a
// dirty index (syncFile, used by segment.syncFiles and Flush); and closed before the
// operation returns. A mapping keeps the file's contents reachable without one (the kernel
// holds the open file description, which no descriptor limit counts), and renaming the
// segment's files (.deleted) needs none either. Only a heap index holds its file open from
// openIndexFile or the failed mmap on until close (keepsFile): its entries are written to the
// file lazily and it has no mapping to flush through. So file is nil exactly when !keepsFile()
// and no operation is in progress; once keepsFile() is true it stays true.
//
// Persistence: entries added to a heap index are written to the file lazily (writeTail) when
// the log is flushed, when the segment is sealed and on close; those added to a read-write
// mapping are in the page cache at once (an fsync through any descriptor of the file writes
// back the mapping's dirty pages, so syncFile's fresh descriptor syncs them). Either way the
// active segment's index is rebuilt after an unclean stop, so a tail lost in a crash never
// matters (nor do the zero entries a preallocated file ends with: load drops them); a sealed
// segment's index is written and then fsynced by the next flush (dirty).
//
// Concurrency: an indexFile has no lock of its own. It is guarded by its Log's locks: buf and
// mapped are changed while holding Log.writeMu and Log.mu for writing and read while holding
// either; file, written, dirty and the file operations (opening the file by path included) are
// Log.writeMu's alone. Opening by path needs writeMu because that is what keeps the path
// naming this file: segment files are renamed to .deleted (retention, truncation, a replaced
// roll) and a new segment may be created under the same name only while holding it, and a
// segment out of the Log is never opened by path again. Flush opens the files to fsync under
// writeMu and fsyncs them after letting go of it.
type indexFile struct {
	fs         FS
	path       string
	file       File // open only while keepsFile() or an operation is in progress; else nil
	mmapable   bool // the FS gives an *os.File: the entries can be mmapped
	entrySize  int
	maxEntries int // the segment rolls when an index is full

	buf     []byte // the entries; len(buf) is a multiple of entrySize
	mapped  []byte // the mmap buf points into, or nil when buf is on the heap
	rw      bool   // mapped is read-write over the preallocated file (the active segment)
	noRW    bool   // mapping it read-write failed once: entries stay on the heap
	written int    // bytes of buf known to be in the file (a prefix)
	dirty   bool   // bytes written to the file since its last fsync
}

// openIndexFile creates the index file if it does not exist. The file is left open only when
// the entries can never be mapped (the FS has no *os.File).
func openIndexFile(fs FS, path string, entrySize int, maxBytes int32) (*indexFile, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	x := &indexFile{fs: fs, path: path, file: f, mmapable: f.OSFile() != nil, entrySize: entrySize, maxEntries: maxEntriesFor(maxBytes, entrySize)}
	var cerr error
	x.settle(&cerr)
	if cerr != nil {
		return nil, cerr
	}
	return x, nil
}

// keepsFile reports whether the index holds its file open between operations: only a heap
// index does (see the type's comment).
func (x *indexFile) keepsFile() bool { return !x.mmapable || x.noRW }

// useFile returns the index's file, opening it by path when the index holds none, and done,
// which the caller defers: it closes the file this call opened unless the index now keeps it
// (a nested call finds the file open and its done leaves it to the outer one). Holding
// Log.writeMu, with the segment in the Log (or before the Log is shared).
func (x *indexFile) useFile() (f File, done func(*error), err error) {
	if x.file != nil {
		return x.file, func(*error) {}, nil
	}
	if x.file, err = x.fs.OpenFile(x.path, os.O_RDWR, 0); err != nil {
		x.file = nil
		return nil, nil, err
	}
	return x.file, x.settle, nil
}

// settle closes the file unless the index keeps it, joining a close error into *err.
func (x *indexFile) settle(err *error) {
	if x.file == nil || x.keepsFile() {
		return
	}
	f := x.file
	x.file = nil
	if cerr := f.Close(); cerr != nil {
		*err = errors.Join(*err, cerr)
	}
}

func maxEntriesFor(maxBytes int32, entrySize int) int {
	return max(1, int(maxBytes)/entrySize)
}

// load reads the file's entries back: a sealed segment's (sealed) mmapped read-only, the
// active segment's mmapped read-write over the preallocated file, each when the FS allows,
// else into the heap. It returns errCorruptIndex (wrapped) when the size is not a multiple of
// the entry size once trailing zero entries are dropped.
func (x *indexFile) load(sealed bool) (err error) {
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	fi, err := f.Stat()
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
		b, mapped, err = mmapFile(f, int(size))
	} else if x.mmapable {
		full := max(int(size), x.preallocBytes())
		if int(size) < full {
			if err := f.Truncate(int64(full)); err != nil {
				return err
			}
		}
		if b, mapped, err = mmapFileRW(f, full); err != nil {
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
		if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
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
// when the FS has no *os.File, on the heap. The common case, a mapping with room, opens
// nothing (and allocates nothing: remap's deferred close would).
func (x *indexFile) makeWritable(minBytes int) error {
	if x.rw && len(x.mapped) >= minBytes {
		return nil
	}
	return x.remap(minBytes)
}

// remap is makeWritable's slow path.
func (x *indexFile) remap(minBytes int) (err error) {
	if x.mmapable && !x.noRW {
		var f File
		var done func(*error)
		if f, done, err = x.useFile(); err != nil {
			return err
		}
		defer done(&err)
		if err := x.writeTail(); err != nil { // a heap index's entries must be in the file
			return err
		}
		full := max(x.preallocBytes(), minBytes, len(x.buf))
		if x.rw {
			full = max(full, 2*len(x.mapped))
		}
		// Cut the file to the entries, then extend it: whatever followed them (a stale or
		// corrupt tail) becomes zeros.
		if err := f.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		if err := f.Truncate(int64(full)); err != nil {
			return err
		}
		// A failed mmap (say vm.max_map_count reached) leaves the entries on the heap, and
		// the file open (keepsFile).
		m, ok, err := mmapFileRW(f, full)
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
	return x.truncateHeap(n)
}

// truncateHeap is truncateEntries for entries on the heap.
func (x *indexFile) truncateHeap(n int) (err error) {
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	x.buf = x.buf[:n*x.entrySize]
	if err := f.Truncate(int64(len(x.buf))); err != nil {
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
	return x.writeTailSlow()
}

func (x *indexFile) writeTailSlow() (err error) {
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	if _, err := f.WriteAt(x.buf[x.written:], int64(x.written)); err != nil {
		return err
	}
	x.written = len(x.buf)
	x.dirty = true
	return nil
}

// seal writes the tail, trims the file to exactly the entries (a preallocated file would be
// longer), and maps them read-only when possible.
func (x *indexFile) seal() (err error) {
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	if x.rw {
		// Trim under the read-write mapping (nothing reads past the entries), map the
		// entries read-only, then drop the read-write mapping.
		if err := f.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		x.dirty = true
		var m []byte
		if len(x.buf) > 0 {
			var ok bool
			var err error
			if m, ok, err = mmapFile(f, len(x.buf)); err != nil || !ok {
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
	fi, err := f.Stat()
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
		if err := f.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		x.dirty = true
	}
	if x.mapped != nil || len(x.buf) == 0 {
		return nil
	}
	m, ok, err := mmapFile(f, len(x.buf))
	if err != nil || !ok {
		return err
	}
	x.buf, x.mapped = m, m
	return nil
}

// syncFile returns the file to fsync for the index: its own when it keeps one (open until
// close, so a Flush holding a segment reference may fsync it after letting go of
// Log.writeMu), else the file opened by path, which the caller closes after the fsync
// (owned). Holding Log.writeMu, with the segment in the Log.
func (x *indexFile) syncFile() (f File, owned bool, err error) {
	if x.file != nil {
		return x.file, false, nil
	}
	if f, err = x.fs.OpenFile(x.path, os.O_RDWR, 0); err != nil {
		return nil, false, err
	}
	return f, true, nil
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

// close releases the entries and closes the file if the index holds it.
func (x *indexFile) close() error {
	err := x.release()
	if x.file != nil {
		err = errors.Join(err, x.file.Close())
		x.file = nil
	}
	return err
}
