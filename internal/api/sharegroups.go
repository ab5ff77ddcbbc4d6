package api

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/share"
)

// Helpers shared by the share group API files (sharegroupheartbeat.go,
// sharegroupdescribe.go, sharefetch.go, shareacknowledge.go). Share groups themselves are
// internal/share; these files translate requests.

// shareManager is the broker's share groups, share-partitions and share sessions.
func (h *Handler) shareManager() *share.Manager {
	h.sharesOnce.Do(func() { h.shares = share.NewManager() })
	return h.shares
}

// shareConfig is what a share-partition of group acts on, from the current broker
// configuration and the group's share.record.lock.duration.ms.
func (h *Handler) shareConfig(group string) share.Config {
	cfg := h.Cfg.Current()
	return share.Config{
		MaxLocks:       int(cfg.GroupSharePartitionMaxRecordLocks),
		DeliveryLimit:  int16(cfg.GroupShareDeliveryCountLimit),
		LockDurationMs: int64(cfg.GroupInt(h.groupConfigs(group), config.GroupShareRecordLockDurationMs)),
	}
}

// groupConfigs are group's overrides (nil when it has none), as this broker's metadata
// image holds them.
func (h *Handler) groupConfigs(group string) map[string]string {
	return h.Meta.Image().GroupConfigs[group]
}

// ConsumerGroupConfig is the consumer.session.timeout.ms and consumer.heartbeat.interval.ms
// of consumer group id (KIP-848): its overrides, else the broker's group.consumer.* values.
// The group coordinator asks it on every heartbeat.
func (h *Handler) ConsumerGroupConfig(id string) (sessionMs, heartbeatMs int32) {
	m := h.groupConfigs(id)
	return h.Cfg.GroupInt(m, config.GroupConsumerSessionTimeoutMs), h.Cfg.GroupInt(m, config.GroupConsumerHeartbeatIntervalMs)
}

// shareTopics is the metadata image as a share group's assignor sees it.
type shareTopics struct{ im *metadata.Image }

func (v shareTopics) Topic(name string) ([16]byte, int32, bool) {
	t := v.im.Topic(name)
	if t == nil {
		return [16]byte{}, 0, false
	}
	return t.ID, t.Partitions, true
}

// otherGroupType is GROUP_ID_NOT_FOUND ("Group X is not a share group.", as Kafka words it)
// when id names a classic or consumer group rather than a share group, else nil: the group
// types share one namespace of ids.
func (h *Handler) otherGroupType(id string) error {
	if h.Groups == nil || h.shareManager().Has(id) {
		return nil
	}
	if d := h.Groups.DescribeGroup(id); d.ErrorCode == 0 && d.State != "Dead" {
		return fmt.Errorf("%w: Group %s is not a share group.", kerr.GroupIDNotFound, id)
	}
	return nil
}

// shareKeys are group's share-partitions of every partition of topics (the ones the image
// has), wherever they are led: those whose persisted state a deletion or a describe looks
// up on their share coordinators.
func (h *Handler) shareKeys(group string, topics []string) []share.Key {
	im := h.Meta.Image()
	var out []share.Key
	for _, name := range topics {
		if t := im.Topic(name); t != nil {
			for p := range t.Partitions {
				out = append(out, share.Key{Group: group, Topic: t.ID, Partition: p})
			}
		}
	}
	return out
}
