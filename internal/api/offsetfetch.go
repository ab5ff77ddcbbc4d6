package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch v0-v9: committed offsets of the requested partitions (v2+: null topics means
// every committed partition), -1 where nothing was committed; v5+ with the leader epoch;
// v7+ require_stable answers UNSTABLE_OFFSET_COMMIT for partitions whose commit is still
// being written or that a transaction committed offsets of (TxnOffsetCommit) without having
// ended yet (without it, such a partition answers its last committed offset); v8+ asks for
// several groups at once. v9's member id and epoch matter only
// to KIP-848 consumer groups: for classic groups Kafka does not check them, nor do we.

func handleOffsetFetch(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for i := range req.Groups {
			resp.Groups = append(resp.Groups, h.Groups.FetchOffsets(&req.Groups[i], req.RequireStable))
		}
		return msg(resp)
	}
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = req.Group
	if req.Topics != nil || req.Version < 2 {
		g.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
		for _, t := range req.Topics {
			g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	got := h.Groups.FetchOffsets(&g, req.RequireStable)
	resp.ErrorCode = got.ErrorCode
	if got.ErrorCode != 0 && req.Version < 2 {
		// No top-level error before v2: every requested partition carries it.
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, got.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return msg(resp)
	}
	for _, t := range got.Topics {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return msg(resp)
}
