package api

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
)

// Helpers shared by the group coordinator's API files (findcoordinator.go, joingroup.go,
// syncgroup.go, heartbeat.go, leavegroup.go, offsetcommit.go, offsetfetch.go,
// offsetdelete.go, describegroups.go, listgroups.go, deletegroups.go). The coordinator
// itself is internal/group; these files translate requests and check topics.

// EnsureOffsetsTopic returns the partition count of __consumer_offsets, whose partitions
// are open, or 0 if it does not exist; with create it first creates the topic as Kafka
// does: internal, compacted, offsets.topic.num.partitions partitions,
// offsets.topic.replication.factor replicas, offsets.topic.segment.bytes segments.
func (h *Handler) EnsureOffsetsTopic(create bool) (int32, error) {
	if t := h.Meta.Image().Topic(group.TopicName); t != nil || !create {
		if t == nil {
			return 0, nil
		}
		return t.Partitions, nil
	}
	cfg := h.Cfg.Current()
	if cfg.OffsetsTopicReplicationFactor > 1 {
		return 0, fmt.Errorf("%w: offsets.topic.replication.factor %d larger than the 1 available broker", errInvalidRF, cfg.OffsetsTopicReplicationFactor)
	}
	t, err := h.Meta.CreateTopic(metadata.Topic{
		Name:              group.TopicName,
		Partitions:        cfg.OffsetsTopicNumPartitions,
		ReplicationFactor: cfg.OffsetsTopicReplicationFactor,
		Internal:          true,
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
			"segment.bytes":    strconv.Itoa(int(cfg.OffsetsTopicSegmentBytes)),
		},
	})
	if errors.Is(err, metadata.ErrTopicExists) {
		return h.EnsureOffsetsTopic(false)
	}
	if err != nil {
		return 0, err
	}
	h.Log.Info("created topic", "topic", t.Name, "partitions", t.Partitions, "internal", true)
	return t.Partitions, h.OpenPartitions(t, 0)
}

// clientHost is the client's address as Kafka reports it in DescribeGroups: "/<ip>".
func clientHost(c *Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr)
	if err != nil {
		host = c.RemoteAddr
	}
	return "/" + host
}

// knownPartition reports whether topic has partition p (offsets are only committed or
// deleted for partitions that exist: UNKNOWN_TOPIC_OR_PARTITION otherwise, as Kafka does).
func knownPartition(im *metadata.Image, topic string, p int32) bool {
	t := im.Topic(topic)
	return t != nil && p >= 0 && p < t.Partitions
}
