package quorum

import (
	"encoding/binary"
	"fmt"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// Raft entry data (EntryNormal entries; raft's own empty entries carry no data):
//
//	entry = format:uint8 (1)  proposer:uvarint (raft id)  seq:uvarint  batch
//
// batch is a state record batch (state.EncodeBatch). proposer and seq identify the proposal
// so the proposing controller can answer its caller when the entry applies; they mean
// nothing to anyone else.
const entryFormat = 1

func encodeEntry(proposer, seq uint64, recs []state.Record) []byte {
	b := []byte{entryFormat}
	b = binary.AppendUvarint(b, proposer)
	b = binary.AppendUvarint(b, seq)
	return append(b, state.EncodeBatch(recs)...)
}

func decodeEntry(b []byte) (proposer, seq uint64, recs []state.Record, err error) {
	if len(b) < 1 || b[0] != entryFormat {
		return 0, 0, nil, fmt.Errorf("%w: entry format", state.ErrCorruptRecord)
	}
	b = b[1:]
	proposer, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: entry proposer", state.ErrCorruptRecord)
	}
	b = b[n:]
	seq, n = binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, fmt.Errorf("%w: entry sequence", state.ErrCorruptRecord)
	}
	recs, err = state.DecodeBatch(b[n:])
	return proposer, seq, recs, err
}
