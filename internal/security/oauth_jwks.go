package security

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwksValidator is Kafka's OAuthBearerValidatorCallbackHandler (KIP-768): the token is a
// signed JWT (RFC 7519) whose signature verifies with a key of the identity provider's JWKS
// (RFC 7517), read from sasl.oauthbearer.jwks.endpoint.url. As Kafka's validator (jose4j
// with DISALLOW_NONE, required exp and iat) checks it:
//
//   - the header's alg is an asymmetric signature (RS*, PS*, ES*, EdDSA): alg none and HMAC
//     are refused;
//   - the key is the JWKS key of the header's kid (or, without a kid, the first key fit for
//     the alg); an unknown kid also brings the next JWKS read forward;
//   - exp and iat are present; now is before exp and not before nbf, give or take
//     sasl.oauthbearer.clock.skew.seconds;
//   - iss equals sasl.oauthbearer.expected.issuer when that is set;
//   - aud names one of sasl.oauthbearer.expected.audience when that is set, and, as jose4j
//     by default, a token carrying an aud is refused when it is not;
//   - the sasl.oauthbearer.sub.claim.name claim is a non-blank string: the principal; the
//     sasl.oauthbearer.scope.claim.name claim, when present, a string or a list of them.
//
// Any failure answers {"status":"invalid_token"}, as Kafka's handler does.
type jwksValidator struct {
	keys                 *jwksSource
	audience             []string
	issuer               string
	subClaim, scopeClaim string
	skew                 time.Duration
}

// jwsAlgorithms are the signature algorithms accepted.
var jwsAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

func newJWKSValidator(c *listenerConfig, j JAAS, jaasKey string, log *slog.Logger) (*jwksValidator, error) {
	v := &jwksValidator{}
	get := c.oauthValue
	var key string
	v.issuer, _ = get("sasl.oauthbearer.expected.issuer")
	aud, _ := get("sasl.oauthbearer.expected.audience")
	v.audience = splitComma(aud)
	v.subClaim, _ = get("sasl.oauthbearer.sub.claim.name")
	v.scopeClaim, _ = get("sasl.oauthbearer.scope.claim.name")
	if v.subClaim == "" {
		v.subClaim = "sub"
	}
	if v.scopeClaim == "" {
		v.scopeClaim = "scope"
	}
	num := func(name string, dflt int64, unit time.Duration) (time.Duration, error) {
		return durationValue(get, name, dflt, unit)
	}
	var err error
	if v.skew, err = num("sasl.oauthbearer.clock.skew.seconds", 30, time.Second); err != nil {
		return nil, err
	}
	src := &jwksSource{log: log}
	if src.refresh, err = num("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3600000, time.Millisecond); err != nil {
		return nil, err
	}
	if src.backoff, err = num("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100, time.Millisecond); err != nil {
		return nil, err
	}
	if src.backoffMax, err = num("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10000, time.Millisecond); err != nil {
		return nil, err
	}
	src.url, key = get("sasl.oauthbearer.jwks.endpoint.url")
	handlerKey := c.mechKey(OAuthBearer, "sasl.server.callback.handler.class")
	if src.url == "" {
		return nil, fmt.Errorf("%s is %s but %s is not set: the keys tokens are signed with come from it", handlerKey, OAuthBearerValidatorCallbackHandler, key)
	}
	u, err := url.Parse(src.url)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a URL: %v", key, src.url, err)
	}
	switch u.Scheme {
	case "file":
		path := u.Path
		src.fetch = func(context.Context) ([]byte, error) { return os.ReadFile(path) }
	case "https", "http":
		tlsCfg, err := jaasTLS(j, jaasKey)
		if err != nil {
			return nil, err
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment}}
		target := src.url
		src.fetch = func(ctx context.Context) ([]byte, error) { return httpGet(ctx, hc, target) }
	default:
		return nil, fmt.Errorf("%s: %q is neither a file:// nor an https:// URL", key, src.url)
	}
	// As Kafka's broker, the JWKS is read at start-up: one that cannot be read stops it.
	if err := src.load(context.Background(), time.Now()); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	v.keys = src
	return v, nil
}

// jaasTLS is the TLS configuration towards an identity provider: the JAAS line's ssl.*
// options, as Kafka's JaasOptionsUtils reads them; without a trust store, the system's roots.
func jaasTLS(j JAAS, jaasKey string) (*tls.Config, error) {
	values := map[string]string{"ssl.enabled.protocols": "TLSv1.2,TLSv1.3", "ssl.endpoint.identification.algorithm": "https", "ssl.truststore.type": "JKS", "ssl.keystore.type": "JKS"}
	setKey := map[string]string{}
	for k, val := range j.Options {
		if strings.HasPrefix(k, "ssl.") {
			values[k], setKey[k] = val, jaasKey+" option "+k
		}
	}
	return ClientTLS(values, setKey)
}

