package replica

import (
	"sort"

	"github.com/gregor-project/gregor/internal/storage"
)

// SnapshotProducer is one producer's state in a producer snapshot file, as tools print it
// (gregor dump-log); the file format is in snapshot.go.
type SnapshotProducer struct {
	ProducerID       int64
	Epoch            int16
	LastTimestamp    int64
	CoordinatorEpoch int32       // of the last marker; -1 none
	TxnFirstOffset   int64       // first offset of the ongoing transaction; -1 none
	Batches          []BatchMeta // the last batches kept for deduplication, oldest first
}

// ReadProducerSnapshot decodes the producer snapshot file at path offline, producers by id.
func ReadProducerSnapshot(fs storage.FS, path string) ([]SnapshotProducer, error) {
	b, err := readAll(fs, path)
	if err != nil {
		return nil, err
	}
	s, err := decodeSnapshot(b)
	if err != nil {
		return nil, err
	}
	out := make([]SnapshotProducer, 0, len(s.m))
	for id, e := range s.m {
		out = append(out, SnapshotProducer{
			ProducerID: id, Epoch: e.epoch, LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, TxnFirstOffset: e.txnFirstOffset,
			Batches: append([]BatchMeta(nil), e.batches...),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out, nil
}
