package api

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions v0-v3. A request of a newer version is answered by UnsupportedApiVersions
// (KIP-511) from the connection loop.

func handleApiVersions(_ *Handler, _ context.Context, _ *Conn, _ kmsg.Request) Reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = apiKeys()
	return msg(resp)
}

// UnsupportedApiVersions is the v0 answer with UNSUPPORTED_VERSION and the served ranges.
func (h *Handler) UnsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys()
	return resp
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for k, a := range apis {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}
