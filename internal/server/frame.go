package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Request framing, as Kafka's: a 4-byte big-endian size, then that many bytes holding the
// request header and body. The size is checked against socket.request.max.bytes before a
// single byte of the frame is allocated, so a hostile length costs nothing.
//
// Request header v1 (v2 adds tagged fields after client_id):
//
//	api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16 len)

// Framing errors close the connection.
var (
	errFrameSize    = errors.New("server: frame size out of range")
	errShortHeader  = errors.New("server: request header truncated")
	errBadTagBuffer = errors.New("server: malformed tagged fields in request header")
)

// header is a decoded request header.
type header struct {
	key           int16
	version       int16
	correlationID int32
	clientID      string
}

// minFrame is the smallest possible request: key, version, correlation id, client id length.
const minFrame = 2 + 2 + 4 + 2

// Request buffers are pooled, so a frame is read into a buffer an earlier frame used instead
// of a new one the runtime must zero (19% of broker CPU producing to 1,000 partitions, whose
// requests reach tens of MiB). A decoded request's byte slices (Produce records) alias the
// buffer, so it goes back to its pool only when the handler is done with them: once the
// request is answered, or when the handler calls Conn.Release (Produce, once its records
// are in the log and before it waits for acks=all). See conn.releaseRequest.
//
//   - Frames up to 1 MiB use size classes in sync.Pools: class c holds buffers of capacity at
//     least minBufSize<<c, and a frame takes one from the smallest class that fits it. A new
//     buffer grows (doubling from 64 KiB) as the frame's bytes arrive.
//   - Larger frames use anonymous memory mappings outside the Go heap (bigBufs): their pages
//     are only backed as the frame's bytes arrive, they do not inflate the garbage
//     collector's heap goal, and their memory goes back to the OS as soon as they are idle.
//     Mappings are reused, never unmapped: a stale reference reads zeros, it cannot fault.
//
// Either way a peer that declares a large frame and sends little costs about what it sent.
const (
	minBufShift = 16 // 64 KiB
	minBufSize  = 1 << minBufShift
	bufClasses  = 5 // 64 KiB .. 1 MiB
	maxSmallBuf = minBufSize << (bufClasses - 1)
	bigBufIdle  = 30 * time.Second
)

var bufPools [bufClasses]sync.Pool

// bigBuf is one mapping for frames over maxSmallBuf.
type bigBuf struct {
	mem []byte // the whole mapping
	hot bool   // its pages may be resident: not given back since it was last used
}

// bigBufs holds every mapping: free ones in free, in use ones only in all. At most one free
// mapping is hot (the last one returned); the others' pages are given back when they are
// returned, and the hot one's after bigBufIdle without a big frame.
var bigBufs struct {
	sync.Mutex
	all  map[uintptr]*bigBuf // by address
	free []*bigBuf
	idle *time.Timer
}

// bufClass is the smallest class whose buffers hold n <= maxSmallBuf bytes.
func bufClass(n int) int {
	if n <= minBufSize {
		return 0
	}
	return bits.Len(uint(n-1)) - minBufShift
}

// readFrame reads one frame into a pooled buffer. The caller returns it with putBuf.
func readFrame(r io.Reader, maxSize int32) (*[]byte, error) {
	n, err := readSize(r, maxSize)
	if err != nil {
		return nil, err
	}
	return readBody(r, n)
}

// readSize reads a frame's length and checks it against maxSize (socket.request.max.bytes).
func readSize(r io.Reader, maxSize int32) (int32, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return 0, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < minFrame || n > maxSize {
		return 0, fmt.Errorf("%w: %d bytes (socket.request.max.bytes %d)", errFrameSize, n, maxSize)
	}
	return n, nil
}

// readBody reads the n bytes of a frame whose length readSize read into a pooled buffer.
// The caller returns it with putBuf.
func readBody(r io.Reader, n int32) (*[]byte, error) {
	if int(n) > maxSmallBuf {
		if mem := getBig(int(n)); mem != nil {
			b := mem[:n]
			if _, err := io.ReadFull(r, b); err != nil {
				putBig(mem)
				return nil, err
			}
			return &b, nil
		}
	}
	c := min(bufClass(int(n)), bufClasses-1)
	bp, _ := bufPools[c].Get().(*[]byte)
	if bp == nil || cap(*bp) < int(n) {
		b := make([]byte, 0, minBufSize)
		bp = &b
	}
	full := max(minBufSize<<c, int(n)) // what a new buffer grows to, to be pooled in class c
	b := (*bp)[:0]
	for len(b) < int(n) {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(full, 2*cap(b)))
			copy(grown, b)
			b = grown
		}
		m, err := io.ReadFull(r, b[len(b):min(int(n), cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			*bp = b
			putBuf(bp)
			return nil, err
		}
	}
	*bp = b
	return bp, nil
}

