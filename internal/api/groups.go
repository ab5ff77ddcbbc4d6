package api

import (
	"errors"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
)

// Helpers shared by the group coordinator's API files (findcoordinator.go, joingroup.go,
// syncgroup.go, heartbeat.go, leavegroup.go, offsetcommit.go, offsetfetch.go,
// offsetdelete.go, describegroups.go, listgroups.go, deletegroups.go). The coordinator
// itself is internal/group; these files translate requests and check topics.

// EnsureOffsetsTopic returns the partition count of __consumer_offsets, whose partitions
// are open, or 0 if it does not exist; with create it first creates the topic if missing.
func (h *Handler) EnsureOffsetsTopic(create bool) (int32, error) {
	t := h.Meta.Image().Topic(group.TopicName)
	if t == nil && create {
		var err error
		t, err = h.createTopic(topicSpec{name: group.TopicName, partitions: -1, rf: -1}, false)
		if errors.Is(err, metadata.ErrTopicExists) {
			return h.EnsureOffsetsTopic(false)
		}
		if err != nil {
			return 0, err
		}
	}
	if t == nil {
		return 0, nil
	}
	return t.Partitions, nil
}

// offsetsTopicDefaults applies Kafka's settings for __consumer_offsets to what the creator
// left unset (the coordinator on first use, a Metadata auto-creation, or CreateTopics): an
// internal, compacted topic of offsets.topic.num.partitions partitions,
// offsets.topic.replication.factor replicas and offsets.topic.segment.bytes segments.
func (h *Handler) offsetsTopicDefaults(s *topicSpec) {
	cfg := h.Cfg.Current()
	if s.partitions == -1 && len(s.assignment) == 0 {
		s.partitions = cfg.OffsetsTopicNumPartitions
	}
	if s.rf == -1 && len(s.assignment) == 0 {
		s.rf = cfg.OffsetsTopicReplicationFactor
	}
	defaults := map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    strconv.Itoa(int(cfg.OffsetsTopicSegmentBytes)),
	}
	for k, v := range defaults {
		if _, ok := s.configs[k]; !ok {
			s.configs = withConfig(s.configs, k, v)
		}
	}
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

// groupReadable reports whether the connection may READ the group, what JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and ConsumerGroupHeartbeat need
// (authorize.go).
func (h *Handler) groupReadable(c *Conn, id string) bool {
	return h.authorized(c, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, id)
}
