package api

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs v0-v1 for topic, broker and group resources: SET and DELETE
// single keys; APPEND and SUBTRACT add or remove items of list configs (cleanup.policy; no
// group key is a list). A key named twice in one resource is
// INVALID_REQUEST. Checked here, decided by the controller (configs.go).

func handleIncrementalAlterConfigs(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	keys := make([]configKey, len(req.Resources))
	next := make([]func(map[string]string) (map[string]string, error), len(req.Resources))
	for i, rr := range req.Resources {
		keys[i] = configKey{rr.ResourceType, rr.ResourceName}
		next[i] = func(cur map[string]string) (map[string]string, error) { return applyIncremental(cur, rr.Configs) }
	}
	wants, errs := h.checkConfigResources(c, keys, next)
	fwd := kmsg.NewPtrIncrementalAlterConfigsRequest()
	fwd.SetVersion(req.Version)
	fwd.ValidateOnly = req.ValidateOnly
	h.forwardCheckedConfigs(ctx, fwd, func(i int) { fwd.Resources = append(fwd.Resources, req.Resources[i]) }, keys, wants, errs, req.ValidateOnly)
	for i, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = code(errs[i]), errMsg(errs[i])
		resp.Resources = append(resp.Resources, sr)
	}
	return msg(resp)
}

func applyIncremental(cur map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	m := map[string]string{}
	for k, v := range cur {
		m[k] = v
	}
	seen := map[string]bool{}
	for _, c := range ops {
		if seen[c.Name] {
			return nil, fmt.Errorf("%w: config %s named twice", errInvalidRequest, c.Name)
		}
		seen[c.Name] = true
		val := ""
		if c.Value != nil {
			val = *c.Value
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if c.Value == nil {
				return nil, fmt.Errorf("%w: null value for %s", errInvalidRequest, c.Name)
			}
			m[c.Name] = val
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(m, c.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			items := splitList(m[c.Name])
			for _, it := range splitList(val) {
				i := slices.Index(items, it)
				if c.Op == kmsg.IncrementalAlterConfigOpAppend && i < 0 {
					items = append(items, it)
				} else if c.Op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0 {
					items = slices.Delete(items, i, i+1)
				}
			}
			m[c.Name] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: unknown operation %d", errInvalidRequest, c.Op)
		}
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}
