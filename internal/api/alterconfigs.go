package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs v0-v2: the given configs replace every existing override of the resource.
// Checked here, decided by the controller (configs.go).

func handleAlterConfigs(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	keys := make([]configKey, len(req.Resources))
	next := make([]func(map[string]string) (map[string]string, error), len(req.Resources))
	for i, rr := range req.Resources {
		keys[i] = configKey{rr.ResourceType, rr.ResourceName}
		next[i] = func(map[string]string) (map[string]string, error) {
			m := map[string]string{}
			for _, c := range rr.Configs {
				if c.Value == nil {
					return nil, fmt.Errorf("%w: null value for %s", errInvalidRequest, c.Name)
				}
				if _, dup := m[c.Name]; dup {
					return nil, fmt.Errorf("%w: config %s named twice", errInvalidRequest, c.Name)
				}
				m[c.Name] = *c.Value
			}
			return m, nil
		}
	}
	wants, errs := h.checkConfigResources(c, keys, next)
	fwd := kmsg.NewPtrAlterConfigsRequest()
	fwd.SetVersion(req.Version)
	fwd.ValidateOnly = req.ValidateOnly
	h.forwardCheckedConfigs(ctx, fwd, func(i int) { fwd.Resources = append(fwd.Resources, req.Resources[i]) }, keys, wants, errs, req.ValidateOnly)
	for i, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = code(errs[i]), errMsg(errs[i])
		resp.Resources = append(resp.Resources, sr)
	}
	return msg(resp)
}
