package metadata

import (
	"slices"
	"strings"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// The delegation tokens of an Image (KIP-48): who owns each, who may renew it, when it
// expires. A map an Image shares with the previous one until a token record changes it.
// The tokens' HMACs are not here: a broker computes them with its own
// delegation.token.secret.key.

// DelegationToken is one token (see state.DelegationToken). Never modified once published.
type DelegationToken = state.DelegationToken

// DelegationToken returns the token with id, or nil.
func (im *Image) DelegationToken(id string) *DelegationToken { return im.tokens[id] }

// DelegationTokens returns every token, sorted by id.
func (im *Image) DelegationTokens() []*DelegationToken {
	out := make([]*DelegationToken, 0, len(im.tokens))
	for _, t := range im.tokens {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *DelegationToken) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// NumDelegationTokens is how many tokens the image holds.
func (im *Image) NumDelegationTokens() int { return len(im.tokens) }

// newTokens copies the tokens out of st (nil when there are none).
func newTokens(st *state.Image) map[string]*DelegationToken {
	ts := st.DelegationTokens()
	if len(ts) == 0 {
		return nil
	}
	m := make(map[string]*DelegationToken, len(ts))
	for _, t := range ts {
		c := *t
		c.Renewers = slices.Clone(t.Renewers)
		m[t.ID] = &c
	}
	return m
}
