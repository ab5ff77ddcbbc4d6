package api

import (
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

// shareConfig is what a share-partition acts on, from the current broker configuration.
func (h *Handler) shareConfig() share.Config {
	cfg := h.Cfg.Current()
	return share.Config{
		MaxLocks:       int(cfg.GroupSharePartitionMaxRecordLocks),
		DeliveryLimit:  int16(cfg.GroupShareDeliveryCountLimit),
		LockDurationMs: int64(cfg.GroupShareRecordLockDurationMs),
	}
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
