package api

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/quota"
)

// DescribeClientQuotas v0-v1 (KIP-546): answered from this broker's metadata image, with
// Kafka's filter (ClientQuotasImage.describe): each component names an entity type and
// matches an exact name (MATCH_TYPE_EXACT), the default entity (MATCH_TYPE_DEFAULT) or any
// entity of the type (MATCH_TYPE_SPECIFIED, kmsg's Any); an entity matches when it has every
// component's type, matching; with strict it must also have no other type. No component
// matches every entity (unless strict, which then matches none). A bad filter is the whole
// response's INVALID_REQUEST (UNSUPPORTED_VERSION for an unknown entity type), with Kafka's
// message. Entries are sorted by entity, keys by name; with none matching they are an empty
// array (null only beside an error, as Kafka answers).

func handleDescribeClientQuotas(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if err := h.clusterDenied(c, kmsg.ACLOperationDescribeConfigs); err != nil { // as Kafka
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	f, err := parseQuotaFilter(req.Components, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	// Entries is null only beside an error: Kafka's Java client reads a successful answer's
	// entries without a null check, so none matching is an empty array.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	tab := h.Meta.Image().ClientQuotas
	for _, e := range tab.Entities() {
		if !f.matches(e) {
			continue
		}
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Parts() {
			rp := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			rp.Type, rp.Name = p.Type, p.Name
			re.Entity = append(re.Entity, rp)
		}
		keys := make([]string, 0, len(tab[e]))
		for k := range tab[e] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, tab[e][k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return msg(resp)
}

// quotaFilter is a parsed DescribeClientQuotas filter: per entity type, the name it must
// have (exact, or the default), or only that it must be present (any).
type quotaFilter struct {
	exact  map[string]quota.Name
	any    map[string]bool
	strict bool
}

// quotaFilterError is a refused filter: its Kafka error with Kafka's message alone.
type quotaFilterError struct {
	err *kerr.Error
	msg string
}

func (e *quotaFilterError) Error() string { return e.msg }
func (e *quotaFilterError) Unwrap() error { return e.err }

func badQuotaFilter(format string, args ...any) error {
	return &quotaFilterError{err: kerr.InvalidRequest, msg: fmt.Sprintf(format, args...)}
}

func parseQuotaFilter(cs []kmsg.DescribeClientQuotasRequestComponent, strict bool) (*quotaFilter, error) {
	f := &quotaFilter{exact: map[string]quota.Name{}, any: map[string]bool{}, strict: strict}
	for _, c := range cs {
		t := c.EntityType
		_, isExact := f.exact[t]
		switch {
		case t == "":
			return nil, badQuotaFilter("Invalid empty entity type.")
		case isExact || f.any[t]:
			return nil, badQuotaFilter("Entity type %s cannot appear more than once in the filter.", t)
		case t != quota.TypeUser && t != quota.TypeClientID && t != quota.TypeIP:
			return nil, &quotaFilterError{err: kerr.UnsupportedVersion, msg: "Unsupported entity type " + t}
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, badQuotaFilter("Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			f.exact[t] = quota.Of(*c.Match)
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return nil, badQuotaFilter("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			f.exact[t] = quota.DefaultName
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return nil, badQuotaFilter("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			f.any[t] = true
		default:
			return nil, badQuotaFilter("Unknown match type %d", c.MatchType)
		}
	}
	if f.has(quota.TypeIP) && (f.has(quota.TypeUser) || f.has(quota.TypeClientID)) {
		return nil, badQuotaFilter("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	return f, nil
}

func (f *quotaFilter) has(t string) bool {
	_, ok := f.exact[t]
	return ok || f.any[t]
}

func (f *quotaFilter) matches(e quota.Entity) bool {
	parts := map[string]quota.Name{quota.TypeUser: e.User, quota.TypeClientID: e.ClientID, quota.TypeIP: e.IP}
	n := 0
	for _, p := range parts {
		if p.Kind != quota.Absent {
			n++
		}
	}
	if f.strict && n != len(f.exact)+len(f.any) {
		return false
	}
	for t, want := range f.exact {
		if parts[t] != want {
			return false
		}
	}
	for t := range f.any {
		if parts[t].Kind == quota.Absent {
			return false
		}
	}
	return true
}