// durationValue is the non-negative number of units of the key name as get finds it, dflt
// when unset; an error names the key it came from.
func durationValue(get func(string) (string, string), name string, dflt int64, unit time.Duration) (time.Duration, error) {
	s, k := get(name)
	if s == "" {
		return time.Duration(dflt) * unit, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative number", k, s)
	}
	return time.Duration(n) * unit, nil
}

// errUnretryable marks an identity provider's answer that asking again cannot change.
var errUnretryable = errors.New("not retried")

// retryBackoff runs fetch until it succeeds, with waits doubling from backoff, for at most
// backoffMax in all (Kafka's Retry, behind sasl.login.retry.backoff.* and
// sasl.oauthbearer.jwks.endpoint.retry.backoff.*); an error wrapping errUnretryable ends it
// at once.
func retryBackoff(ctx context.Context, backoff, backoffMax time.Duration, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	end := time.Now().Add(backoffMax)
	wait := backoff
	for {
		b, err := fetch(ctx)
		if err == nil {
			return b, nil
		}
		left := time.Until(end)
		if left <= 0 || wait <= 0 || errors.Is(err, errUnretryable) {
			return nil, err
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait *= 2
	}
}

func httpGet(ctx context.Context, hc *http.Client, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	return b, nil
}

func (v *jwksValidator) validate(token string, now time.Time) (oauthToken, *oauthInvalid) {
	if strings.Count(token, ".") != 2 {
		return oauthToken{}, invalidToken("Malformed JWT provided; expected three sections (header, payload, and signature)")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(jwsAlgorithms),
		jwt.WithLeeway(v.skew),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithExpirationRequired(),
	}
	if v.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.issuer))
	}
	if len(v.audience) > 0 {
		opts = append(opts, jwt.WithAudience(v.audience...))
	}
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return v.keys.verificationKey(t, now)
	})
	if err != nil {
		return oauthToken{}, invalidToken("Could not validate the access token: %v", err)
	}
	if _, ok := claims["iat"]; !ok {
		return oauthToken{}, invalidToken("Could not validate the access token: no Issued At (iat) claim present")
	}
	if len(v.audience) == 0 {
		if aud, _ := claims.GetAudience(); len(aud) > 0 {
			return oauthToken{}, invalidToken("Could not validate the access token: audience (aud) claim %v present in the JWT but no expected audience value(s) were provided (sasl.oauthbearer.expected.audience)", []string(aud))
		}
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return oauthToken{}, invalidToken("Could not validate the access token: bad exp claim")
	}
	sub, isString := claims[v.subClaim].(string)
	if !isString || strings.TrimSpace(sub) == "" {
		return oauthToken{}, invalidToken("The %s claim value must be a non-blank string", v.subClaim)
	}
	// The scope is not checked against anything, but it must be well formed.
	if _, bad := scopeClaim(claims, v.scopeClaim); bad != nil {
		return oauthToken{}, bad
	}
	// Kafka takes exp in whole seconds.
	return oauthToken{principal: strings.TrimSpace(sub), expires: time.Unix(exp.Unix(), 0)}, nil
}

// jwk is one verification key of a JWKS.
type jwk struct {
	kid, use, alg string
	key           crypto.PublicKey
}

// fits reports whether the key may verify a signature of algorithm alg.
func (k jwk) fits(alg string) bool {
	if k.use != "" && k.use != "sig" || k.alg != "" && k.alg != alg {
		return false
	}
	switch pk := k.key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return alg == map[string]string{"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[pk.Curve.Params().Name]
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

// parseJWKS reads a JWK Set, keeping the keys Gregor can verify with (RSA, EC P-256, P-384,
// P-521, Ed25519) and skipping others (encryption keys' algorithms, symmetric keys).
func parseJWKS(b []byte) ([]jwk, error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %v", err)
	}
	var out []jwk
	for i, raw := range set.Keys {
		str := func(name string) string { s, _ := raw[name].(string); return s }
		k := jwk{kid: str("kid"), use: str("use"), alg: str("alg")}
		b64 := func(name string) ([]byte, error) {
			v, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(str(name), "="))
			if err != nil || len(v) == 0 {
				return nil, fmt.Errorf("key %d (kid %q): member %q is not base64url", i, k.kid, name)
			}
			return v, nil
		}
		switch str("kty") {
		case "RSA":
			n, err := b64("n")
			if err != nil {
				return nil, err
			}
			e, err := b64("e")
			if err != nil {
				return nil, err
			}
			ev := new(big.Int).SetBytes(e)
			if !ev.IsInt64() || ev.Int64() < 3 || ev.Int64() > 1<<31-1 {
				return nil, fmt.Errorf("key %d (kid %q): bad RSA exponent", i, k.kid)
			}
			k.key = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(ev.Int64())}
		case "EC":
			curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[str("crv")]
			if curve == nil {
				continue
			}
			x, err := b64("x")
			if err != nil {
				return nil, err
			}
			y, err := b64("y")
			if err != nil {
				return nil, err
			}
			size := (curve.Params().BitSize + 7) / 8
			if len(x) != size || len(y) != size {
				return nil, fmt.Errorf("key %d (kid %q): EC coordinates of the wrong size", i, k.kid)
			}
			pk, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
			if err != nil {
				return nil, fmt.Errorf("key %d (kid %q): %v", i, k.kid, err)
			}
			k.key = pk
		case "OKP":
			if str("crv") != "Ed25519" {
				continue
			}
			x, err := b64("x")
			if err != nil {
				return nil, err
			}
			if len(x) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("key %d (kid %q): an Ed25519 key is %d bytes", i, k.kid, ed25519.PublicKeySize)
			}
			k.key = ed25519.PublicKey(x)
		default:
			continue
		}
		out = append(out, k)
	}
	return out, nil
}

