package batch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Streaming validation of compressed batches. A leader checks every record of a compressed
// batch before appending it, as Kafka's LogValidator does, but never holds the decompressed
// records: they are decompressed through a small buffer and walked field by field, keys,
// values and headers skipped unread (Kafka's skipKeyValueIterator). Nothing caps the
// decompressed size, as nothing caps it in Kafka; what bounds the work is what Kafka bounds:
// the batch must hold exactly recordCount records (the header's count, itself equal to
// lastOffsetDelta+1), each using exactly its declared length, and nothing may follow the last.
//
// A batch whose records decompress to at most inMemoryLimit is checked in a pooled buffer
// instead (the common case, and the faster one); only a larger one is walked as a stream.
// Memory per validation: that buffer, or the read buffer (streamBufferSize), and the codec's
// state: the window for gzip (32 KiB), the block for lz4 (at most 4 MiB) and one xerial
// block for snappy (32 KiB of output; a single raw block at most maxSnappyRatio times its
// input). A zstd frame's window is what its producer chose: decoders kept in a pool accept
// windows up to pooledZstdWindow (every client's default level fits), and a frame with a
// larger window, up to zstd's own default limit (maxZstdWindow, 128 MiB, which Kafka's zstd
// library applies too), is read by a decoder of its own that is dropped afterwards.

const (
	streamBufferSize = 16 << 10
	pooledZstdWindow = 8 << 20
	maxZstdWindow    = 1 << 27
)

// visitFunc is given each record's timestamp and offset deltas in order; returning false
// ends the walk there.
type visitFunc func(timestampDelta int64, offsetDelta int32) (more bool)

// EachRecord calls visit with the timestamp and offset deltas of each record of the v2 batch
// b (len(b) == its Size()), in order, until visit returns false. The records are decoded as
// a stream, keys and values skipped, so no decompressed size is refused and memory stays
// bounded. Each record's structure is checked as Records checks it (offset deltas may have
// gaps: compaction leaves them); visit may have been called for the records before an error.
// A visit that ends the walk early skips the checks of the rest.
func EachRecord(b []byte, visit func(timestampDelta int64, offsetDelta int32) (more bool)) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Size() != len(b) {
		return fmt.Errorf("%w: batch length %d declares %d bytes, have %d", ErrCorrupt, h.BatchLength, h.Size(), len(b))
	}
	if h.RecordCount < 0 {
		return fmt.Errorf("%w: record count %d", ErrInvalidRecord, h.RecordCount)
	}
	return walkRecordsSection(h.Codec(), b[HeaderSize:], h.RecordCount, visit)
}

// inMemoryLimit is the decompressed size up to which a compressed batch is checked in a
// pooled buffer (walkRecords over a slice: half the CPU of the stream walk); a larger one
// is decompressed again as a stream.
const inMemoryLimit = maxPooledScratch

// walkCompressed checks that data, the records section of a batch compressed with codec,
// decompresses to exactly count well-formed records with offset deltas 0..count-1.
// Decompression failures are ErrCorrupt, record structure errors ErrInvalidRecord.
func walkCompressed(codec Codec, data []byte, count int32) error {
	s := getScratch(0)
	raw, err := decompressInto(s.b, codec, data, inMemoryLimit)
	if err == nil {
		err = walkRecords(raw, count)
		if cap(raw) <= maxPooledScratch {
			s.b = raw[:0]
		}
		putScratch(s)
		return err
	}
	putScratch(s)
	if !errors.Is(err, errTooBig) {
		return fmt.Errorf("%w: %v: %w", ErrCorrupt, codecName(codec), err)
	}
	return walkRecordsSection(codec, data, count, nil)
}

// walkRecordsSection walks the count records of data, a records section of codec, calling
// visit for each; with visit nil it checks that the offset deltas are 0..count-1.
func walkRecordsSection(codec Codec, data []byte, count int32, visit visitFunc) error {
	return withRecords(codec, data, func(r io.Reader) error { return walkStream(codec, r, count, visit) })
}

