package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// errCorruptIndex reports an index file that fails its sanity check; the segment's indexes are
// then rebuilt from the .log.
var errCorruptIndex = errors.New("storage: corrupt index")

// indexFile is what the offset index and the time index share: a file of fixed-size
// big-endian entries, sorted, with every entry also held in memory.
//
// File format: entries back to back, nothing else. A file may end in zeros: an active index
// file is allocated ahead of its entries (below), and an older one was preallocated, sparse,
// to its full size; zero entries at the end of a file are not entries. Once they are dropped,
// what is left must be whole entries.
//
// Reading a file back (load) never touches a byte past its entries: the end of the written
// part of a sparse file is found with SEEK_HOLE, the last entry by reading backwards from
// there with pread, and only the entries are mapped. (Touching a page of a hole through a
// mapping allocates it on a tmpfs: scanning a 10 MB preallocated index that way filled a disk
// that had just been freed, and the SIGBUS killed the broker at every start.) The entries are
// then sanity-checked (see recovery.go); an index that fails is rebuilt from the .log.
//
// Memory: when the FS is the OS, index files are mmapped and cost page cache, not heap, once
// they hold a page of entries. Fewer live on the heap, and an index with no entries is neither
// mapped nor on the heap: vm.max_map_count is ~65,530, a broker may hold 100,000 idle
// partitions, and a mapping costs a page of page cache however few entries it holds. A loaded or sealed index is mapped read-only over exactly its entries. The active
// segment's index is mapped read-write once its entries reach a page: the mapping spans the
// room for maxEntries+1 entries, but the file is only as long as alloc, every byte below
// alloc allocated on disk (fallocate) before an entry is written there, so writing through
// the mapping never faults on a full disk; running out of space is an error from the
// fallocate (ENOSPC), which takes the log offline like any failed write, and the process
// lives. alloc grows by doubling, at most 64 KiB at a time (allocChunk), so a crash leaves at
// most that much of zeros to skip. Where the file system cannot allocate ahead (no
// fallocate), or a mmap fails (say vm.max_map_count reached), the entries stay on the heap
// (noRW), in a slice that grows as entries are added. So the heap does not grow with the data
// a broker holds: ~20 bytes of index per 4 KiB of log would otherwise be ~5 MB per partition
// with a full 1 GiB active segment. Writes through the mapping are also guarded
// (writeMapped): a memory fault, should one still happen (say the file was cut under the
// mapping), is an error, not a crash.
//
// File descriptors: an index holds none between operations (as Kafka's AbstractIndex), mapped
// or not, so a segment costs one, its .log's, and a broker's descriptors do not grow with its
// index files. The file is opened by path (useFile) for the operations that need it: load and
// mmap, allocating, cutting or trimming it (makeRoom, truncateEntries, seal), writing a heap
// index's tail, fsyncing (syncFile, used by segment.syncFiles and Flush); and closed before
// the operation returns. A mapping keeps the file's contents reachable without one (the kernel
// holds the open file description, which no descriptor limit counts), and renaming the
// segment's files (.deleted) needs none either. So file is nil unless an operation is in
// progress.
//
// Persistence: entries added to a heap index are written to the file lazily (writeTail) when
// the segment is sealed (a roll, a clean close) or the index is mapped read-write; those added
// to a read-write mapping are in the page cache at once (an fsync through any descriptor of
// the file writes back the mapping's dirty pages, so syncFile's fresh descriptor syncs them).
// Either way the active segment's index is rebuilt after an unclean stop, so a tail lost in a
// crash never matters; a sealed segment's index is written and trimmed to exactly its entries
// (as is the active one's on a clean close: Kafka's trimToValidSize) and then fsynced by the
// next flush (dirty).
//
// Concurrency: an indexFile has no lock of its own. It is guarded by its Log's locks: buf,
// mapped and rw are changed while holding Log.writeMu and Log.mu for writing and read while
// holding either; file, alloc, noRW, written, dirty and the file operations (opening the file
// by path included) are Log.writeMu's alone. Opening by path needs writeMu because that is
// what keeps the path naming this file: segment files are renamed to .deleted (retention,
// truncation, a replaced roll) and a new segment may be created under the same name only while
// holding it, and a segment out of the Log is never opened by path again. Flush opens the
// files to fsync under writeMu and fsyncs them after letting go of it.
type indexFile struct {
	fs         FS
	path       string
	file       File // open only while an operation is in progress; else nil
	mmapable   bool // the FS gives an *os.File: the entries can be mmapped
	entrySize  int
	maxEntries int // the segment rolls when an index is full

	buf     []byte // the entries; len(buf) is a multiple of entrySize
	mapped  []byte // the mapping (from the file's start) buf points into, or nil when buf is on the heap
	rw      bool   // mapped is read-write (the active segment); else read-only, len(mapped) >= len(buf)
	alloc   int    // with rw: the file's length, all of it allocated; len(buf) <= alloc <= len(mapped)
	noRW    bool   // the FS cannot allocate ahead, or a read-write mmap failed: entries stay on the heap
	written int    // bytes of buf known to be in the file (a prefix)
	dirty   bool   // bytes written to the file since its last fsync
}

