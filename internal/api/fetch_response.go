package api

import (
	"encoding/binary"

	"github.com/gregor-project/gregor/internal/storage"
)

// The Fetch response is the one body Gregor encodes itself, so that record bytes can be sent
// from the segment files with sendfile instead of being copied into it. Layout per version
// (flexible from v12: compact arrays/strings/bytes as uvarint length+1, tagged fields):
//
//	throttle_ms int32 (v1+) | error_code int16 (v7+) | session_id int32 (v7+)
//	topics [ topic string (v0-12) | topic_id uuid (v13+)
//	         partitions [ partition int32 | error_code int16 | high_watermark int64
//	                      | last_stable_offset int64 (v4+) | log_start_offset int64 (v5+)
//	                      | aborted_transactions nullable [producer_id int64, first_offset int64] (v4+)
//	                      | preferred_read_replica int32 (v11+) | records nullable bytes
//	                      | tags: 0 = diverging_epoch {epoch int32, end_offset int64, tags} ]
//	         | tags ]
//	| tags

// fetchPartition is one partition's answer.
type fetchPartition struct {
	partition int32
	errCode   int16
	hw        int64
	lso       int64
	logStart  int64
	end       int64  // read up to here (a consumer's high watermark, a follower's log end)
	records   []byte // heap records (down-converted, or read without an OS file)
	file      Part   // records sent from a file (File != nil)
	// aborted: the aborted transactions overlapping a read_committed read (v4+); nil: none.
	aborted []storage.AbortedTxn
	// preferred: the replica the leader directs the consumer to read from instead (v11+,
	// KIP-392), no records; -1: none.
	preferred int32
	// leads, leaderEpoch: the role a consumer's part was read in (a parked fetch re-reads when
	// it changes).
	leads       bool
	leaderEpoch int32
	// diverging: the follower's log parts from the leader's at divergingEpoch, which ends at
	// divergingEnd on the leader (v12+, KIP-320); no records.
	diverging      bool
	divergingEpoch int32
	divergingEnd   int64
	// omit: an incremental session answer leaves the partition out (nothing new).
	omit bool
}

type fetchTopic struct {
	name  string
	id    [16]byte
	parts []fetchPartition
}

// fetchEncoder builds the body as bytes with file ranges spliced in. Its buffers are reused
// by the next fetch (reset), so encoding allocates nothing in the steady state.
type fetchEncoder struct {
	version int16
	flex    bool
	b       []byte
	cuts    []cut  // file parts inserted at byte positions of b
	parts   []Part // the answer: byte parts of b and file parts, in order
}

type cut struct {
	at   int
	file Part
}

// reset forgets the last answer, keeping the buffers.
func (e *fetchEncoder) reset() {
	e.b = e.b[:0]
	clear(e.cuts)
	e.cuts = e.cuts[:0]
	clear(e.parts)
	e.parts = e.parts[:0]
}

// Per-partition and per-topic bytes of the encoding outside records, at most (the largest
// version's fields, non-flexible lengths): partition, error, hw, lso, log start, aborted
// transactions, preferred replica, records length, tags.
const (
	fetchPartitionOverhead = 4 + 2 + 8 + 8 + 8 + 4 + 4 + 5 + 1 + 15
	fetchTopicOverhead     = 16 + 5 + 5 + 1 // id or name length, array length, tags
	fetchResponseOverhead  = 4 + 2 + 4 + 5 + 1
	abortedTxnBytes        = 8 + 8 + 1 // producer id, first offset, tags
)

// sizeHint bounds the encoded body's byte parts, so the buffer is allocated once.
func sizeHint(topics []fetchTopic) int {
	n := fetchResponseOverhead
	for ti := range topics {
		t := &topics[ti]
		n += fetchTopicOverhead + len(t.name) + len(t.parts)*fetchPartitionOverhead
		for pi := range t.parts {
			n += len(t.parts[pi].records) + len(t.parts[pi].aborted)*abortedTxnBytes
		}
	}
	return n
}

func (e *fetchEncoder) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *fetchEncoder) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *fetchEncoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *fetchEncoder) uv(v int)    { e.b = binary.AppendUvarint(e.b, uint64(v)) }
func (e *fetchEncoder) tags()       { e.b = append(e.b, 0) }

