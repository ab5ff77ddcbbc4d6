package state

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Delegation tokens through the state machine: create with the lifetimes capped, renew and
// expire by owner or renewer only (by HMAC), the sweep removing expired tokens at its
// interval, and a snapshot restoring them.
func TestDelegationTokens(t *testing.T) {
	const secret = "s3cret"
	h := newHarness(t, func(c *Config) {
		c.TokenSecret, c.TokenMaxLifetimeMs, c.TokenExpiryTimeMs, c.TokenExpiryCheckMs = secret, 10_000, 4_000, 1_000
	})
	recs, tok, err := h.c.CreateDelegationToken(h.now, CreateTokenRequest{Requester: "User:alice", Renewers: []string{"User:bob"}, MaxLifetimeMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	h.apply(recs)
	got := h.c.Image().DelegationToken(tok.ID)
	if got == nil || got.Owner != "User:alice" || got.MaxMs != h.now+10_000 || got.ExpiryMs != h.now+4_000 {
		t.Fatalf("token %+v: want owner alice, max now+10s (the config's cap), expiry now+4s", got)
	}
	mac := TokenHMAC(secret, tok.ID)

	_, _, err = h.c.RenewDelegationToken(h.now, "User:carol", mac, -1)
	wantErr(t, err, kerr.DelegationTokenOwnerMismatch)
	_, _, err = h.c.RenewDelegationToken(h.now, "User:bob", TokenHMAC("other", tok.ID), -1)
	wantErr(t, err, kerr.DelegationTokenNotFound)
	h.now += 3_000
	recs, exp, err := h.c.RenewDelegationToken(h.now, "User:bob", mac, 60_000)
	if err != nil || exp != got.MaxMs {
		t.Fatalf("renew by a renewer: expiry %d %v, want the max %d", exp, err, got.MaxMs)
	}
	h.apply(recs)

	recs, exp, err = h.c.ExpireDelegationToken(h.now, "User:alice", mac, 500)
	if err != nil || exp != h.now+500 {
		t.Fatalf("expire in 500 ms: %d %v", exp, err)
	}
	h.apply(recs)
	if recs := h.c.ExpireDelegationTokens(h.now); len(recs) != 0 {
		t.Fatalf("sweep before expiry removed %v", recs)
	}

	// A snapshot keeps the token.
	im, err := Restore(h.c.Image().Snapshot())
	if err != nil || im.DelegationToken(tok.ID) == nil || im.DelegationToken(tok.ID).ExpiryMs != h.now+500 {
		t.Fatalf("restored %v %v", im.DelegationToken(tok.ID), err)
	}

	h.now += 600
	_, _, err = h.c.RenewDelegationToken(h.now, "User:alice", mac, -1)
	wantErr(t, err, kerr.DelegationTokenExpired)
	if recs := h.c.ExpireDelegationTokens(h.now); len(recs) != 0 {
		t.Fatalf("sweep within its interval removed %v", recs)
	}
	h.now += 1_000
	recs = h.c.ExpireDelegationTokens(h.now)
	if len(recs) != 1 {
		t.Fatalf("sweep past the expiry: %v", recs)
	}
	h.apply(recs)
	if h.c.Image().DelegationToken(tok.ID) != nil {
		t.Fatal("expired token still there")
	}

	off := newHarness(t)
	_, _, err = off.c.CreateDelegationToken(off.now, CreateTokenRequest{Requester: "User:alice"})
	wantErr(t, err, kerr.DelegationTokenAuthDisabled)
}
