package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The codecs, as Kafka clients write them:
//
//	gzip    RFC 1952 stream (concatenated members are read as one)
//	snappy  xerial framing as the Java client writes it, or one raw snappy block (see snappy.go)
//	lz4     LZ4 frame format, independent blocks (Kafka's KafkaLZ4BlockOutputStream, magic >= 1)
//	zstd    zstd frames
//
// Encoders and decoders are pooled: the broker recompresses under load, and building a gzip,
// lz4 or zstd state costs far more than the data of a typical batch.

// MaxDecompressedSize caps what one Decompress may produce: a larger output fails with
// ErrCorrupt, so a small compressed bomb cannot exhaust memory. It bounds only what is
// decompressed into memory; a produced batch is validated and recompressed as a stream
// (ValidateRecords, Recompress), with no cap on its decompressed size.
const MaxDecompressedSize = 64 << 20

// Compress returns raw compressed with codec in a new slice. For CodecNone it returns raw
// itself.
func Compress(codec Codec, raw []byte) ([]byte, error) {
	if codec == CodecNone {
		return raw, nil
	}
	return appendCompressed(make([]byte, 0, len(raw)/2+64), codec, raw)
}

// Decompress returns data decompressed with codec in a new slice (for CodecNone, data
// itself). Malformed input, or output beyond MaxDecompressedSize, fails with ErrCorrupt; a
// codec outside 0..4 with ErrUnknownCodec.
func Decompress(codec Codec, data []byte) ([]byte, error) {
	return decompress(codec, data, MaxDecompressedSize)
}

// Recompress returns a new batch with the same header fields, offsets and records as the v2
// batch b, compressed with codec (CodecNone: uncompressed), and a fresh CRC. b's CRC is
// checked first so that recompression never launders a corrupt batch (ErrBadCRC). When b
// already uses codec the result is a copy of b. The records go from the old codec to the new
// as a stream (a record's bytes are the same whatever compresses them), so no decompressed
// size is refused and only the new batch is held whole; b's records are not checked here
// (ValidateRecords first).
func Recompress(b []byte, codec Codec) ([]byte, error) {
	h, err := CheckCRC(b)
	if err != nil {
		return nil, err
	}
	if codec < CodecNone || codec > CodecZstd {
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	if h.Codec() == codec {
		return bytes.Clone(b), nil
	}
	var out []byte
	err = withRecords(h.Codec(), b[HeaderSize:], func(r io.Reader) error {
		dst := make([]byte, HeaderSize, HeaderSize+len(b))
		copy(dst, b[:HeaderSize])
		var err error
		out, err = appendCompressedFrom(dst, codec, &codecReader{r: r})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out)-LogOverhead > math.MaxInt32 {
		return nil, fmt.Errorf("%w: batch of %d bytes", ErrInvalidRecord, len(out))
	}
	be := binary.BigEndian
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LogOverhead))
	be.PutUint16(out[offAttributes:], uint16(h.Attributes&^AttrCodecMask|int16(codec)))
	putCRC(out)
	return out, nil
}

// appendCompressedFrom appends what r yields, compressed with codec (none: as it is), to
// dst, reading and compressing it a buffer at a time. An error reading r is ErrCorrupt.
func appendCompressedFrom(dst []byte, codec Codec, r *codecReader) ([]byte, error) {
	aw := &appendWriter{b: dst}
	var zw io.WriteCloser
	switch codec {
	case CodecNone:
	case CodecGzip:
		w := gzipWriters.Get().(*gzipWriter)
		defer gzipWriters.Put(w)
		w.zw.Reset(aw)
		defer w.zw.Reset(nil)
		zw = w.zw
	case CodecSnappy:
		zw = &xerialWriter{out: aw}
	case CodecLZ4:
		w := lz4Writers.Get().(*lz4Writer)
		defer lz4Writers.Put(w)
		w.zw.Reset(aw)
		defer w.zw.Reset(nil)
		zw = w.zw
	case CodecZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		e.Reset(aw)
		defer e.Reset(io.Discard) // hold no reference to aw
		zw = e
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	var w io.Writer = aw
	if zw != nil {
		w = zw
	}
	buf := bufPool.Get().(*[]byte)
	_, err := io.CopyBuffer(w, struct{ io.Reader }{r}, *buf)
	bufPool.Put(buf)
	if zw != nil {
		if cerr := zw.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if r.err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorrupt, r.err)
		}
		return nil, err
	}
	return aw.b, nil
}

// bufPool holds the copy buffers of appendCompressedFrom.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, streamBufferSize)
	return &b
}}

