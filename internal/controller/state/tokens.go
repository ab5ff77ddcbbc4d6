package state

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Delegation tokens (KIP-48), kept in the metadata log as Kafka's KRaft controller keeps them
// (DelegationTokenControlManager). A token is an id the controller makes, its owner (the
// principal it authenticates as), the principal that asked for it, the principals that may
// renew it, and three times: issued, expires (moved by renewals) and the most it may live.
// Its HMAC, HmacSHA512 of the id under delegation.token.secret.key, is its password: never
// stored, computed by every node that holds the key. A client authenticates with SCRAM as
// the token id and the HMAC in base64 (tokenauth=true), and is then the token's owner.
//
// Records:
//
//	DelegationTokenRecord        TokenID string | Owner string | Requester string |
//	                             renewers: count uvarint, then string each |
//	                             IssueTimestamp varint | MaxTimestamp varint | ExpirationTimestamp varint
//	                             creates a token or replaces it (a renewal, a shortened life)
//	RemoveDelegationTokenRecord  TokenID string: the token, which must exist, is gone
//	                             (expired by ExpireDelegationToken, or swept once past its expiry)
//
// Principals are Kafka's "User:name" strings. Invariants (Image.Check): every token has a
// non-empty id and owner, and Issue <= Expiration <= Max.

// DelegationToken is one token as the image holds it. Never modified once applied.
type DelegationToken struct {
	ID        string
	Owner     string
	Requester string
	Renewers  []string
	IssueMs   int64
	MaxMs     int64
	ExpiryMs  int64
}

// DelegationTokenRecord creates or replaces one token.
type DelegationTokenRecord struct{ DelegationToken }

// RemoveDelegationTokenRecord deletes one token.
type RemoveDelegationTokenRecord struct{ TokenID string }

func (*DelegationTokenRecord) Type() RecordType       { return TypeDelegationToken }
func (*RemoveDelegationTokenRecord) Type() RecordType { return TypeRemoveDelegationToken }
func (*DelegationTokenRecord) version() uint64        { return 0 }
func (*RemoveDelegationTokenRecord) version() uint64  { return 0 }

func (r *DelegationTokenRecord) encode(e *encoder) {
	e.string(r.ID)
	e.string(r.Owner)
	e.string(r.Requester)
	e.uvarint(uint64(len(r.Renewers)))
	for _, p := range r.Renewers {
		e.string(p)
	}
	e.varint(r.IssueMs)
	e.varint(r.MaxMs)
	e.varint(r.ExpiryMs)
}

func (r *DelegationTokenRecord) decode(d *decoder, _ uint64) {
	r.ID = d.string()
	r.Owner = d.string()
	r.Requester = d.string()
	n := d.count(1)
	r.Renewers = nil
	for range n {
		r.Renewers = append(r.Renewers, d.string())
	}
	r.IssueMs = d.varint()
	r.MaxMs = d.varint()
	r.ExpiryMs = d.varint()
}

func (r *RemoveDelegationTokenRecord) encode(e *encoder)           { e.string(r.TokenID) }
func (r *RemoveDelegationTokenRecord) decode(d *decoder, _ uint64) { r.TokenID = d.string() }

// TokenHMAC is a token's HMAC under the secret key: HmacSHA512(secret, id), as Kafka's
// DelegationTokenManager computes it.
func TokenHMAC(secret, id string) []byte {
	m := hmac.New(sha512.New, []byte(secret))
	m.Write([]byte(id))
	return m.Sum(nil)
}

// TokenPassword is the SCRAM password of a token: its HMAC in standard base64.
func TokenPassword(hmacBytes []byte) string { return base64.StdEncoding.EncodeToString(hmacBytes) }

// DelegationToken returns the token with id, or nil.
func (im *Image) DelegationToken(id string) *DelegationToken { return im.tokens[id] }