// putBuf returns a buffer to its pool: a mapping to bigBufs, a heap buffer to the largest
// class it can serve.
func putBuf(bp *[]byte) {
	if cap(*bp) > maxSmallBuf && putBig((*bp)[:cap(*bp)]) {
		return
	}
	*bp = (*bp)[:0]
	c := bits.Len(uint(cap(*bp))) - 1 - minBufShift // cap >= minBufSize<<c
	if c >= 0 {
		bufPools[min(c, bufClasses-1)].Put(bp)
	}
}

// getBig returns a mapping of at least n bytes: the hot free one if it fits, else the
// smallest free one that fits, else a new one sized n rounded up to a quarter of its power of
// two (so that a slightly larger frame next time fits too). Nil if mmap fails.
func getBig(n int) []byte {
	bigBufs.Lock()
	defer bigBufs.Unlock()
	best := -1
	for i, bb := range bigBufs.free {
		if len(bb.mem) < n {
			continue
		}
		if best < 0 || bb.hot || !bigBufs.free[best].hot && len(bb.mem) < len(bigBufs.free[best].mem) {
			best = i
		}
	}
	if best >= 0 {
		bb := bigBufs.free[best]
		bigBufs.free = slices.Delete(bigBufs.free, best, best+1)
		bb.hot = true
		return bb.mem
	}
	step := 1 << (bits.Len(uint(n)) - 3)
	size := (n + step - 1) / step * step
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	if bigBufs.all == nil {
		bigBufs.all = make(map[uintptr]*bigBuf)
	}
	bigBufs.all[uintptr(unsafe.Pointer(unsafe.SliceData(mem)))] = &bigBuf{mem: mem, hot: true}
	return mem
}

// putBig takes back a mapping from getBig (false if b is not one): it becomes the hot free
// mapping, and the previous hot one gives its pages back.
func putBig(b []byte) bool {
	bigBufs.Lock()
	defer bigBufs.Unlock()
	bb := bigBufs.all[uintptr(unsafe.Pointer(unsafe.SliceData(b)))]
	if bb == nil {
		return false
	}
	for _, f := range bigBufs.free {
		if f.hot {
			f.release()
		}
	}
	bigBufs.free = append(bigBufs.free, bb)
	if bigBufs.idle == nil {
		bigBufs.idle = time.AfterFunc(bigBufIdle, releaseIdleBigBufs)
	} else {
		bigBufs.idle.Reset(bigBufIdle)
	}
	return true
}

// release gives the mapping's pages back to the OS; it stays mapped (reading zeros).
func (bb *bigBuf) release() {
	if err := unix.Madvise(bb.mem, unix.MADV_DONTNEED); err == nil {
		bb.hot = false
	}
}

// releaseIdleBigBufs runs bigBufIdle after the last big frame was answered.
func releaseIdleBigBufs() {
	bigBufs.Lock()
	defer bigBufs.Unlock()
	for _, f := range bigBufs.free {
		if f.hot {
			f.release()
		}
	}
}

// parseHeader decodes the fixed part of the request header (v1) and returns the rest.
func parseHeader(b []byte) (header, []byte, error) {
	if len(b) < minFrame {
		return header{}, nil, errShortHeader
	}
	h := header{
		key:           int16(binary.BigEndian.Uint16(b)),
		version:       int16(binary.BigEndian.Uint16(b[2:])),
		correlationID: int32(binary.BigEndian.Uint32(b[4:])),
	}
	l := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if l > 0 {
		if int(l) > len(b) {
			return header{}, nil, errShortHeader
		}
		h.clientID = string(b[:l])
		b = b[l:]
	}
	return h, b, nil
}

// skipTags skips a flexible header's tagged fields.
func skipTags(b []byte) ([]byte, error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	for i := uint64(0); i < n; i++ {
		if _, b, err = uvarint(b); err != nil { // tag
			return nil, err
		}
		var sz uint64
		if sz, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if sz > uint64(len(b)) {
			return nil, errBadTagBuffer
		}
		b = b[sz:]
	}
	return b, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<31 {
		return 0, nil, errBadTagBuffer
	}
	return v, b[n:], nil
}