// appendCompressed appends raw compressed with codec (not none) to dst.
func appendCompressed(dst []byte, codec Codec, raw []byte) ([]byte, error) {
	switch codec {
	case CodecGzip:
		w := gzipWriters.Get().(*gzipWriter)
		defer gzipWriters.Put(w)
		w.zw.Reset(&w.out)
		return w.out.run(dst, w.zw, raw)
	case CodecSnappy:
		return appendXerial(dst, raw), nil
	case CodecLZ4:
		w := lz4Writers.Get().(*lz4Writer)
		defer lz4Writers.Put(w)
		w.zw.Reset(&w.out)
		return w.out.run(dst, w.zw, raw)
	case CodecZstd:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(raw, dst), nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
}

// decompress decompresses data with codec, failing with ErrCorrupt past limit bytes.
func decompress(codec Codec, data []byte, limit int) ([]byte, error) {
	if codec < CodecNone || codec > CodecZstd {
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	if codec == CodecNone {
		if len(data) > limit {
			return nil, fmt.Errorf("%w: %d bytes exceed the limit of %d", ErrCorrupt, len(data), limit)
		}
		return data, nil
	}
	out, err := decompressInto(nil, codec, data, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %v", ErrCorrupt, codecName(codec), err)
	}
	return out, nil
}

// decompressInto decompresses data (codec not none) into dst[:0] (grown when it is too
// small), failing with errTooBig past limit bytes, or with the codec's own error.
func decompressInto(dst []byte, codec Codec, data []byte, limit int) ([]byte, error) {
	var out []byte
	var err error
	switch codec {
	case CodecGzip:
		r := gzipReaders.Get().(*gzipReader)
		r.in.Reset(data)
		if err = r.zr.Reset(&r.in); err == nil {
			out, err = readAllLimit(dst, &r.zr, len(data), limit)
		}
		r.in.Reset(nil)
		gzipReaders.Put(r)
	case CodecSnappy:
		out, err = decodeSnappy(dst, data, limit)
	case CodecLZ4:
		r := lz4Readers.Get().(*lz4Reader)
		r.in.Reset(data)
		r.zr.Reset(&r.in)
		out, err = readAllLimit(dst, r.zr, len(data), limit)
		r.in.Reset(nil)
		r.zr.Reset(nil)
		lz4Readers.Put(r)
	case CodecZstd:
		pool := &zstdDecoders
		if limit <= inMemoryLimit {
			pool = &zstdSmallDecoders
		}
		d := pool.Get().(*zstd.Decoder)
		out, err = d.DecodeAll(data, dst[:0])
		pool.Put(d)
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
			err = errTooBig
		case err == nil && len(out) > limit:
			err = errTooBig
		}
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	return out, err
}

var errTooBig = errors.New("decompressed size exceeds the limit")

// readAllLimit reads r to EOF into dst[:0], failing with errTooBig past limit bytes. The
// buffer grows with the data actually produced, starting (when dst has no room) from a guess
// based on the compressed size.
func readAllLimit(dst []byte, r io.Reader, compressed, limit int) ([]byte, error) {
	buf := dst[:0]
	if cap(buf) == 0 {
		buf = make([]byte, 0, min(max(4*compressed, 512), limit+1))
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, errTooBig
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func codecName(c Codec) string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// appendWriter is an io.Writer appending to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// run appends raw compressed by zw, which writes to w, to dst. w keeps no reference to dst
// afterwards, so the pooled compressor does not pin caller memory.
func (w *appendWriter) run(dst []byte, zw io.WriteCloser, raw []byte) ([]byte, error) {
	w.b = dst
	_, err := zw.Write(raw)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	out := w.b
	w.b = nil
	if err != nil {
		return nil, err
	}
	return out, nil
}

type gzipWriter struct {
	zw  *gzip.Writer
	out appendWriter
}

type gzipReader struct {
	zr gzip.Reader
	in bytes.Reader
}

type lz4Writer struct {
	zw  *lz4.Writer
	out appendWriter
}

type lz4Reader struct {
	zr *lz4.Reader
	in bytes.Reader
}

// Pools. Items hold no reference to caller data between uses.
var (
	gzipWriters = sync.Pool{New: func() any {
		zw, err := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
		if err != nil {
			panic(err) // DefaultCompression is a valid level
		}
		return &gzipWriter{zw: zw}
	}}
	gzipReaders = sync.Pool{New: func() any { return new(gzipReader) }}
	lz4Writers  = sync.Pool{New: func() any {
		zw := lz4.NewWriter(nil)
		// Kafka's own writer uses 64 KiB blocks; they keep the pooled state small.
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1)); err != nil {
			panic(err)
		}
		return &lz4Writer{zw: zw}
	}}
	lz4Readers = sync.Pool{New: func() any {
		return &lz4Reader{zr: lz4.NewReader(nil)}
	}}
	zstdEncoders = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err)
		}
		return e
	}}
	// Decoders with concurrency 1 used only through DecodeAll start no goroutines, so a pooled
	// decoder dropped by the GC leaks nothing.
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxDecompressedSize))
		if err != nil {
			panic(err)
		}
		return d
	}}
	// zstdSmallDecoders decode into memory at most inMemoryLimit bytes (ValidateRecords' first
	// try): past that, or for a frame with a larger window, they fail at once.
	zstdSmallDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(inMemoryLimit))
		if err != nil {
			panic(err)
		}
		return d
	}}
	scratches = sync.Pool{New: func() any { return new(scratch) }}
)

// scratch is a pooled buffer for encoding records before compression.
type scratch struct{ b []byte }

// maxPooledScratch keeps rare huge batches from pinning memory in the pool.
const maxPooledScratch = 4 << 20

func getScratch(n int) *scratch {
	s := scratches.Get().(*scratch)
	if cap(s.b) < n {
		s.b = make([]byte, 0, n)
	}
	return s
}

func putScratch(s *scratch) {
	if cap(s.b) <= maxPooledScratch {
		scratches.Put(s)
	}
}
