package server

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Envelopes (KIP-590): a broker forwards a client's request to the controller inside an
// EnvelopeRequest with the client's principal, and the controller answers inside an
// EnvelopeResponse. The embedded request is a request header and body without the size
// (RequestData); the embedded response a response header and body (ResponseData). These
// encode and decode them with the same header rules as the wire.

// ParseEmbeddedRequest decodes an Envelope's RequestData: the request, its correlation id and
// client id. An unknown key or a malformed request is an error.
func ParseEmbeddedRequest(b []byte) (req kmsg.Request, correlationID int32, clientID string, err error) {
	h, body, err := parseHeader(b)
	if err != nil {
		return nil, 0, "", err
	}
	req = kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, 0, "", fmt.Errorf("server: embedded request of unknown api key %d", h.key)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return nil, 0, "", err
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, 0, "", fmt.Errorf("server: embedded %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	return req, h.correlationID, h.clientID, nil
}

// AppendEmbeddedRequest appends req as an Envelope's RequestData.
func AppendEmbeddedRequest(dst []byte, req kmsg.Request, correlationID int32, clientID string) []byte {
	start := len(dst)
	dst = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(dst, req, correlationID)
	return append(dst[:start], dst[start+4:]...) // without the size
}

// AppendEmbeddedResponse appends resp (at its version) as an Envelope's ResponseData.
func AppendEmbeddedResponse(dst []byte, resp kmsg.Response, correlationID int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0) // no tagged fields
	}
	return resp.AppendTo(dst)
}

// ReadEmbeddedResponse decodes an Envelope's ResponseData into resp (its version set).
func ReadEmbeddedResponse(b []byte, resp kmsg.Response) error {
	if len(b) < 4 {
		return errors.New("server: embedded response truncated")
	}
	b = b[4:]
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		var err error
		if b, err = skipTags(b); err != nil {
			return err
		}
	}
	return resp.ReadFrom(b)
}
