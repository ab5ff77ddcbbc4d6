package batch

import (
	"encoding/binary"
	"fmt"
)

// Every entry of a records field, whatever its magic, starts with offset int64 and a length
// int32, and has its magic byte at offset 16: for v2 the length is batchLength (entry size
// 12+length), for v0/v1 it is the message size (entry size 12+size) and bytes 12..15 are the
// message's crc.

// magicOffset is where every batch and legacy message keeps its magic byte.
const magicOffset = offMagic

// Magic returns the magic byte of the batch or legacy message at b[0] (offset 16). It fails
// with ErrCorrupt when b is too short to hold it, and returns the byte together with
// ErrUnsupportedMagic when it is not 0, 1 or 2.
func Magic(b []byte) (int8, error) {
	if len(b) <= magicOffset {
		return 0, fmt.Errorf("%w: %d bytes is too short to hold a magic byte", ErrCorrupt, len(b))
	}
	m := int8(b[magicOffset])
	if m < 0 || m > 2 {
		return m, fmt.Errorf("%w: %d", ErrUnsupportedMagic, m)
	}
	return m, nil
}

// Split walks a produce request's records field (one or more concatenated batches) and
// returns each v2 batch's bytes as a subslice of b (no copy). A legacy message set (first
// entry magic 0 or 1) is returned whole as one element after checking that its entries frame
// b exactly and share one magic; Magic tells the caller which it got. It checks only framing
// (lengths, magic), not CRCs: run Validate or UpConvert on each element. Mixed magics, a
// length past the end or trailing bytes fail with ErrCorrupt (or ErrUnsupportedMagic). An
// empty b yields no batches and no error: a produce request needing at least one batch is the
// caller's rule.
func Split(b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	first, err := Magic(b)
	if err != nil {
		return nil, err
	}
	if first < 2 {
		if err := walkLegacySet(b, first); err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	}
	var out [][]byte
	for len(b) > 0 {
		m, err := Magic(b)
		if err != nil {
			return nil, err
		}
		if m != 2 {
			return nil, fmt.Errorf("%w: magic %d batch after a magic 2 batch", ErrCorrupt, m)
		}
		n := int64(LogOverhead) + int64(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
		if n < HeaderSize || n > int64(len(b)) {
			return nil, fmt.Errorf("%w: batch of %d bytes with %d bytes left", ErrCorrupt, n, len(b))
		}
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out, nil
}

// walkLegacySet checks that b is a sequence of whole legacy entries, all with magic magic.
func walkLegacySet(b []byte, magic int8) error {
	for len(b) > 0 {
		m, err := Magic(b)
		if err != nil {
			return err
		}
		if m != magic {
			return fmt.Errorf("%w: magic %d message in a magic %d message set", ErrCorrupt, m, magic)
		}
		n := int64(LogOverhead) + int64(int32(binary.BigEndian.Uint32(b[offBatchLength:])))
		if n < LogOverhead+int64(legacyOverhead(magic)) || n > int64(len(b)) {
			return fmt.Errorf("%w: message of %d bytes with %d bytes left", ErrCorrupt, n, len(b))
		}
		b = b[n:]
	}
	return nil
}
