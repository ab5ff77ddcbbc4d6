package state

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/config"
)

// ConfigOp is an IncrementalAlterConfigs operation, numbered as Kafka numbers them.
type ConfigOp int8

const (
	OpSet      ConfigOp = 0
	OpDelete   ConfigOp = 1
	OpAppend   ConfigOp = 2 // add list items not yet present
	OpSubtract ConfigOp = 3 // remove list items
)

// ConfigChange is one operation on one key.
type ConfigChange struct {
	Key   string
	Op    ConfigOp
	Value string
}

// AlterConfigsResource is the changes to one resource (ResourceTopic, ResourceBroker with
// name "" for the cluster-wide default or a broker id, or ResourceGroup: a group's overrides,
// which may be set before the group exists, as in Kafka).
type AlterConfigsResource struct {
	Type    int8
	Name    string
	Changes []ConfigChange
}

// AlterConfigsRequest is IncrementalAlterConfigs, or with Incremental false the legacy
// AlterConfigs (every change is a set, and keys not mentioned lose their override).
type AlterConfigsRequest struct {
	Resources    []AlterConfigsResource
	Incremental  bool
	ValidateOnly bool
}

// AlterConfigsResult is the outcome for one resource.
type AlterConfigsResult struct {
	Type int8
	Name string
	Err  error
}

// AlterConfigs validates and records config changes; each resource succeeds or fails alone.
func (c *Controller) AlterConfigs(req AlterConfigsRequest) ([]Record, []AlterConfigsResult) {
	var recs []Record
	results := make([]AlterConfigsResult, len(req.Resources))
	seen := map[ConfigResource]int{}
	for _, r := range req.Resources {
		seen[ConfigResource{r.Type, r.Name}]++
	}
	for i, r := range req.Resources {
		results[i] = AlterConfigsResult{Type: r.Type, Name: r.Name}
		if seen[ConfigResource{r.Type, r.Name}] > 1 {
			results[i].Err = errf(kerr.InvalidRequest, "resource %d/%q appears more than once", r.Type, r.Name)
			continue
		}
		rrecs, err := c.alterResource(r, req.Incremental)
		if err != nil {
			results[i].Err = err
			continue
		}
		if !req.ValidateOnly {
			recs = append(recs, rrecs...)
		}
	}
	return recs, results
}

func (c *Controller) alterResource(r AlterConfigsResource, incremental bool) ([]Record, error) {
	var validate func(k, v string) error
	switch r.Type {
	case ResourceTopic:
		if c.im.topicsByName[r.Name] == nil {
			return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", r.Name)
		}
		validate = c.cfg.ValidateTopicConfig
	case ResourceBroker:
		if r.Name != "" {
			if id, err := strconv.ParseInt(r.Name, 10, 32); err != nil || id < 0 {
				return nil, errf(kerr.InvalidRequest, "broker resource name %q is not a broker id", r.Name)
			}
		}
		validate = c.cfg.ValidateBrokerConfig
	case ResourceGroup:
		if r.Name == "" {
			return nil, errf(kerr.InvalidRequest, "Default group resources are not allowed.")
		}
		validate = func(string, string) error { return nil } // the whole set is checked below
	default:
		return nil, errf(kerr.InvalidRequest, "config resource type %d is not supported", r.Type)
	}
	res := ConfigResource{r.Type, r.Name}
	current := c.im.configs[res]
	next := map[string]*string{} // key -> new value, nil = delete
	for _, ch := range r.Changes {
		if _, dup := next[ch.Key]; dup || ch.Key == "" {
			return nil, errf(kerr.InvalidRequest, "config key %q is empty or given twice", ch.Key)
		}
		op := ch.Op
		if !incremental {
			op = OpSet
		}
		switch op {
		case OpSet:
			v := ch.Value
			next[ch.Key] = &v
		case OpDelete:
			next[ch.Key] = nil
		case OpAppend, OpSubtract:
			if r.Type == ResourceGroup { // no group key is a list, as Kafka's schema says
				name := map[ConfigOp]string{OpAppend: "APPEND", OpSubtract: "SUBTRACT"}[op]
				return nil, errf(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.", name, ch.Key)
			}
			items := splitList(current[ch.Key])
			for _, it := range splitList(ch.Value) {
				has := slices.Contains(items, it)
				if op == OpAppend && !has {
					items = append(items, it)
				} else if op == OpSubtract && has {
					items = slices.DeleteFunc(items, func(s string) bool { return s == it })
				}
			}
			v := strings.Join(items, ",")
			next[ch.Key] = &v
		default:
			return nil, errf(kerr.InvalidRequest, "config operation %d", ch.Op)
		}
		if v := next[ch.Key]; v != nil {
			if r.Type == ResourceBroker && r.Name == "" && config.PerBrokerOnly(ch.Key) {
				return nil, errf(kerr.InvalidConfig, "%s: %s", ch.Key, config.PerBrokerOnlyReason)
			}
			if err := validate(ch.Key, *v); err != nil {
				return nil, errf(kerr.InvalidConfig, "%v", err)
			}
		}
	}
	if !incremental {
		for k := range current {
			if _, ok := next[k]; !ok {
				next[k] = nil
			}
		}
	}
	if r.Type == ResourceGroup {
		after := maps.Clone(current)
		if after == nil {
			after = map[string]string{}
		}
		for k, v := range next {
			if v == nil {
				delete(after, k)
			} else {
				after[k] = *v
			}
		}
		if err := c.cfg.ValidateGroupConfigs(after); err != nil {
			return nil, errf(kerr.InvalidConfig, "%v", groupConfigReason(err))
		}
	}
	var recs []Record
	for _, k := range sortedKeys(next) {
		v := next[k]
		old, had := current[k]
		switch {
		case v == nil && had:
			recs = append(recs, &ConfigRecord{ResourceType: r.Type, ResourceName: r.Name, Name: k, Delete: true})
		case v != nil && (!had || old != *v):
			recs = append(recs, &ConfigRecord{ResourceType: r.Type, ResourceName: r.Name, Name: k, Value: *v})
		}
	}
	return recs, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// groupConfigReason is the message of a refused group config: Kafka's own wording, without
// the key prefix config.Error adds.
func groupConfigReason(err error) string {
	var ce *config.Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}