// allocChunk is the most an active index file is extended by at a time (see indexFile).
const allocChunk = 64 << 10

// allocator is a File that allocates disk space itself (FaultFS's, to inject failures);
// allocate uses it instead of fallocate.
type allocator interface {
	Allocate(off, n int64) error
}

// errNoAllocate reports a file system (or FS) that cannot allocate space ahead of writes: the
// active index then stays on the heap.
var errNoAllocate = errors.New("storage: cannot allocate file space ahead")

// errMappingFault reports a memory fault writing an index through its mapping.
var errMappingFault = errors.New("storage: memory fault writing a mapped index")

// openIndexFile creates the index file if it does not exist, and closes it again.
func openIndexFile(fs FS, path string, entrySize int, maxBytes int32) (*indexFile, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	x := &indexFile{fs: fs, path: path, mmapable: f.OSFile() != nil, entrySize: entrySize, maxEntries: maxEntriesFor(maxBytes, entrySize)}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return x, nil
}

// useFile returns the index's file, opening it by path when no operation has it open, and
// done, which the caller defers: it closes the file this call opened (a nested call finds the
// file open and its done leaves it to the outer one). Holding Log.writeMu, with the segment
// in the Log (or before the Log is shared).
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

// settle closes the file, joining a close error into *err.
func (x *indexFile) settle(err *error) {
	f := x.file
	x.file = nil
	if cerr := f.Close(); cerr != nil {
		*err = errors.Join(*err, cerr)
	}
}

func maxEntriesFor(maxBytes int32, entrySize int) int {
	return max(1, int(maxBytes)/entrySize)
}

// load reads the file's entries back, touching nothing past them (see indexFile): mmapped
// read-only when the FS allows, a sealed segment's and the active one's alike (an active
// index is mapped read-write when it is first written to), else, or when the mmap fails, into
// the heap; an index with no entries is neither. It returns errCorruptIndex (wrapped) when what precedes the trailing zero
// entries is not whole entries.
func (x *indexFile) load() (err error) {
	if err := x.release(); err != nil {
		return err
	}
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
	end := dataEnd(f, size)
	n, err := x.usedBytes(f, end, size)
	if err != nil || n == 0 {
		return err
	}
	// Map the entries only if they lie inside the written part: the last one may reach into a
	// hole (its last bytes zeros), and faulting in a page of a hole allocates it on a tmpfs.
	if x.mapsReadOnly(n) && int64(n) <= end {
		if b, ok, err := mmapFile(f, n); err == nil && ok {
			x.buf, x.mapped, x.written = b, b, n
			return nil
		}
		// A failed mmap (say vm.max_map_count reached): the heap.
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		return err
	}
	x.buf, x.written = b, n
	return nil
}

// mapsReadOnly reports whether n bytes of entries are worth a read-only mapping: at least a
// page (a mapping costs a page of page cache however few entries it holds, and one of the
// ~65,530 mappings vm.max_map_count allows), and the FS has an *os.File.
func (x *indexFile) mapsReadOnly(n int) bool { return x.mmapable && n >= os.Getpagesize() }

// loadScan is how much of an index file load reads at a time, backwards from the end of its
// written part, looking for the last entry.
const loadScan = 16 << 10

var loadScanPool = sync.Pool{New: func() any { return new([loadScan]byte) }}

