package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
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

// bufPool recycles request buffers. Produce record bytes alias the buffer; they are written
// to the log before the handler returns, so the buffer is free once the reply is sent.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// readFrame reads one frame into a pooled buffer. The caller returns it with putBuf.
func readFrame(r io.Reader, max int32) (*[]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < minFrame || n > max {
		return nil, fmt.Errorf("%w: %d bytes (socket.request.max.bytes %d)", errFrameSize, n, max)
	}
	bp := bufPool.Get().(*[]byte)
	if cap(*bp) < int(n) {
		*bp = make([]byte, n)
	}
	*bp = (*bp)[:n]
	if _, err := io.ReadFull(r, *bp); err != nil {
		putBuf(bp)
		return nil, err
	}
	return bp, nil
}

// putBuf returns a buffer to the pool; very large buffers are dropped so one huge produce does
// not pin memory forever.
func putBuf(bp *[]byte) {
	if cap(*bp) > 8<<20 {
		return
	}
	bufPool.Put(bp)
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