// jwksSource holds the keys of a JWKS and re-reads them every refresh, and sooner when a
// token names a key id it does not know (at most once a minute per key id, as Kafka). A read
// happens on its own goroutine, which ends with the read; until it ends, the keys in hand
// keep serving. A read that fails (after its retries) keeps them too.
type jwksSource struct {
	url                          string
	fetch                        func(context.Context) ([]byte, error)
	refresh, backoff, backoffMax time.Duration
	log                          *slog.Logger

	mu struct {
		sync.Mutex
		keys    []jwk
		loaded  time.Time            // when the keys in hand were asked for
		loading bool                 // a read is under way
		asked   map[string]time.Time // unknown key ids, when each last brought a read forward
	}
}

// missingKidInterval is how often one unknown key id may bring a read forward; longer key ids
// never do (Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS and MISSING_KEY_ID_MAX_KEY_LENGTH).
const (
	missingKidInterval = time.Minute
	missingKidMaxLen   = 1000
)

// load reads the JWKS now, with retries, and keeps its keys.
func (s *jwksSource) load(ctx context.Context, now time.Time) error {
	b, err := s.fetchRetrying(ctx)
	if err == nil {
		var keys []jwk
		if keys, err = parseJWKS(b); err == nil && len(keys) == 0 {
			err = errors.New("the JWKS holds no key Gregor verifies signatures with (RSA, EC P-256/P-384/P-521, Ed25519)")
		}
		if err == nil {
			s.mu.Lock()
			s.mu.keys = keys
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	s.mu.loaded, s.mu.loading = now, false
	s.mu.Unlock()
	return err
}

// fetchRetrying reads the JWKS, retrying with a backoff doubling from backoff, for at most
// backoffMax in all (Kafka's sasl.oauthbearer.jwks.endpoint.retry.backoff.* keys).
func (s *jwksSource) fetchRetrying(ctx context.Context) ([]byte, error) {
	return retryBackoff(ctx, s.backoff, s.backoffMax, s.fetch)
}

// reloadLocked starts a read on its own goroutine unless one is under way. s.mu is held.
func (s *jwksSource) reloadLocked(now time.Time) {
	if s.mu.loading {
		return
	}
	s.mu.loading = true
	go func() {
		if err := s.load(context.Background(), now); err != nil {
			s.log.Warn("reading the OAUTHBEARER JWKS failed; the keys read before keep serving", "url", s.url, "err", err)
		}
	}()
}

// verificationKey finds the key that verifies t's signature, at now.
func (s *jwksSource) verificationKey(t *jwt.Token, now time.Time) (any, error) {
	alg, _ := t.Header["alg"].(string)
	kid, hasKid := t.Header["kid"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.mu.loaded) >= s.refresh {
		s.reloadLocked(now)
	}
	for _, k := range s.mu.keys {
		if (!hasKid || k.kid == kid) && k.fits(alg) {
			return k.key, nil
		}
	}
	if hasKid && len(kid) <= missingKidMaxLen {
		if s.mu.asked == nil {
			s.mu.asked = map[string]time.Time{}
		}
		if last, ok := s.mu.asked[kid]; !ok || now.Sub(last) >= missingKidInterval {
			s.mu.asked[kid] = now
			s.reloadLocked(now)
		}
		return nil, fmt.Errorf("no key of the JWKS has kid %q and fits alg %s", kid, alg)
	}
	return nil, fmt.Errorf("no key of the JWKS fits alg %s", alg)
}