// withRecords runs f with a reader of data, a records section of codec, decompressed as a
// stream. A zstd frame whose window is larger than the pooled decoders take is read again
// by a decoder of its own (up to maxZstdWindow), so f may run twice.
func withRecords(codec Codec, data []byte, f func(io.Reader) error) error {
	switch codec {
	case CodecNone:
		return f(bytes.NewReader(data))
	case CodecGzip:
		r := gzipReaders.Get().(*gzipReader)
		defer gzipReaders.Put(r)
		r.in.Reset(data)
		defer r.in.Reset(nil)
		if err := r.zr.Reset(&r.in); err != nil {
			return fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
		return f(&r.zr)
	case CodecSnappy:
		return f(newSnappyReader(data))
	case CodecLZ4:
		r := lz4Readers.Get().(*lz4Reader)
		defer lz4Readers.Put(r)
		r.in.Reset(data)
		r.zr.Reset(&r.in)
		defer func() {
			r.in.Reset(nil)
			r.zr.Reset(nil)
		}()
		return f(r.zr)
	case CodecZstd:
		d := zstdStreams.Get().(*zstd.Decoder)
		err := withZstd(d, data, f)
		zstdStreams.Put(d)
		if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			// A window larger than the pooled decoders take: a decoder of its own, up to
			// zstd's default limit, whose memory goes when it does.
			big, nerr := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
			if nerr != nil {
				return nerr
			}
			err = withZstd(big, data, f)
			big.Close()
		}
		return err
	}
	return fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
}

// withZstd runs f with data decoded by the streaming decoder d, leaving d holding no
// reference to data.
func withZstd(d *zstd.Decoder, data []byte, f func(io.Reader) error) error {
	if err := d.Reset(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
	}
	err := f(d)
	if rerr := d.Reset(nil); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// codecReader keeps the first error of a decompressing reader other than io.EOF, so that a
// walk cut short tells corrupt compressed data (ErrCorrupt) from records that end too soon
// (ErrInvalidRecord).
type codecReader struct {
	r   io.Reader
	err error
}

func (c *codecReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// recordWalker reads records from a stream. left is what the current record's declared
// length leaves for its remaining fields.
type recordWalker struct {
	codec Codec
	cr    codecReader
	br    *bufio.Reader
	left  int64
}

var bufReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamBufferSize) }}

// walkStream checks that r yields exactly count records and then ends, calling visit for
// each record (with visit nil, checking that the offset deltas are 0..count-1).
func walkStream(codec Codec, r io.Reader, count int32, visit visitFunc) error {
	w := recordWalker{codec: codec, cr: codecReader{r: r}}
	w.br = bufReaders.Get().(*bufio.Reader)
	w.br.Reset(&w.cr)
	defer func() {
		w.br.Reset(nil)
		bufReaders.Put(w.br)
	}()
	for n := int32(0); n < count; n++ {
		ts, delta, err := w.record()
		if err != nil {
			return w.fail(fmt.Errorf("record %d of %d: %w", n, count, err))
		}
		if visit == nil && delta != n {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalidRecord, n, delta)
		}
		if visit != nil && !visit(ts, delta) {
			return nil
		}
	}
	if _, err := w.br.ReadByte(); err != io.EOF {
		if err == nil {
			return fmt.Errorf("%w: bytes left after %d records", ErrInvalidRecord, count)
		}
		return w.fail(err)
	}
	return nil
}

// fail classifies a walk's error: the codec's own failure is ErrCorrupt.
func (w *recordWalker) fail(err error) error {
	if w.cr.err != nil {
		return fmt.Errorf("%w: %v: %w", ErrCorrupt, codecName(w.codec), w.cr.err)
	}
	return err
}

// record reads the next record, checking its structure as readRecord does, and returns its
// timestamp and offset deltas.
func (w *recordWalker) record() (ts int64, delta int32, err error) {
	w.left = 5 // the length varint itself
	length, err := w.varint32()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("%w: the records end early", ErrInvalidRecord)
		}
		return 0, 0, fmt.Errorf("%w: bad record length varint", ErrInvalidRecord)
	}
	if length <= 0 {
		return 0, 0, fmt.Errorf("%w: record length %d", ErrInvalidRecord, length)
	}
	w.left = int64(length)
	if _, err := w.byte(); err != nil { // attributes
		return 0, 0, err
	}
	if ts, err = w.varint64(); err != nil {
		return 0, 0, fmt.Errorf("%w: bad timestamp delta: %w", ErrInvalidRecord, err)
	}
	if delta, err = w.varint32(); err != nil {
		return 0, 0, fmt.Errorf("%w: bad offset delta: %w", ErrInvalidRecord, err)
	}
	return ts, delta, w.rest(length)
}

