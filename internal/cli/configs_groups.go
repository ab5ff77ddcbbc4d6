package cli

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor configs describe|alter --entity-type groups` (or --group): a consumer or share
// group's configs (config resource type GROUP), as kafka-configs.sh --entity-type groups
// does: DescribeConfigs and IncrementalAlterConfigs, which kadm has no calls for. A group
// need not exist to be configured (share.auto.offset.reset is set before the group's
// first member joins); without a name, describe covers every group ListGroups knows.

// describeGroupConfigs describes one group, or every listed group, through DescribeConfigs.
// Without all only the group's own overrides (GROUP_CONFIG) are kept.
func describeGroupConfigs(ctx context.Context, adm *kadm.Client, cl *kgo.Client, e configEntity, all bool) ([]ConfigsDescription, error) {
	names := []string{e.name}
	if e.describeEvery {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing groups: %w", err)
		}
		names = listed.Groups()
		sort.Strings(names)
	}
	if len(names) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	for _, n := range names {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, n
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("describing configs of %s: %w", e, err)
	}
	kind := "Dynamic"
	if all {
		kind = "All"
	}
	out := make([]ConfigsDescription, 0, len(resp.Resources))
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return nil, fmt.Errorf("describing configs of group %s: %s", rr.ResourceName, kafkaErrorText(err, derefString(rr.ErrorMessage)))
		}
		d := ConfigsDescription{EntityType: entityGroups, EntityName: rr.ResourceName, Configs: []ConfigEntry{},
			header: fmt.Sprintf("%s configs for group %s are:", kind, rr.ResourceName)}
		for _, c := range rr.Configs {
			if !all && c.Source != kmsg.ConfigSourceGroupConfig {
				continue
			}
			ce := ConfigEntry{Name: c.Name, Value: c.Value, Source: c.Source.String(), Sensitive: c.IsSensitive}
			for _, s := range c.ConfigSynonyms {
				ce.Synonyms = append(ce.Synonyms, ConfigSynonym{Name: s.Name, Value: s.Value, Source: s.Source.String()})
			}
			d.Configs = append(d.Configs, ce)
		}
		sort.Slice(d.Configs, func(i, j int) bool { return d.Configs[i].Name < d.Configs[j].Name })
		out = append(out, d)
	}
	return out, nil
}

// alterGroupConfigs sets and deletes keys of one group with one IncrementalAlterConfigs.
func alterGroupConfigs(ctx context.Context, cl *kgo.Client, e configEntity, items, dels []string) (ConfigsAlterResult, error) {
	res := ConfigsAlterResult{Entity: e.String(), Deleted: dels}
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, e.name
	for _, it := range items {
		k, v, err := parseKeyValue(it)
		if err != nil {
			return res, fmt.Errorf("--add-config %w", err)
		}
		if res.Set == nil {
			res.Set = map[string]string{}
		}
		if _, dup := res.Set[k]; dup {
			return res, fmt.Errorf("--add-config: %q given more than once", k)
		}
		res.Set[k] = v
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, c)
	}
	for _, k := range dels {
		if _, both := res.Set[k]; both {
			return res, fmt.Errorf("%q is both set and deleted", k)
		}
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = k, kmsg.IncrementalAlterConfigOpDelete
		r.Configs = append(r.Configs, c)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return res, fmt.Errorf("altering configs of %s: %w", e, err)
	}
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return res, fmt.Errorf("altering configs of %s: %s", e, kafkaErrorText(err, derefString(rr.ErrorMessage)))
		}
	}
	return res, nil
}
