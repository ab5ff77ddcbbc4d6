package api

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
)

// DescribeShareGroupOffsets v0-v1 (KIP-932): each share-partition's start offset (every
// record below it acknowledged or archived) and, from v1, its lag (records below the high
// watermark not yet acknowledged or archived), for the topics named or, when none are, every
// partition the group has read. A partition the group never fetched answers start offset
// -1. A share-partition this broker has in memory answers from it (with its lag); any
// other named one from its share coordinator's ReadShareGroupStateSummary (start offset and
// leader epoch, lag -1: only its leader knows which records past the start are done).
// Without named topics the share-partitions listed are those in this broker's memory and
// those of the topics the group's members subscribed to that have persisted state.

func handleDescribeShareGroupOffsets(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	im := h.Meta.Image()
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		if !h.authorized(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, rg.GroupID) {
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if h.Groups != nil {
			if err := h.Groups.FindCoordinator(rg.GroupID); err != nil {
				g.ErrorCode = err.Code
				resp.Groups = append(resp.Groups, g)
				continue
			}
		}
		sums := h.shareManager().Summaries(rg.GroupID)
		remote := map[share.Key]share.PartitionState{} // summaries read from share coordinators
		topics := rg.Topics
		if topics == nil {
			// Every partition with state, by topic name: those held here, and those of
			// the topics the group subscribed to that their share coordinators hold.
			byName := map[string][]int32{}
			for k := range sums {
				if t := im.TopicByID(k.Topic); t != nil {
					byName[t.Name] = append(byName[t.Name], k.Partition)
				}
			}
			for _, k := range h.shareKeys(rg.GroupID, h.shareManager().Subscribed(rg.GroupID)) {
				if _, ok := sums[k]; ok {
					continue
				}
				if ps, ok, err := h.readShareStateSummary(k); err == nil && ok {
					remote[k] = ps
					if t := im.TopicByID(k.Topic); t != nil {
						byName[t.Name] = append(byName[t.Name], k.Partition)
					}
				}
			}
			for name, ps := range byName {
				slices.Sort(ps)
				topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: name, Partitions: ps})
			}
			slices.SortFunc(topics, func(a, b kmsg.DescribeShareGroupOffsetsRequestGroupTopic) int {
				return strings.Compare(a.Topic, b.Topic)
			})
		}
		for _, rt := range topics {
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic = rt.Topic
			mt := im.Topic(rt.Topic)
			if mt != nil {
				t.TopicID = mt.ID
			}
			for _, p := range rt.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch = p, -1, -1
				switch {
				case !describable.ok(rt.Topic):
					rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				case mt == nil || p < 0 || p >= mt.Partitions:
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					k := share.Key{Group: rg.GroupID, Topic: mt.ID, Partition: p}
					if s, ok := sums[k]; ok {
						rp.StartOffset = s.Start
						if rep := h.Replicas.Get(rt.Topic, p); rep != nil {
							_, rp.LeaderEpoch, _ = rep.Role()
							rp.Lag = max(0, rep.HighWatermark()-s.Start-s.Finished)
						}
					} else if ps, ok := remote[k]; ok {
						rp.StartOffset, rp.LeaderEpoch = ps.Start, ps.LeaderEpoch
					} else if ps, ok, err := h.readShareStateSummary(k); err == nil && ok {
						// Not in this broker's memory: the share coordinator's summary.
						rp.StartOffset, rp.LeaderEpoch = ps.Start, ps.LeaderEpoch
					}
				}
				t.Partitions = append(t.Partitions, rp)
			}
			g.Topics = append(g.Topics, t)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return msg(resp)
}
