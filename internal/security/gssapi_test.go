package security

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// Tokens that are not what RFC 4752's step expects are ILLEGAL_SASL_STATE (errMalformed)
// before any key is used: garbage for the initial context token, a Kerberos token without
// an AP-REQ, data where the empty token after the AP-REP belongs.
func TestGSSAPIMalformedTokens(t *testing.T) {
	m := &gssapiMechanism{}
	for name, tok := range map[string][]byte{
		"empty":              nil,
		"not GSS":            []byte("n,,n=alice,r=abc"),
		"GSS tag, truncated": {0x60, 0x10, 0x06},
		// 0x60, the Kerberos OID, TOK_ID 02 00 (an AP-REP where the AP-REQ belongs)
		"AP-REP first": {0x60, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x02, 0x00},
	} {
		_, _, err := m.start().step(tok, time.Now())
		if !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want a malformed token", name, err)
		}
	}
	e := &gssapiExchange{m: m, stage: gssAwaitEmpty}
	if _, _, err := e.step([]byte{1}, time.Now()); !errors.Is(err, errMalformed) {
		t.Errorf("data after the AP-REP: %v", err)
	}
	e = &gssapiExchange{m: m, stage: gssAwaitSecLayer}
	if _, _, err := e.step([]byte{5, 4, 0}, time.Now()); !errors.Is(err, errMalformed) {
		t.Errorf("a short wrap token: %v", err)
	}
}

// A wrap token rotated right by RRC (RFC 4121 4.2.5) reads as the unrotated one.
func TestGSSAPIUnrotate(t *testing.T) {
	hdr := []byte{0x05, 0x04, 0x00, 0xff, 0x00, 0x0c, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 7}
	body := []byte("payload+checksum")
	plain := append(append([]byte{}, hdr...), body...)
	rot := append([]byte{}, hdr...)
	rot[7] = 3
	rot = append(rot, body[len(body)-3:]...)
	rot = append(rot, body[:len(body)-3]...)
	if got := unrotate(rot); !bytes.Equal(got, plain) {
		t.Fatalf("unrotate: %q, want %q", got, plain)
	}
	if got := unrotate(plain); !bytes.Equal(got, plain) {
		t.Fatalf("RRC 0 changed: %q", got)
	}
}
