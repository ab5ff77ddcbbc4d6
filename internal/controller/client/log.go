package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/rpc"
)

// Entry is one committed metadata log entry, or a snapshot (Snapshot set) replacing
// everything up to its Offset.
type Entry = quorum.Committed

// LogSource is a reader of the committed metadata log.
//
// Read returns the committed entries with records from offset from on (offsets increase and
// may have gaps: entries without records are left out). If from was folded into a snapshot
// the first entry is that snapshot (Snapshot set, Offset = the snapshot's offset), followed
// by entries after it. With nothing at or after from it waits up to maxWait for an entry to
// commit; an empty result after that is not an error. The reader continues from the last
// entry's Offset + 1.
type LogSource interface {
	Read(ctx context.Context, from int64, maxWait time.Duration) ([]quorum.Committed, error)
	// HighWatermark is the highest offset known committed: as the controller that answered
	// the last read said (-1 before any), or the local controller's.
	HighWatermark() int64
}

// Read sizes.
const (
	localChunk       = 1024    // entries per local read
	fetchMaxBytes    = 4 << 20 // bytes per metadata Fetch
	snapshotMaxBytes = 4 << 20 // bytes per FetchSnapshot
)

// LocalLog reads the metadata log of a controller in this process (a node that is both
// broker and controller), with the semantics of the remote one and no network.
func LocalLog(n *quorum.Node) LogSource { return localLog{n} }

type localLog struct{ n *quorum.Node }

func (l localLog) HighWatermark() int64 { return l.n.Status().Committed }

func (l localLog) Read(ctx context.Context, from int64, maxWait time.Duration) ([]quorum.Committed, error) {
	for {
		ents, err := l.n.WaitCommitted(ctx, from, localChunk, maxWait)
		if !errors.Is(err, quorum.ErrCompacted) {
			return ents, err
		}
		off, data, err := l.n.LatestSnapshot()
		if err != nil {
			return nil, err
		}
		if off < from-1 || data == nil {
			return nil, fmt.Errorf("client: offset %d compacted but the latest snapshot is at %d", from, off)
		}
		rest, err := l.n.ReadCommitted(off+1, localChunk)
		if errors.Is(err, quorum.ErrCompacted) {
			continue // a newer snapshot came meanwhile
		}
		if err != nil {
			return nil, err
		}
		return append([]quorum.Committed{{Offset: off, Snapshot: data}}, rest...), nil
	}
}

// MetadataLog reads the metadata log over the network from any controller that answers
// (every voter serves it from its own applied state), preferring the last one that did.
func (c *Client) MetadataLog() LogSource {
	l := &remoteLog{c: c}
	l.preferred.Store(-1)
	l.hw.Store(-1)
	return l
}

type remoteLog struct {
	c         *Client
	preferred atomic.Int32 // voter that answered last, -1 none
	hw        atomic.Int64 // the high watermark of the last metadata Fetch answered, -1 none
}

func (l *remoteLog) HighWatermark() int64 { return l.hw.Load() }

