package streams

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
)

// kvBytes is the byte core of a key-value store, in memory (memBytes) or on disk
// (pebbleKV): the typed store serializes into it, and a changelog record is applied to it
// as it is. Keys are ordered by their bytes. A core is used by one goroutine at a time.
type kvBytes interface {
	get(k []byte) ([]byte, bool, error)
	// set writes v under k; a nil v deletes k.
	set(k, v []byte) error
	// apply writes changelog records in order, as one batch (a nil value deletes).
	apply(recs []kvPair) error
	// scan calls f with every entry in key order until f returns false. f must not write.
	scan(f func(k, v []byte) bool) error
	count() (int, error)
}

type kvPair struct {
	k, v []byte
	ts   int64 // the changelog record's timestamp (-1 when unknown)
}

// stamp is value v with timestamp ts before it (8 bytes big endian), as Kafka's timestamped
// stores keep their values; nil stays nil (a deletion).
func stamp(ts int64, v []byte) []byte {
	if v == nil {
		return nil
	}
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v)), uint64(ts)), v...)
}

// unstamp is stamp's inverse; a value too short to hold a timestamp is returned whole at -1.
func unstamp(b []byte) (int64, []byte) {
	if len(b) < 8 {
		return -1, b
	}
	return int64(binary.BigEndian.Uint64(b)), b[8:]
}

// diskStore is a store kept on disk: it survives a restart, up to what flush made durable.
type diskStore interface {
	// flush makes every write so far durable (before a checkpoint names it).
	flush() error
	// close releases the store; writes not flushed may be lost.
	close() error
	// wipe deletes the store's files and opens it empty again.
	wipe() error
}

// persistent is a state store that may be on disk; disk is nil when it is in memory.
type persistent interface {
	disk() diskStore
}

// memBytes is the in-memory key-value core.
type memBytes struct{ data map[string][]byte }

func newMemBytes() *memBytes { return &memBytes{data: map[string][]byte{}} }

func (m *memBytes) get(k []byte) ([]byte, bool, error) {
	v, ok := m.data[string(k)]
	return v, ok, nil
}

func (m *memBytes) set(k, v []byte) error {
	if v == nil {
		delete(m.data, string(k))
		return nil
	}
	m.data[string(k)] = v
	return nil
}

func (m *memBytes) apply(recs []kvPair) error {
	for _, r := range recs {
		if err := m.set(r.k, r.v); err != nil {
			return err
		}
	}
	return nil
}

func (m *memBytes) scan(f func(k, v []byte) bool) error {
	keys := slices.SortedFunc(maps.Keys(m.data), func(a, b string) int {
		return bytes.Compare([]byte(a), []byte(b))
	})
	for _, k := range keys {
		if !f([]byte(k), m.data[k]) {
			return nil
		}
	}
	return nil
}

func (m *memBytes) count() (int, error) { return len(m.data), nil }
