package streams

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleDB is one persistent store's pebble database in its directory
// (<state.dir>/<application.id>/<task id>/<store>/).
//
// As Kafka Streams' RocksDB stores, it writes without a write-ahead log: the changelog is
// the log. A write is durable once flush has run; a crash loses what was written after the
// last flush, which the changelog tail past the checkpoint restores. Its memtable may
// grow to 16 MiB (Kafka Streams' RocksDB write buffer size; pebble's 4 MiB default flushed
// and compacted so often that word count ran at a third of the in-memory store's speed).
type pebbleDB struct {
	dir string
	log *slog.Logger
	db  *pebble.DB
}

func openPebble(dir string, log *slog.Logger) (*pebbleDB, error) {
	p := &pebbleDB{dir: dir, log: log}
	return p, p.open()
}

func (p *pebbleDB) open() error {
	db, err := pebble.Open(p.dir, &pebble.Options{
		DisableWAL:         true,
		MemTableSize:       16 << 20,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{p.log},
	})
	if err != nil {
		return fmt.Errorf("streams: open store %s: %w", p.dir, err)
	}
	p.db = db
	return nil
}

func (p *pebbleDB) flush() error {
	if err := p.db.Flush(); err != nil {
		return fmt.Errorf("streams: flush store %s: %w", p.dir, err)
	}
	return nil
}

func (p *pebbleDB) close() error {
	if p.db == nil {
		return nil
	}
	err := p.db.Close()
	p.db = nil
	if err != nil {
		return fmt.Errorf("streams: close store %s: %w", p.dir, err)
	}
	return nil
}

func (p *pebbleDB) wipe() error {
	if err := p.close(); err != nil {
		return err
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("streams: wipe store %s: %w", p.dir, err)
	}
	return p.open()
}

// get copies the value of k out of pebble.
func (p *pebbleDB) get(k []byte) ([]byte, bool, error) {
	v, closer, err := p.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte{}, v...)
	return out, true, closer.Close()
}

// scanRange calls f with the entries lo <= key < hi (nil: unbounded) in key order until f
// returns false; k and v are valid only during the call.
func (p *pebbleDB) scanRange(lo, hi []byte, f func(k, v []byte) bool) error {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(err, it.Close())
		}
		if !f(it.Key(), v) {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// pebbleKV is the persistent key-value core: entries are pebble's keys and values as they
// are.
type pebbleKV struct{ *pebbleDB }

func (p pebbleKV) set(k, v []byte) error {
	if v == nil {
		return p.db.Delete(k, pebble.NoSync)
	}
	return p.db.Set(k, v, pebble.NoSync)
}

func (p pebbleKV) apply(recs []kvPair) error {
	b := p.db.NewBatch()
	for _, r := range recs {
		var err error
		if r.v == nil {
			err = b.Delete(r.k, nil)
		} else {
			err = b.Set(r.k, r.v, nil)
		}
		if err != nil {
			return errors.Join(err, b.Close())
		}
	}
	return b.Commit(pebble.NoSync)
}

// scan copies nothing: the typed store deserializes k and v before the next entry.
func (p pebbleKV) scan(f func(k, v []byte) bool) error { return p.scanRange(nil, nil, f) }

// count counts the entries by scanning them.
func (p pebbleKV) count() (int, error) {
	n := 0
	err := p.scanRange(nil, nil, func(_, _ []byte) bool { n++; return true })
	return n, err
}

func (p pebbleKV) disk() diskStore { return p.pebbleDB }

// pebbleLogger sends pebble's errors to the App's logger; its informational lines are
// dropped.
type pebbleLogger struct{ log *slog.Logger }

func (pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("streams: store: " + fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("streams: store: " + msg)
	panic("streams: store: " + msg)
}