// usedBytes returns the length of the entries of f, a file of size bytes whose bytes from end
// on read as zeros: up to the end of the last entry holding a non-zero byte, found by reading
// [0, end) backwards with pread (which, unlike a mapping, never allocates a hole's pages).
// A non-zero byte in a partial entry at the end of the file is errCorruptIndex.
func (x *indexFile) usedBytes(f File, end, size int64) (int, error) {
	b := loadScanPool.Get().(*[loadScan]byte)
	defer loadScanPool.Put(b)
	for hi := end; hi > 0; {
		lo := max(0, hi-loadScan)
		chunk := b[:hi-lo]
		if n, err := f.ReadAt(chunk, lo); err != nil && !(errors.Is(err, io.EOF) && n == len(chunk)) {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] == 0 {
				continue
			}
			es := int64(x.entrySize)
			n := (lo + int64(i) + es) / es * es
			if n > size {
				return 0, fmt.Errorf("%w: %s has %d bytes, not a multiple of %d", errCorruptIndex, x.path, size, x.entrySize)
			}
			return int(n), nil
		}
		hi = lo
	}
	return 0, nil
}

// preallocBytes is what an active index may grow to: room for maxEntries entries and the one
// more that sealing the time index may add. A read-write mapping spans at least this much.
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

// add appends one entry: into the read-write mapping (and so the file), or on the heap. The
// common case, a mapping with allocated room, opens nothing and allocates nothing (makeRoom's
// deferred close would).
func (x *indexFile) add(e []byte) error {
	n := len(x.buf)
	end := n + len(e)
	if !x.rw || end > x.alloc {
		if err := x.makeRoom(end); err != nil {
			return err
		}
	}
	if x.rw {
		if err := writeMapped(x.mapped[n:end], e); err != nil {
			return fmt.Errorf("%s: %w", x.path, err)
		}
		x.buf = x.mapped[:end]
		x.written = end
		x.dirty = true
		return nil
	}
	x.buf = append(x.buf, e...)
	return nil
}

// makeRoom makes the first end bytes writable: allocated in the file under a read-write
// mapping, which it creates once the entries reach a page (the entries written and the file
// cut to them first, so whatever followed them becomes zeros) or extends; or, below a page or
// where a mapping cannot be, on the heap. An ENOSPC is returned; the entries are then as they
// were.
func (x *indexFile) makeRoom(end int) (err error) {
	if !x.mmapable || x.noRW || (!x.rw && end < os.Getpagesize()) {
		return x.toHeap()
	}
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	if x.rw && end <= len(x.mapped) {
		to := x.nextAlloc(end, len(x.mapped))
		if err := allocate(f, int64(x.alloc), int64(to-x.alloc)); err != nil {
			return x.noRoom(err)
		}
		x.alloc = to
		return nil
	}
	if err := x.writeTail(); err != nil { // a heap index's entries must be in the file
		return err
	}
	if err := f.Truncate(int64(len(x.buf))); err != nil {
		return err
	}
	x.alloc = min(x.alloc, len(x.buf))
	size := max(x.preallocBytes(), end)
	if x.rw {
		size = max(size, 2*len(x.mapped))
	}
	to := x.nextAlloc(end, size)
	if err := allocate(f, 0, int64(to)); err != nil {
		return x.noRoom(err)
	}
	m, ok, err := mmapFileRW(f, size)
	if err != nil || !ok { // a failed mmap (say vm.max_map_count reached): the heap
		x.noRW = true
		return x.toHeap()
	}
	old := x.mapped
	x.buf, x.mapped, x.rw, x.alloc = m[:len(x.buf)], m, true, to
	x.written = len(x.buf)
	if old != nil {
		return munmap(old)
	}
	return nil
}

// noRoom handles a failed allocation: where allocating ahead is not supported the entries
// move to the heap for good; other errors (ENOSPC) are returned.
func (x *indexFile) noRoom(err error) error {
	if errors.Is(err, errNoAllocate) {
		x.noRW = true
		return x.toHeap()
	}
	return err
}

// nextAlloc is the allocated length to grow to for end bytes of entries in a mapping of size
// bytes: whole pages, doubling up to allocChunk at a time, at most size.
func (x *indexFile) nextAlloc(end, size int) int {
	page := os.Getpagesize()
	to := (end + page - 1) / page * page
	to = max(to, x.alloc+min(max(x.alloc, page), allocChunk))
	return max(min(to, size), end)
}

// toHeap moves mapped entries to the heap (they are in the file already).
func (x *indexFile) toHeap() error {
	if x.mapped == nil {
		return nil
	}
	b := make([]byte, len(x.buf), len(x.buf)+16*x.entrySize)
	copy(b, x.buf)
	m := x.mapped
	x.buf, x.mapped, x.rw, x.alloc = b, nil, false, 0
	return munmap(m)
}

