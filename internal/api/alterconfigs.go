package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs v0-v2: the given configs replace every existing override of the resource.

func handleAlterConfigs(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := h.alterConfigs(rr.ResourceType, rr.ResourceName, func(map[string]string) (map[string]string, error) {
			m := map[string]string{}
			for _, c := range rr.Configs {
				if c.Value == nil {
					return nil, fmt.Errorf("%w: null value for %s", errInvalidRequest, c.Name)
				}
				m[c.Name] = *c.Value
			}
			return m, nil
		}, req.ValidateOnly)
		sr.ErrorCode, sr.ErrorMessage = code(err), errMsg(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return msg(resp)
}
