package storage

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// FileCache bounds how many segment .log files a broker holds open at once, so that the
// number of partitions and segments it stores never runs the process out of descriptors
// (Kafka and others ask the operator to raise the limit; a broker of 100,000 partitions here
// fits under 20,000). A segment's .log is opened when it is first read or written and stays
// open while it is in use; an idle one is closed when a new file needs its descriptor,
// chosen by the clock algorithm (a file used since the hand last passed it gets a second
// chance), so the files of partitions being produced to and fetched from stay open and those
// of idle partitions and old segments do not. Index files hold no descriptor at all (see
// indexFile), and every other file the log dir has (checkpoints, snapshots) is opened only
// for the call that reads or writes it.
//
// The budget is what the cache may open; the rest of the process limit stays free for
// connections, the controller's files and the short-lived files (see FileBudget). When every
// open file is in use (pinned) a new open is refused with ErrTooManyOpenFiles rather than
// exceeding the budget.
//
// Locking: FileCache.mu guards ring, hand and every segmentFile's slot. Lock order:
// segmentFile.mu, then FileCache.mu; eviction, which holds FileCache.mu, only TryLocks a
// victim's segmentFile.mu, so it never waits against that order.
type FileCache struct {
	budget int64 // most files open at once; <= 0 is no bound
	open   atomic.Int64
	evicts atomic.Int64

	mu struct {
		sync.Mutex
		ring []*segmentFile // the open files, in no order; hand walks it
		hand int
	}
}

// NewFileCache returns a cache that holds at most budget files open; budget <= 0 is no bound.
func NewFileCache(budget int) *FileCache { return &FileCache{budget: int64(budget)} }

// FileBudget is the budget a log dir's FileCache gets from the process's descriptor limit
// (RLIMIT_NOFILE, which the Go runtime raises to the hard limit at start): three quarters of
// it, leaving at least 256 and at most half of it to everything else. It is 0 (no bound)
// when the limit cannot be read or is unlimited.
func FileBudget() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur > 1<<30 {
		return 0
	}
	return budgetFor(int64(rl.Cur))
}

// budgetFor is FileBudget for a limit of n descriptors.
func budgetFor(n int64) int {
	reserve := min(max(n/4, 256), n/2)
	return int(max(n-reserve, 1))
}

// Open is how many files the cache holds open now.
func (c *FileCache) Open() int { return int(c.open.Load()) }

// Evictions counts the idle files closed to make room since the cache was made.
func (c *FileCache) Evictions() int64 { return c.evicts.Load() }

// Budget is the most files the cache holds open at once; 0 is no bound.
func (c *FileCache) Budget() int { return int(max(c.budget, 0)) }

// openFor opens sf's file for it, first closing idle files while the cache is at its budget.
// Holding sf.mu.
func (c *FileCache) openFor(sf *segmentFile, flag int) (File, error) {
	if n := c.open.Add(1); c.budget > 0 && n > c.budget {
		if !c.evictOne(sf) {
			c.open.Add(-1)
			return nil, fmt.Errorf("%w: %d files open, the budget, all in use (opening %s)", ErrTooManyOpenFiles, c.budget, sf.mu.path)
		}
	}
	f, err := sf.fs.OpenFile(sf.mu.path, flag, 0o644)
	if err != nil {
		c.open.Add(-1)
		if outOfFiles(err) {
			err = fmt.Errorf("%w: %w", ErrTooManyOpenFiles, err)
		}
		return nil, err
	}
	c.mu.Lock()
	sf.slot = len(c.mu.ring)
	c.mu.ring = append(c.mu.ring, sf)
	c.mu.Unlock()
	return f, nil
}

// evictOne closes one idle open file other than except, giving every recently used one a
// second chance; false when none is idle. The caller has counted the file it is about to
// open, so one closed here keeps the count at the budget.
func (c *FileCache) evictOne(except *segmentFile) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range 2 * len(c.mu.ring) {
		if c.mu.hand >= len(c.mu.ring) {
			c.mu.hand = 0
		}
		v := c.mu.ring[c.mu.hand]
		c.mu.hand++
		if v == except || !v.mu.TryLock() {
			continue
		}
		if v.mu.pins > 0 || v.recent.Swap(false) {
			v.mu.Unlock()
			continue
		}
		f := v.mu.f
		v.mu.f = nil
		c.removeLocked(v)
		v.mu.Unlock()
		c.open.Add(-1)
		c.evicts.Add(1)
		if err := f.Close(); err != nil {
			// An idle file has no write in progress; a close error is only reported.
			v.logClose(err)
		}
		return true
	}
	return false
}

// outOfFiles reports whether err is the cache's refusal or the process's (or system's)
// descriptor limit: a condition that passes, not a failure of the disk.
func outOfFiles(err error) bool {
	return errors.Is(err, ErrTooManyOpenFiles) || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE)
}

