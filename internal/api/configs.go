package api

import (
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
)

// Config changes shared by AlterConfigs (replace every override) and IncrementalAlterConfigs
// (set, delete, append, subtract).

// alterConfigs applies a resource's new override set: for topics, the topic's overrides; for
// a broker, its dynamic configs (persisted in the metadata store and applied to every topic
// that inherits them).
func (h *Handler) alterConfigs(typ kmsg.ConfigResourceType, name string, next func(cur map[string]string) (map[string]string, error), validateOnly bool) error {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t := h.Meta.Image().Topic(name)
		if t == nil {
			return fmt.Errorf("%w: %s", errUnknownPartition, name)
		}
		m, err := next(maps.Clone(t.Configs))
		if err != nil {
			return err
		}
		for k, v := range m {
			if err := config.ValidateTopicConfig(k, v); err != nil {
				return err
			}
		}
		if _, err := h.settings(m); err != nil {
			return err
		}
		if validateOnly {
			return nil
		}
		nt, err := h.Meta.SetConfigs(name, m)
		if err != nil {
			return err
		}
		return h.reconfigureTopic(nt)
	case kmsg.ConfigResourceTypeBroker:
		if err := h.checkBrokerResource(name); err != nil {
			return err
		}
		m, err := next(h.Meta.Image().BrokerConfigs)
		if err != nil {
			return err
		}
		for k, v := range m {
			if err := h.Cfg.ValidateDynamic(k, v); err != nil {
				return err
			}
		}
		if validateOnly {
			return nil
		}
		if err := ApplyDynamic(h.Cfg, m); err != nil {
			return err
		}
		if err := h.Meta.SetBrokerConfigs(m); err != nil {
			return err
		}
		return h.ReconfigureAll()
	}
	return fmt.Errorf("%w: config resource type %d is not supported", errInvalidRequest, typ)
}

// ApplyDynamic makes m the broker's whole set of dynamic configs: keys no longer in m are
// removed, the rest set. The broker resource of this node and the cluster default ("") are
// both stored as this broker's dynamic configs: on a single node they mean the same.
func ApplyDynamic(cfg *config.Broker, m map[string]string) error {
	for k := range cfg.Dynamic() {
		if _, ok := m[k]; !ok {
			if err := cfg.DeleteDynamic(k); err != nil {
				return err
			}
		}
	}
	for k, v := range m {
		if err := cfg.SetDynamic(k, v); err != nil {
			return err
		}
	}
	return nil
}
