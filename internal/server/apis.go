package server

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API is one served API key: the version range a handler implements and the function that
// answers it. F is the handler's own function type (a broker's handlers see the Conn, a
// controller's do not).
type API[F any] struct {
	Min, Max int16
	Handle   F
}

// APIs is a handler's table of served API keys, written as one literal: the keys and
// versions it advertises in ApiVersions and that the connection loop checks each request
// against (Handler.Versions) are read from it and nowhere else.
type APIs[F any] map[int16]API[F]

// Versions reports the served version range of key; ok is false when it is not served.
func (t APIs[F]) Versions(key int16) (min, max int16, ok bool) {
	a, ok := t[key]
	return a.Min, a.Max, ok
}

// MaxVersion is the highest served version of key, -1 when it is not served.
func (t APIs[F]) MaxVersion(key int16) int16 {
	if a, ok := t[key]; ok {
		return a.Max
	}
	return -1
}

// ApiKeys lists the served keys with their ranges, in key order, as ApiVersions answers them.
func (t APIs[F]) ApiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t))
	for k, a := range t {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.Min, MaxVersion: a.Max})
	}
	slices.SortFunc(keys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return keys
}
