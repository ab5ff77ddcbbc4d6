package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func frameOf(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// Frames of every size read back exactly, and a buffer returned to the pool is handed to the
// next frame of its size class instead of a new one.
func TestReadFramePooledBySize(t *testing.T) {
	for _, n := range []int{minFrame, 100, minBufSize - 1, minBufSize, minBufSize + 1, 300 << 10, 3 << 20} {
		body := bytes.Repeat([]byte{byte(n)}, n)
		bp, err := readFrame(bytes.NewReader(frameOf(body)), 64<<20)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(*bp, body) {
			t.Fatalf("%d bytes: frame differs", n)
		}
		if n <= maxSmallBuf && cap(*bp) < minBufSize<<bufClass(n) {
			t.Fatalf("%d bytes: buffer of %d cannot serve class %d", n, cap(*bp), bufClass(n))
		}
		first := &(*bp)[:1][0]
		putBuf(bp)
		bp2, err := readFrame(bytes.NewReader(frameOf(body)), 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(*bp2, body) {
			t.Fatalf("%d bytes: second frame differs", n)
		}
		// A sync.Pool may drop a small buffer at any time (a GC), so its reuse is likely, not
		// certain; the big-buffer free list always hands it back.
		reused := first == &(*bp2)[:1][0]
		if n > maxSmallBuf && !reused {
			t.Fatalf("%d bytes: the big buffer was not reused", n)
		}
		t.Logf("%d bytes: cap %d, reused %v", n, cap(*bp2), reused)
		putBuf(bp2)
	}
}

// A peer that declares a large frame and sends only part of it costs memory about the size of
// what it sent, not of what it declared: a small frame's buffer grows as bytes arrive, and a
// big frame's mapping is only backed where bytes were written.
func TestReadFrameGrowsWithBytesReceived(t *testing.T) {
	// The heap case is about a fresh buffer: an earlier test of this process (a broker that
	// read a 512 KiB produce, or this test's previous run under -count) may have pooled one
	// big enough for the whole declared frame, which readFrame rightly reuses.
	for c := range bufPools {
		for bufPools[c].Get() != nil {
		}
	}
	sent := 100 << 10
	partial := func(declared int) *capture {
		in := append(binary.BigEndian.AppendUint32(nil, uint32(declared)), make([]byte, sent)...)
		for i := range in[4:] {
			in[4+i] = 1 // a mapping's untouched pages are zero: make sure sent ones are written
		}
		r := &capture{r: bytes.NewReader(in)}
		if _, err := readFrame(r, 100<<20); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err %v", err)
		}
		return r
	}
	if r := partial(900 << 10); r.maxBuf > 4*sent { // heap buffer
		t.Fatalf("read into a buffer of %d bytes for %d bytes sent", r.maxBuf, sent)
	}
	releaseIdleBigBufs()
	partial(64 << 20) // mapping
	bigBufs.Lock()
	defer bigBufs.Unlock()
	for _, bb := range bigBufs.free {
		if !bb.hot {
			continue
		}
		vec := make([]byte, (len(bb.mem)+os.Getpagesize()-1)/os.Getpagesize())
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&bb.mem[0])), uintptr(len(bb.mem)), uintptr(unsafe.Pointer(&vec[0])))
		if errno != 0 {
			t.Skip("mincore:", errno)
		}
		resident := 0
		for _, v := range vec {
			resident += int(v & 1)
		}
		if resident*os.Getpagesize() > 4*sent {
			t.Fatalf("%d bytes of the mapping resident for %d bytes sent", resident*os.Getpagesize(), sent)
		}
		return
	}
	t.Fatal("no hot mapping after a big frame")
}

// capture records the largest buffer a reader was asked to fill.
type capture struct {
	r      io.Reader
	maxBuf int
}

func (c *capture) Read(p []byte) (int, error) {
	c.maxBuf = max(c.maxBuf, cap(p))
	return c.r.Read(p)
}

// Big frames go to memory mappings: a returned one is handed to the next big frame that fits,
// a second one in use at the same time gets its own, and only the last one returned keeps
// its pages until the broker goes idle.
func TestBigBufsReusedAndReleased(t *testing.T) {
	a := getBig(3 << 20)
	b := getBig(3 << 20)
	if a == nil || b == nil || &a[0] == &b[0] {
		t.Fatal("two big frames in use at once share a mapping")
	}
	a[0], b[0] = 1, 2
	putBig(a)
	putBig(b)
	hot := func(m []byte) bool {
		bigBufs.Lock()
		defer bigBufs.Unlock()
		return bigBufs.all[uintptr(unsafe.Pointer(&m[0]))].hot
	}
	if hot(a) || !hot(b) {
		t.Fatalf("hot: a %v, b %v; want only the last returned", hot(a), hot(b))
	}
	if a[0] != 0 {
		t.Fatal("a released mapping still holds its bytes")
	}
	if c := getBig(2 << 20); &c[0] != &b[0] || c[0] != 2 {
		t.Fatal("the hot mapping was not reused first")
	} else {
		putBig(c)
	}
	releaseIdleBigBufs()
	if hot(b) || b[0] != 0 {
		t.Fatal("the idle release kept the pages")
	}
	if putBig(make([]byte, 2<<20)) {
		t.Fatal("a heap buffer was taken for a mapping")
	}
}