// rest reads the key, value and headers of the current record of declared length.
func (w *recordWalker) rest(length int32) error {
	if err := w.skipBytes(-1); err != nil { // key
		return fmt.Errorf("%w: bad key: %w", ErrInvalidRecord, err)
	}
	if err := w.skipBytes(-1); err != nil { // value
		return fmt.Errorf("%w: bad value: %w", ErrInvalidRecord, err)
	}
	headers, err := w.varint32()
	if err != nil || headers < 0 {
		return fmt.Errorf("%w: bad header count", ErrInvalidRecord)
	}
	for h := int32(0); h < headers; h++ {
		if err := w.skipBytes(0); err != nil { // a header key is never null
			return fmt.Errorf("%w: bad header key: %w", ErrInvalidRecord, err)
		}
		if err := w.skipBytes(-1); err != nil {
			return fmt.Errorf("%w: bad header value: %w", ErrInvalidRecord, err)
		}
	}
	if w.left != 0 {
		return fmt.Errorf("%w: record declares %d bytes, fields use %d", ErrInvalidRecord, length, int64(length)-w.left)
	}
	return nil
}

var errPastRecord = errors.New("field past the record's declared length")

// byte reads one byte of the current record.
func (w *recordWalker) byte() (byte, error) {
	if w.left <= 0 {
		return 0, fmt.Errorf("%w: %w", ErrInvalidRecord, errPastRecord)
	}
	c, err := w.br.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, fmt.Errorf("%w: the records end inside a record: %w", ErrInvalidRecord, io.EOF)
		}
		return 0, err
	}
	w.left--
	return c, nil
}

// varint32 reads a zig-zag varint of at most 5 bytes, with varint32's rules.
func (w *recordWalker) varint32() (int32, error) {
	var u uint32
	for s := uint(0); s < 35; s += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		if s == 28 && c > 0x0f {
			return 0, errors.New("varint overflows 32 bits")
		}
		u |= uint32(c&0x7f) << s
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), nil
		}
	}
	return 0, errors.New("varint overflows 32 bits")
}

// varint64 reads a zig-zag varint of at most 10 bytes, with varint64's rules.
func (w *recordWalker) varint64() (int64, error) {
	var u uint64
	for s := uint(0); s < 70; s += 7 {
		c, err := w.byte()
		if err != nil {
			return 0, err
		}
		if s == 63 && c > 0x01 {
			return 0, errors.New("varint overflows 64 bits")
		}
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("varint overflows 64 bits")
}

// skipBytes reads a varint length (at least minLen: -1 allows null) and skips that many
// bytes of the current record.
func (w *recordWalker) skipBytes(minLen int32) error {
	n, err := w.varint32()
	if err != nil {
		return err
	}
	if n < minLen {
		return fmt.Errorf("length %d", n)
	}
	if n <= 0 {
		return nil
	}
	if int64(n) > w.left {
		return fmt.Errorf("length %d with %d bytes of the record left", n, w.left)
	}
	if _, err := w.br.Discard(int(n)); err != nil {
		if err == io.EOF {
			return fmt.Errorf("the records end inside a record: %w", io.EOF)
		}
		return err
	}
	w.left -= int64(n)
	return nil
}

// snappyReader decodes snappy data a block at a time: xerial framing block by block (each at
// most maxSnappyRatio times its compressed size), a single raw block whole.
type snappyReader struct {
	data []byte
	p    int    // next xerial block; -1 for a raw block not yet decoded, len(data) at the end
	out  []byte // decoded, not yet read
	buf  []byte
}

func newSnappyReader(data []byte) *snappyReader {
	r := &snappyReader{data: data, p: -1}
	if len(data) >= len(xerialMagic) && bytes.Equal(data[:len(xerialMagic)], xerialMagic) {
		r.p = xerialHeaderSize
	}
	return r
}

func (r *snappyReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// next decodes the next block into out, or returns io.EOF after the last.
func (r *snappyReader) next() error {
	var block []byte
	switch {
	case r.p == -1:
		block, r.p = r.data, len(r.data)
	case r.p > len(r.data) || (r.p == xerialHeaderSize && len(r.data) < xerialHeaderSize):
		return fmt.Errorf("xerial header of %d bytes", len(r.data))
	case r.p == len(r.data):
		return io.EOF
	default:
		b, next, err := xerialBlock(r.data, r.p)
		if err != nil {
			return err
		}
		block, r.p = b, next
	}
	n, err := snappyLen(block)
	if err != nil {
		return err
	}
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	out, err := decodeSnappyBlock(r.buf[:n], block)
	if err != nil {
		return err
	}
	r.out = out
	return nil
}

// zstdStreams are streaming zstd decoders. With concurrency 1 a decoder decodes in the
// caller's goroutine and starts none.
var zstdStreams = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(pooledZstdWindow))
	if err != nil {
		panic(err)
	}
	return d
}}
