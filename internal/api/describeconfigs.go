package api

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
)

// DescribeConfigs v0-v4 for topic, broker and group resources: every config with its
// effective value, where it came from (topic or group override, dynamic or static broker
// config, default) and, when asked, its synonyms and documentation. A group need not exist
// to be described: its keys then show the broker's values.

func handleDescribeConfigs(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var entries []config.Entry
		err := h.configDenied(c, kmsg.ACLOperationDescribeConfigs, rr.ResourceType, rr.ResourceName)
		if err == nil {
			entries, err = h.describeResource(rr.ResourceType, rr.ResourceName)
		}
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = code(err), errMsg(err)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, e.Name) {
				continue
			}
			sr.Configs = append(sr.Configs, describeEntry(e, req.IncludeSynonyms, req.IncludeDocumentation))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return msg(resp)
}

func (h *Handler) describeResource(typ kmsg.ConfigResourceType, name string) ([]config.Entry, error) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		t := h.Meta.Image().Topic(name)
		if t == nil {
			return nil, fmt.Errorf("%w: %s", errUnknownPartition, name)
		}
		return h.Cfg.DescribeTopic(t.Configs), nil
	case kmsg.ConfigResourceTypeBroker:
		if err := h.checkBrokerResource(name); err != nil {
			return nil, err
		}
		return h.Cfg.DescribeBroker(), nil
	case kmsg.ConfigResourceTypeGroupConfig:
		if name == "" {
			return nil, fmt.Errorf("%w: Group name must not be empty", errInvalidRequest)
		}
		return h.Cfg.DescribeGroup(h.Meta.Image().GroupConfigs[name]), nil
	}
	return nil, fmt.Errorf("%w: config resource type %d is not supported", errInvalidRequest, typ)
}

// checkBrokerResource accepts this broker's id, or "" for the cluster-wide default.
func (h *Handler) checkBrokerResource(name string) error {
	if name == "" || name == strconv.Itoa(int(h.NodeID)) {
		return nil
	}
	return fmt.Errorf("%w: broker %q is not this broker (%d)", errInvalidRequest, name, h.NodeID)
}

func describeEntry(e config.Entry, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.Name
	if !e.Sensitive && !e.Null {
		v := e.Value
		c.Value = &v
	}
	c.ReadOnly = e.ReadOnly
	c.Source = kmsg.ConfigSource(e.Source)
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	c.IsSensitive = e.Sensitive
	c.ConfigType = kmsg.ConfigType(e.Type)
	if docs && e.Doc != "" {
		d := e.Doc
		c.Documentation = &d
	}
	if synonyms {
		for _, s := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			v := s.Value
			cs.Name, cs.Value, cs.Source = s.Name, &v, kmsg.ConfigSource(s.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}