// writeMapped copies src into dst, part of a mapping, or zeroes dst when src is nil, turning
// a memory fault (SIGBUS: a page that cannot be allocated, or the file cut under the mapping)
// into errMappingFault instead of a crash.
func writeMapped(dst, src []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w at %#x", errMappingFault, f.Addr())
		}
	}()
	if src == nil {
		clear(dst)
	} else {
		copy(dst, src)
	}
	return nil
}

// truncateEntries keeps the first n entries, in memory and in the file. A read-write mapping
// left with a page of entries keeps its allocated length, the dropped entries zeroed (zero
// entries at the end are none); fewer entries move to the heap and the file is cut to them
// (to nothing when there are none: then nothing is mapped or kept).
func (x *indexFile) truncateEntries(n int) (err error) {
	keep := n * x.entrySize
	if keep >= len(x.buf) && x.written <= keep {
		return nil
	}
	if x.rw && keep >= os.Getpagesize() {
		if err := writeMapped(x.mapped[keep:len(x.buf)], nil); err != nil {
			return fmt.Errorf("%s: %w", x.path, err)
		}
		x.buf = x.mapped[:keep]
		x.written = keep
		x.dirty = true
		return nil
	}
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	if keep == 0 {
		if err := x.release(); err != nil {
			return err
		}
	} else {
		x.buf = x.buf[:keep]
		if keep < os.Getpagesize() {
			if err := x.toHeap(); err != nil {
				return err
			}
		}
	}
	// A read-only mapping may now reach past the end of the file; nothing reads past buf.
	if err := f.Truncate(int64(keep)); err != nil {
		return err
	}
	x.written = min(x.written, keep)
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

// seal writes the tail, trims the file to exactly the entries (an active file is longer) and
// maps them read-only when possible (an index with no entries is not mapped).
func (x *indexFile) seal() (err error) {
	f, done, err := x.useFile()
	if err != nil {
		return err
	}
	defer done(&err)
	if err := x.writeTail(); err != nil {
		return err
	}
	if x.rw {
		// Trim under the read-write mapping (nothing reads past the entries), map the
		// entries read-only, then drop the read-write mapping.
		if err := f.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		x.dirty = true
		old := x.mapped
		x.mapReadOnly(f)
		return munmap(old)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != int64(len(x.buf)) { // a read-only mapping never reads past the entries
		if err := f.Truncate(int64(len(x.buf))); err != nil {
			return err
		}
		x.dirty = true
	}
	if x.mapped == nil {
		x.mapReadOnly(f)
	}
	return nil
}

// mapReadOnly points buf at a read-only mapping of the entries in f, or at a heap copy when
// they are too few to map (mapsReadOnly) or the mmap fails (say vm.max_map_count reached); no
// entries, no mapping. It leaves whatever buf was in before (a mapping) to the caller.
func (x *indexFile) mapReadOnly(f File) {
	x.rw, x.alloc = false, 0
	if len(x.buf) == 0 {
		x.buf, x.mapped = nil, nil
		return
	}
	if x.mapsReadOnly(len(x.buf)) {
		if m, ok, err := mmapFile(f, len(x.buf)); err == nil && ok {
			x.buf, x.mapped = m, m
			return
		}
		// A failed mmap (say vm.max_map_count reached): the heap.
	}
	if x.mapped != nil {
		x.buf = append([]byte(nil), x.buf...)
	}
	x.mapped = nil
}

// syncFile returns the file to fsync for the index, opened by path; the caller closes it
// after the fsync (owned is always true). Holding Log.writeMu, with the segment in the Log.
func (x *indexFile) syncFile() (f File, owned bool, err error) {
	if f, err = x.fs.OpenFile(x.path, os.O_RDWR, 0); err != nil {
		return nil, false, err
	}
	return f, true, nil
}

// release drops the entries from memory (unmapping them).
func (x *indexFile) release() error {
	m := x.mapped
	x.buf, x.mapped, x.rw, x.alloc, x.written = nil, nil, false, 0, 0
	if m != nil {
		return munmap(m)
	}
	return nil
}

// close releases the entries. The index holds no file between operations.
func (x *indexFile) close() error {
	return x.release()
}
