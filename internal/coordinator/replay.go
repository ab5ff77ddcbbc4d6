package coordinator

import (
	"context"
	"fmt"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/replica"
)

// replayReadBytes is how much of the log one read of Replay takes.
const replayReadBytes = 1 << 20

// Replay reads p's log from its log start offset up to its log end offset as it stood when
// Replay began, past the high watermark (a leader never truncates its own log, so what it
// holds becomes committed in its term, and dropping it would lose what the previous leader
// acknowledged). It checks each batch's CRC and hands fn each batch that reaches past what
// was read before, raw, with from, the offset its new records start at (a batch the log
// start offset falls inside has older records before it). An error of fn, of the log, of
// a batch or of ctx (checked before every read) ends the replay and is returned.
func Replay(ctx context.Context, p *replica.Partition, fn func(h batch.Header, raw []byte, from int64) error) error {
	l := p.Log()
	end := l.LogEndOffset()
	off := l.LogStartOffset()
	var buf []byte
	for off < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		sl, err := l.Read(off, replayReadBytes, end, true)
		if err != nil {
			return err
		}
		if sl.Size == 0 {
			sl.Release()
			break
		}
		if cap(buf) < int(sl.Size) {
			buf = make([]byte, sl.Size)
		}
		b := buf[:sl.Size]
		_, err = sl.File.ReadAt(b, sl.Pos)
		sl.Release()
		if err != nil {
			return err
		}
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				return err
			}
			if h.Size() > len(b) {
				return fmt.Errorf("%w: batch at offset %d runs past the read", batch.ErrCorrupt, h.BaseOffset)
			}
			one := b[:h.Size()]
			b = b[h.Size():]
			if _, err := batch.CheckCRC(one); err != nil {
				return err
			}
			next := h.LastOffset() + 1
			if next <= off {
				continue
			}
			if err := fn(h, one, off); err != nil {
				return err
			}
			off = next
		}
	}
	return nil
}