// DelegationTokens returns every token, sorted by id.
func (im *Image) DelegationTokens() []*DelegationToken {
	out := make([]*DelegationToken, 0, len(im.tokens))
	for _, t := range im.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (im *Image) applyDelegationToken(r *DelegationTokenRecord) error {
	t := r.DelegationToken
	if t.ID == "" || t.Owner == "" {
		return reject("delegation token %q of %q: empty id or owner", t.ID, t.Owner)
	}
	if t.ExpiryMs < t.IssueMs || t.ExpiryMs > t.MaxMs {
		return reject("delegation token %s: expiry %d outside issue %d and max %d", t.ID, t.ExpiryMs, t.IssueMs, t.MaxMs)
	}
	t.Renewers = slices.Clone(t.Renewers)
	im.tokens[t.ID] = &t
	return nil
}

func (im *Image) applyRemoveDelegationToken(r *RemoveDelegationTokenRecord) error {
	if im.tokens[r.TokenID] == nil {
		return reject("remove delegation token %s: unknown", r.TokenID)
	}
	delete(im.tokens, r.TokenID)
	return nil
}

func (im *Image) checkTokens() error {
	for id, t := range im.tokens {
		if id != t.ID || t.ID == "" || t.Owner == "" || t.ExpiryMs < t.IssueMs || t.ExpiryMs > t.MaxMs {
			return fmt.Errorf("delegation token %q %+v", id, *t)
		}
	}
	return nil
}

// tokenRecords rebuild the tokens (snapshots), by id.
func (im *Image) tokenRecords() []Record {
	var recs []Record
	for _, t := range im.DelegationTokens() {
		recs = append(recs, &DelegationTokenRecord{*t})
	}
	return recs
}

// Token commands. The controller's Config carries the secret key and the lifetimes; with no
// key every command is DELEGATION_TOKEN_AUTH_DISABLED. Principals are checked by the
// caller's connection (the forwarding broker's Envelope): requester is who asks.

// CreateTokenRequest is a CreateDelegationToken: the owner ("" = the requester), the
// renewers, and the most the token may live (<= 0: delegation.token.max.lifetime.ms).
type CreateTokenRequest struct {
	Owner, Requester string
	Renewers         []string
	MaxLifetimeMs    int64
}

// CreateDelegationToken makes a token: issued now, expiring after
// delegation.token.expiry.time.ms, living at most the lesser of the request's and
// delegation.token.max.lifetime.ms.
func (c *Controller) CreateDelegationToken(now int64, req CreateTokenRequest) ([]Record, *DelegationToken, error) {
	if c.cfg.TokenSecret == "" {
		return nil, nil, errf(kerr.DelegationTokenAuthDisabled, "delegation tokens are disabled: delegation.token.secret.key is not set")
	}
	life := c.cfg.TokenMaxLifetimeMs
	if req.MaxLifetimeMs > 0 {
		life = min(life, req.MaxLifetimeMs)
	}
	owner := req.Owner
	if owner == "" {
		owner = req.Requester
	}
	var id string
	for id == "" || c.im.tokens[id] != nil {
		u := c.cfg.NewUUID()
		id = base64.RawURLEncoding.EncodeToString(u[:])
	}
	t := &DelegationToken{ID: id, Owner: owner, Requester: req.Requester, Renewers: slices.Clone(req.Renewers),
		IssueMs: now, MaxMs: now + life}
	t.ExpiryMs = min(t.MaxMs, now+c.cfg.TokenExpiryTimeMs)
	return []Record{&DelegationTokenRecord{*t}}, t, nil
}

// tokenByHMAC finds the token whose HMAC is mac.
func (c *Controller) tokenByHMAC(mac []byte) *DelegationToken {
	for _, t := range c.im.tokens {
		if hmac.Equal(TokenHMAC(c.cfg.TokenSecret, t.ID), mac) {
			return t
		}
	}
	return nil
}

// mayRenew reports whether principal may renew or expire t: its owner or one of its
// renewers.
func mayRenew(t *DelegationToken, principal string) bool {
	return principal == t.Owner || slices.Contains(t.Renewers, principal)
}

// RenewDelegationToken moves the expiry of the token with HMAC mac to now plus period
// (< 0: delegation.token.expiry.time.ms), never past its max; it answers the new expiry.
func (c *Controller) RenewDelegationToken(now int64, principal string, mac []byte, periodMs int64) ([]Record, int64, error) {
	t, err := c.renewable(now, principal, mac)
	if err != nil {
		return nil, 0, err
	}
	if periodMs < 0 {
		periodMs = c.cfg.TokenExpiryTimeMs
	}
	nt := *t
	nt.ExpiryMs = min(t.MaxMs, now+periodMs)
	return []Record{&DelegationTokenRecord{nt}}, nt.ExpiryMs, nil
}

// ExpireDelegationToken sets the expiry of the token with HMAC mac to now plus period, never
// past its max; a negative period expires it now, removing it. It answers the expiry.
func (c *Controller) ExpireDelegationToken(now int64, principal string, mac []byte, periodMs int64) ([]Record, int64, error) {
	t, err := c.renewable(now, principal, mac)
	if err != nil {
		return nil, 0, err
	}
	if periodMs < 0 {
		return []Record{&RemoveDelegationTokenRecord{TokenID: t.ID}}, now, nil
	}
	nt := *t
	nt.ExpiryMs = max(nt.IssueMs, min(t.MaxMs, now+periodMs))
	return []Record{&DelegationTokenRecord{nt}}, nt.ExpiryMs, nil
}

// renewable is the token with HMAC mac if principal may renew or expire it now.
func (c *Controller) renewable(now int64, principal string, mac []byte) (*DelegationToken, error) {
	if c.cfg.TokenSecret == "" {
		return nil, errf(kerr.DelegationTokenAuthDisabled, "delegation tokens are disabled: delegation.token.secret.key is not set")
	}
	t := c.tokenByHMAC(mac)
	switch {
	case t == nil:
		return nil, errf(kerr.DelegationTokenNotFound, "no delegation token has this HMAC")
	case !mayRenew(t, principal):
		return nil, errf(kerr.DelegationTokenOwnerMismatch, "%s is neither the owner nor a renewer of the token", principal)
	case t.ExpiryMs < now:
		return nil, errf(kerr.DelegationTokenExpired, "the delegation token expired at %d", t.ExpiryMs)
	}
	return t, nil
}

// ExpireDelegationTokens removes every token past its expiry, at most once every
// delegation.token.expiry.check.interval.ms (the active controller's sweep).
func (c *Controller) ExpireDelegationTokens(now int64) []Record {
	if len(c.im.tokens) == 0 || now-c.tokenSweep < c.cfg.TokenExpiryCheckMs {
		return nil
	}
	c.tokenSweep = now
	var recs []Record
	for _, t := range c.im.DelegationTokens() {
		if t.ExpiryMs < now {
			recs = append(recs, &RemoveDelegationTokenRecord{TokenID: t.ID})
		}
	}
	return recs
}