func (e *fetchEncoder) arrayLen(n int) {
	if e.flex {
		e.uv(n + 1)
	} else {
		e.i32(int32(n))
	}
}

func (e *fetchEncoder) nullArray() {
	if e.flex {
		e.uv(0)
	} else {
		e.i32(-1)
	}
}

func (e *fetchEncoder) str(s string) {
	if e.flex {
		e.uv(len(s) + 1)
	} else {
		e.i16(int16(len(s)))
	}
	e.b = append(e.b, s...)
}

func (e *fetchEncoder) bytesLen(n int) {
	if e.flex {
		e.uv(n + 1)
	} else {
		e.i32(int32(n))
	}
}

// kept counts the partitions of t an answer includes.
func kept(t *fetchTopic) int {
	n := 0
	for pi := range t.parts {
		if !t.parts[pi].omit {
			n++
		}
	}
	return n
}

// encode returns the body parts of a Fetch response; they are valid until reset. With
// pruned, partitions marked omit are left out, and topics left with none.
func (e *fetchEncoder) encode(version int16, errCode int16, sessionID int32, topics []fetchTopic, pruned bool) []Part {
	e.version, e.flex = version, version >= 12
	if hint := sizeHint(topics); cap(e.b) < hint {
		e.b = make([]byte, 0, hint)
	}
	e.b = e.b[:0]
	if version >= 1 {
		e.i32(0) // throttle
	}
	if version >= 7 {
		e.i16(errCode)
		e.i32(sessionID)
	}
	if !pruned {
		e.arrayLen(len(topics))
	} else {
		n := 0
		for ti := range topics {
			if kept(&topics[ti]) > 0 {
				n++
			}
		}
		e.arrayLen(n)
	}
	for ti := range topics {
		t := &topics[ti]
		n := len(t.parts)
		if pruned {
			if n = kept(t); n == 0 {
				continue
			}
		}
		if version >= 13 {
			e.b = append(e.b, t.id[:]...)
		} else {
			e.str(t.name)
		}
		e.arrayLen(n)
		for pi := range t.parts {
			if p := &t.parts[pi]; !p.omit {
				e.partition(p)
			}
		}
		if e.flex {
			e.tags()
		}
	}
	if e.flex {
		e.tags()
	}
	return e.split()
}

// partition encodes one partition of the answer at e.version. Its records are either copied
// in or, when they are a file range, marked by a cut for split.
func (e *fetchEncoder) partition(p *fetchPartition) {
	version := e.version
	e.i32(p.partition)
	e.i16(p.errCode)
	e.i64(p.hw)
	if version >= 4 {
		e.i64(p.lso)
	}
	if version >= 5 {
		e.i64(p.logStart)
	}
	if version >= 4 {
		if len(p.aborted) == 0 {
			e.nullArray()
		} else {
			e.arrayLen(len(p.aborted))
			for _, a := range p.aborted {
				e.i64(a.ProducerID)
				e.i64(a.FirstOffset)
				if e.flex {
					e.tags()
				}
			}
		}
	}
	if version >= 11 {
		e.i32(p.preferred)
	}
	if p.file.File != nil {
		e.bytesLen(p.file.N)
		e.cuts = append(e.cuts, cut{at: len(e.b), file: p.file})
	} else {
		e.bytesLen(len(p.records))
		e.b = append(e.b, p.records...)
	}
	if e.flex {
		if p.diverging {
			// One tagged field: tag 0, size 13, epoch, end offset, its own empty tags.
			e.uv(1)
			e.uv(0)
			e.uv(4 + 8 + 1)
			e.i32(p.divergingEpoch)
			e.i64(p.divergingEnd)
			e.tags()
		} else {
			e.tags()
		}
	}
}

// split cuts the encoded bytes at the file ranges: the body is the bytes before each cut,
// the cut's file range, and the bytes after the last.
func (e *fetchEncoder) split() []Part {
	parts := e.parts[:0]
	prev := 0
	for _, c := range e.cuts {
		if c.at > prev {
			parts = append(parts, Part{B: e.b[prev:c.at]})
		}
		parts = append(parts, c.file)
		prev = c.at
	}
	if prev < len(e.b) {
		parts = append(parts, Part{B: e.b[prev:]})
	}
	e.parts = parts
	return parts
}
