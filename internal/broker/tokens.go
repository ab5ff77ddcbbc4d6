package broker

import (
	"crypto/hmac"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/security"
)

// Delegation token authentication (KIP-48) on the broker's SASL/SCRAM listeners: a client
// authenticates with SCRAM as a token id, with the token's HMAC (under
// delegation.token.secret.key, in base64) as password and the extension tokenauth=true, and
// is then the token's owner until the token expires. The broker derives each token's SCRAM
// credential for each mechanism from the HMAC, with 4096 iterations (the mechanisms' least,
// as Kafka's DelegationTokenCache uses) and a salt derived from the key and the token id,
// and keeps it: PBKDF2 is not run again for every connection.
//
// mu guards cache, which is dropped whenever it holds more entries than twice the tokens
// the image has (tokens expired or removed leave theirs behind until then).

// tokenIterations is the iteration count of tokens' SCRAM credentials.
const tokenIterations = 4096

type tokenCredentials struct {
	cfg   *config.Broker
	mu    sync.Mutex
	cache map[string]security.ScramCredential // by mechanism + "\x00" + token id
}

func (t *tokenCredentials) credential(im *metadata.Image, id, mechanism string, now time.Time) (security.ScramCredential, authz.Principal, time.Time, bool) {
	secret := t.cfg.DelegationTokenSecret()
	tok := im.DelegationToken(id)
	if secret == "" || tok == nil || tok.ExpiryMs < now.UnixMilli() {
		return security.ScramCredential{}, authz.Principal{}, time.Time{}, false
	}
	owner, err := authz.ParsePrincipal(tok.Owner)
	if err != nil {
		return security.ScramCredential{}, authz.Principal{}, time.Time{}, false
	}
	key := mechanism + "\x00" + id
	t.mu.Lock()
	defer t.mu.Unlock()
	c, cached := t.cache[key]
	if !cached {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte("salt\x00" + id))
		c, err = security.ScramCredentialFor(mechanism, state.TokenPassword(state.TokenHMAC(secret, id)), mac.Sum(nil)[:16], tokenIterations)
		if err != nil {
			return security.ScramCredential{}, authz.Principal{}, time.Time{}, false
		}
		if t.cache == nil || len(t.cache) > 2*im.NumDelegationTokens()+8 {
			t.cache = map[string]security.ScramCredential{}
		}
		t.cache[key] = c
	}
	return c, owner, time.UnixMilli(tok.ExpiryMs), true
}