func (l *remoteLog) Read(ctx context.Context, from int64, maxWait time.Duration) ([]quorum.Committed, error) {
	from = max(from, 1)
	ids := make([]int32, 0, len(l.c.order))
	if p := l.preferred.Load(); p >= 0 {
		ids = append(ids, p)
	}
	for _, id := range l.c.order {
		if id != l.preferred.Load() {
			ids = append(ids, id)
		}
	}
	var lastErr error
	for _, id := range ids {
		ents, err := l.readFrom(ctx, l.c.voters[id], from, maxWait)
		if err == nil {
			l.preferred.Store(id)
			return ents, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lastErr = err
		l.c.log.Debug("metadata log read failed", "controller", id, "err", err)
		if l.preferred.Load() == id {
			l.preferred.Store(-1)
		}
	}
	return nil, fmt.Errorf("client: no controller served the metadata log: %w", lastErr)
}

// readFrom reads from one voter: a Fetch, and after OFFSET_OUT_OF_RANGE the snapshot and the
// entries after it.
func (l *remoteLog) readFrom(ctx context.Context, v *voter, from int64, maxWait time.Duration) ([]quorum.Committed, error) {
	vc, err := l.c.conn(ctx, v)
	if err != nil {
		return nil, err
	}
	ents, snap, err := l.fetch(ctx, v, vc, from, maxWait)
	if err != nil || snap < 0 {
		return ents, err
	}
	data, err := l.fetchSnapshot(ctx, v, vc, snap)
	if err != nil {
		return nil, err
	}
	out := []quorum.Committed{{Offset: snap, Snapshot: data}}
	rest, again, err := l.fetch(ctx, v, vc, snap+1, 0)
	if err != nil || again >= 0 {
		return out, nil // the snapshot alone is a valid answer; the next Read goes on
	}
	return append(out, rest...), nil
}

// fetch sends one metadata Fetch; snap >= 0 is the snapshot offset of an
// OFFSET_OUT_OF_RANGE answer.
func (l *remoteLog) fetch(ctx context.Context, v *voter, vc *voterConn, from int64, maxWait time.Duration) (ents []quorum.Committed, snap int64, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(min(vc.versions[req.Key()], rpc.MaxVersion(req.Key()), req.MaxVersion()))
	req.ReplicaID, req.ReplicaState.ID = l.c.cfg.NodeID, l.c.cfg.NodeID
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = 1, fetchMaxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = rpc.MetadataTopic, rpc.MetadataTopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, from, fetchMaxBytes
	rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, maxWait+l.c.cfg.AttemptTimeout)
	defer cancel()
	r, err := vc.c.Request(rctx, req)
	if err != nil {
		l.c.drop(v, vc)
		return nil, -1, err
	}
	resp := r.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, -1, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, -1, errors.New("client: metadata Fetch answer without the metadata partition")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode == 0 {
		l.hw.Store(p.HighWatermark)
	}
	switch {
	case p.ErrorCode == kerr.OffsetOutOfRange.Code && p.SnapshotID.EndOffset > 0:
		return nil, p.SnapshotID.EndOffset, nil
	case p.ErrorCode != 0:
		return nil, -1, kerr.ErrorForCode(p.ErrorCode)
	}
	ents, err = rpc.DecodeFrames(p.RecordBatches)
	if err != nil {
		return nil, -1, err
	}
	if len(ents) > 0 && ents[0].Offset < from {
		return nil, -1, fmt.Errorf("client: metadata Fetch from %d answered from %d", from, ents[0].Offset)
	}
	return ents, -1, nil
}

// fetchSnapshot reads the snapshot at offset snap in chunks.
func (l *remoteLog) fetchSnapshot(ctx context.Context, v *voter, vc *voterConn, snap int64) ([]byte, error) {
	var data []byte
	for {
		req := kmsg.NewPtrFetchSnapshotRequest()
		req.SetVersion(min(vc.versions[req.Key()], req.MaxVersion()))
		req.ReplicaID, req.MaxBytes = l.c.cfg.NodeID, snapshotMaxBytes
		rt := kmsg.NewFetchSnapshotRequestTopic()
		rt.Topic = rpc.MetadataTopic
		rp := kmsg.NewFetchSnapshotRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Position = 0, -1, int64(len(data))
		rp.SnapshotID.EndOffset = snap
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, l.c.cfg.AttemptTimeout)
		r, err := vc.c.Request(rctx, req)
		cancel()
		if err != nil {
			l.c.drop(v, vc)
			return nil, err
		}
		resp := r.(*kmsg.FetchSnapshotResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, errors.New("client: FetchSnapshot answer without the metadata partition")
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return nil, err
		}
		if p.Position != int64(len(data)) || p.Size < int64(len(data))+int64(len(p.Bytes)) {
			return nil, errors.New("client: FetchSnapshot chunk out of place")
		}
		data = append(data, p.Bytes...)
		if int64(len(data)) == p.Size {
			return data, nil
		}
		if len(p.Bytes) == 0 {
			return nil, errors.New("client: FetchSnapshot returned an empty chunk")
		}
	}
}
