package txn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/coordinator"
)

// Records of __transaction_state, in Kafka's own format (its TransactionLogKey and
// TransactionLogValue, kmsg's TxnMetadataKey and TxnMetadataValue):
//
//	key   version 0: transactional id
//	value version 0: producer id, epoch, timeout, state, topics [topic, partitions], last
//	                 update time, start time
//	value version 1: the same, flexible, with the tagged fields of KIP-890 (previous and next
//	                 producer id, the client's transaction version)
//	null value:      the id was removed (expired)
//
// Values are written in version 1, as Kafka writes them once transaction.version 1 or
// later is finalized (the broker finalizes TransactionVersion); the client's transaction
// version is 0 for a transaction of the older protocol and 2 for one of KIP-890 part 2
// (whose next producer id must survive a reload). Version 0 values are still read.

// TransactionVersion is the level of Kafka's transaction.version feature this coordinator
// runs at, which brokers finalize in ApiVersions: 1 is the flexible (version 1) records, 2
// is KIP-890 part 2 (Produce v12 and TxnOffsetCommit v5 adding their partitions, EndTxn v5
// bumping the epoch at every end). Clients that do not ask for 2 still get the older
// protocol.
const TransactionVersion int16 = 2

// Record is a __transaction_state record; a nil Value is a tombstone.
type Record = coordinator.Record

// ErrUnknownRecord is returned by Replay for a record of a key version this coordinator does
// not know.
var ErrUnknownRecord = errors.New("txn: unknown __transaction_state record type")

// ErrCorruptRecord is returned by Replay for a record that does not decode.
var ErrCorruptRecord = errors.New("txn: corrupt __transaction_state record")

func keyRecord(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

func valueRecord(n transit) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = n.ProducerID, n.Epoch, n.TimeoutMs
	v.State = kmsg.TransactionState(n.State)
	v.LastUpdateTimestamp, v.StartTimestamp = n.UpdateMs, n.StartMs
	v.Version = 1
	v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion = n.PrevProducerID, n.NextProducerID, n.ClientVersion
	if n.State != Empty { // Kafka writes a null topic array for Empty
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, p := range n.Partitions {
			if k := len(v.Topics); k > 0 && v.Topics[k-1].Topic == p.Topic {
				v.Topics[k-1].Partitions = append(v.Topics[k-1].Partitions, p.Partition)
				continue
			}
			t := kmsg.NewTxnMetadataValueTopic()
			t.Topic, t.Partitions = p.Topic, []int32{p.Partition}
			v.Topics = append(v.Topics, t)
		}
	}
	return v.AppendTo(nil)
}

// decodeKey returns the transactional id of a record key.
func decodeKey(key []byte) (string, error) {
	if len(key) < 2 {
		return "", fmt.Errorf("%w: %d-byte key", ErrCorruptRecord, len(key))
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", fmt.Errorf("%w: key: %v", ErrCorruptRecord, err)
	}
	if k.Version != 0 {
		return "", fmt.Errorf("%w: key version %d", ErrUnknownRecord, k.Version)
	}
	return k.TransactionalID, nil
}

// decodeValue returns the state a record value carries.
func decodeValue(id string, value []byte) (*Txn, error) {
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("%w: value of %q: %v", ErrCorruptRecord, id, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return nil, fmt.Errorf("%w: value version %d of %q", ErrUnknownRecord, v.Version, id)
	}
	s := State(v.State)
	if s < Empty || s > CompleteAbort || v.ProducerID < 0 {
		return nil, fmt.Errorf("%w: %q in state %d with producer id %d", ErrCorruptRecord, id, v.State, v.ProducerID)
	}
	t := &Txn{
		ID: id, ProducerID: v.ProducerID, PrevProducerID: v.PreviousProducerID, NextProducerID: v.NextProducerID,
		Epoch: v.ProducerEpoch, LastEpoch: -1, TimeoutMs: v.TimeoutMillis, State: s,
		Partitions: map[TopicPartition]struct{}{}, StartMs: v.StartTimestamp, UpdateMs: v.LastUpdateTimestamp,
		ClientVersion: v.ClientTransactionVersion, pending: none,
	}
	if s != Empty {
		for _, tp := range v.Topics {
			for _, p := range tp.Partitions {
				t.Partitions[TopicPartition{tp.Topic, p}] = struct{}{}
			}
		}
	}
	return t, nil
}

// records is the one record of a transition of id.
func records(id string, n transit) []Record {
	n.Partitions = slices.Clone(n.Partitions)
	return []Record{{Key: keyRecord(id), Value: valueRecord(n)}}
}