// removeLocked takes sf out of the ring. Holding c.mu.
func (c *FileCache) removeLocked(sf *segmentFile) {
	i, last := sf.slot, len(c.mu.ring)-1
	c.mu.ring[i] = c.mu.ring[last]
	c.mu.ring[i].slot = i
	c.mu.ring[last] = nil
	c.mu.ring = c.mu.ring[:last]
	sf.slot = -1
}

// closed drops sf, whose file its owner has just closed, from the cache.
func (c *FileCache) closed(sf *segmentFile) {
	c.mu.Lock()
	c.removeLocked(sf)
	c.mu.Unlock()
	c.open.Add(-1)
}

// segmentFile is a segment's .log file, opened on demand through the Log's FileCache. Every
// use takes a pin (acquire) that keeps the descriptor open until release: the calls below
// each pin for their duration, a Slice pins for its life (sendfile from its descriptor), and
// a segment that leaves the Log while readers still hold it is pinned until its last
// reference goes (keep, from segment.keepForReaders), because its renamed file may be removed
// from the directory under them.
type segmentFile struct {
	fs     FS
	cache  *FileCache
	logger interface{ Warn(string, ...any) }
	recent atomic.Bool // used since the eviction hand last passed; set on every acquire
	slot   int         // index in cache.mu.ring while open; guarded by FileCache.mu

	mu struct {
		sync.Mutex
		path   string
		f      File // nil while closed
		pins   int
		kept   bool // keep has pinned it for good
		closed bool // Close was called: no more opens
	}
}

func newSegmentFile(fs FS, cache *FileCache, path string, logger interface{ Warn(string, ...any) }) *segmentFile {
	sf := &segmentFile{fs: fs, cache: cache, logger: logger, slot: -1}
	sf.mu.path = path
	return sf
}

// create creates the file (it must not hold data: the caller checks) and leaves it open,
// being the new active segment's.
func (sf *segmentFile) create() error {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	f, err := sf.cache.openFor(sf, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return err
	}
	sf.mu.f = f
	sf.recent.Store(true)
	return nil
}

// acquire returns the open file, opening it if needed, pinned until release.
func (sf *segmentFile) acquire() (File, error) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.mu.closed {
		return nil, fmt.Errorf("%w: %s", ErrLogClosed, sf.mu.path)
	}
	if sf.mu.f == nil {
		f, err := sf.cache.openFor(sf, os.O_RDWR)
		if err != nil {
			return nil, err
		}
		sf.mu.f = f
	}
	sf.mu.pins++
	sf.recent.Store(true)
	return sf.mu.f, nil
}

// release drops a pin taken by acquire.
func (sf *segmentFile) release() {
	sf.mu.Lock()
	sf.mu.pins--
	sf.mu.Unlock()
}

// keep pins the file for good (until Close), opening it if needed; see the type's comment.
func (sf *segmentFile) keep() error {
	sf.mu.Lock()
	kept := sf.mu.kept
	sf.mu.Unlock()
	if kept {
		return nil
	}
	if _, err := sf.acquire(); err != nil {
		return err
	}
	sf.mu.Lock()
	sf.mu.kept = true
	sf.mu.Unlock()
	return nil
}

// renamed records that the file is now at path (the caller renamed it, holding Log.writeMu).
func (sf *segmentFile) renamed(path string) {
	sf.mu.Lock()
	sf.mu.path = path
	sf.mu.Unlock()
}

func (sf *segmentFile) logClose(err error) {
	if sf.logger != nil {
		sf.logger.Warn("closing an idle segment file", "err", err)
	}
}

// Name is the file's path.
func (sf *segmentFile) Name() string {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.mu.path
}

// ReadAt reads from the file, opening it if needed.
func (sf *segmentFile) ReadAt(b []byte, off int64) (int, error) {
	f, err := sf.acquire()
	if err != nil {
		return 0, err
	}
	defer sf.release()
	return f.ReadAt(b, off)
}

// Truncate truncates the file, opening it if needed.
func (sf *segmentFile) Truncate(size int64) error {
	f, err := sf.acquire()
	if err != nil {
		return err
	}
	defer sf.release()
	return f.Truncate(size)
}

// Stat describes the file: through its descriptor when open, by path otherwise.
func (sf *segmentFile) Stat() (os.FileInfo, error) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.mu.f != nil {
		return sf.mu.f.Stat()
	}
	return sf.fs.Stat(sf.mu.path)
}

// Close closes the file for good.
func (sf *segmentFile) Close() error {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.mu.closed = true
	f := sf.mu.f
	if f == nil {
		return nil
	}
	sf.mu.f = nil
	sf.cache.closed(sf)
	return f.Close()
}
