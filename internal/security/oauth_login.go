package security

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The client side of signed OAUTHBEARER tokens: Kafka's OAuthBearerLoginCallbackHandler
// (KIP-768), for the broker's own connections (inter-broker, controller) and the
// command-line tools, which then get their tokens from the identity provider instead of
// making unsecured ones. sasl.login.callback.handler.class chooses it (the listener's
// oauthbearer.-prefixed key first, as every sasl.oauthbearer.* key here); it reads:
//
//	sasl.oauthbearer.token.endpoint.url    https:// (or http://): the token endpoint, asked
//	                                       for an OAuth 2 client_credentials grant (RFC 6749
//	                                       4.4) with the JAAS line's clientId and clientSecret
//	                                       (HTTP Basic) and scope; file://: a file holding a
//	                                       token, read again at each refresh
//	sasl.login.connect.timeout.ms          each request's connect and answer waits (unset:
//	sasl.login.read.timeout.ms             10 s each here, where Java's are unbounded)
//	sasl.login.retry.backoff.ms            a failed request is tried again after waits
//	sasl.login.retry.backoff.max.ms        doubling from the first, for at most the second
//	                                       in all; an answer asking again cannot change (400,
//	                                       401, 403, 404, ...: Kafka's list) is not retried
//	sasl.oauthbearer.sub.claim.name        the claim naming the principal (sub)
//	JAAS options                           clientId, clientSecret, scope, extension_<name>
//	                                       (SASL extensions), ssl.* (TLS towards the endpoint)
//
// A token is checked as Kafka's client-side validator checks it: a JWT of three parts whose
// payload has a numeric exp and the principal claim as a non-blank string (the signature is
// the broker's to check). It serves every authentication until 80% of its lifetime has
// passed (Kafka's default sasl.login.refresh.window.factor); the next authentication after
// that, a new connection or a KIP-368 re-authentication, fetches another. The first token
// is fetched when the client is built, so a login that cannot work stops start-up (or the
// tool) with its reason, as Kafka's login does.
//
// mu guards the token in hand and is held across a fetch, so connections authenticating
// together wait for one token instead of each asking for their own.

// The classes of Kafka's login callback handler for signed tokens: Kafka 4's name and the
// name Kafka 3.1 to 3.9 gave it.
const (
	OAuthBearerLoginCallbackHandler   = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
	oauthBearerLoginCallbackHandler31 = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
)

// tokenRefreshFactor is the share of a token's lifetime after which another is fetched
// (Kafka's default sasl.login.refresh.window.factor).
const tokenRefreshFactor = 0.8

// defaultLoginTimeout bounds a token request's connect and answer when
// sasl.login.connect.timeout.ms / sasl.login.read.timeout.ms are unset.
const defaultLoginTimeout = 10 * time.Second

// oauthLogin makes the client message of an OAUTHBEARER authentication: unsecuredLogin's
// tokens of its own, or tokenLogin's from an identity provider.
type oauthLogin interface {
	clientMessage(now time.Time) ([]byte, error)
	principal() string
}

// newOAuthLogin is the login sasl.login.callback.handler.class names: none, Kafka's
// unsecured login; OAuthBearerLoginCallbackHandler, tokens from the identity provider.
func newOAuthLogin(values, setKey map[string]string, j JAAS, jaasKey string) (oauthLogin, error) {
	get := func(key string) (string, string) { return loginValue(values, setKey, key) }
	switch h, k := get("sasl.login.callback.handler.class"); h {
	case "":
		return newUnsecuredLogin(j)
	case OAuthBearerLoginCallbackHandler, oauthBearerLoginCallbackHandler31:
		l, err := newTokenLogin(get, j, jaasKey)
		if err != nil {
			return nil, err
		}
		if _, err := l.clientMessage(time.Now()); err != nil {
			return nil, err
		}
		return l, nil
	default:
		return nil, fmt.Errorf("%s: %q is not served by Gregor (unset for unsecured tokens, or %s for tokens from an identity provider)", k, h, OAuthBearerLoginCallbackHandler)
	}
}

// loginValue is key's value for OAUTHBEARER: the oauthbearer.-prefixed form (a listener's
// mechanism key) first, then the plain key; and the key a user wrote.
func loginValue(values, setKey map[string]string, key string) (value, from string) {
	for _, k := range []string{"oauthbearer." + key, key} {
		if v, ok := values[k]; ok {
			from = k
			if s := setKey[k]; s != "" {
				from = s
			}
			return strings.TrimSpace(v), from
		}
	}
	return "", key
}

// tokenLogin is OAuthBearerLoginCallbackHandler: tokens from an identity provider.
type tokenLogin struct {
	source     func(ctx context.Context) (string, error) // one token, with the retries
	timeout    time.Duration                             // bounds one source call
	subClaim   string
	extensions map[string]string
	what       string // where tokens come from, for errors

	mu struct {
		sync.Mutex
		token     string
		principal string
		refreshAt time.Time
	}
}

func newTokenLogin(get func(string) (string, string), j JAAS, jaasKey string) (*tokenLogin, error) {
	l := &tokenLogin{subClaim: "sub", extensions: map[string]string{}}
	if v, _ := get("sasl.oauthbearer.sub.claim.name"); v != "" {
		l.subClaim = v
	}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "extension_"); ok {
			if name == "auth" || !oauthKeyRE.MatchString(name) || !oauthValueRE.MatchString(v) {
				return nil, fmt.Errorf("%s: %s is not a valid SASL extension", jaasKey, k)
			}
			l.extensions[name] = v
		}
	}
	raw, urlKey := get("sasl.oauthbearer.token.endpoint.url")
	handlerKey := strings.TrimSuffix(urlKey, "sasl.oauthbearer.token.endpoint.url") + "sasl.login.callback.handler.class"
	if raw == "" {
		return nil, fmt.Errorf("%s is %s but %s is not set: tokens come from there", handlerKey, OAuthBearerLoginCallbackHandler, urlKey)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a URL: %v", urlKey, raw, err)
	}
	l.what = raw
	var connect, read, backoff, backoffMax time.Duration
	for _, d := range []struct {
		key  string
		dflt int64
		to   *time.Duration
	}{
		{"sasl.login.connect.timeout.ms", defaultLoginTimeout.Milliseconds(), &connect},
		{"sasl.login.read.timeout.ms", defaultLoginTimeout.Milliseconds(), &read},
		{"sasl.login.retry.backoff.ms", 100, &backoff},
		{"sasl.login.retry.backoff.max.ms", 10000, &backoffMax},
	} {
		if *d.to, err = durationValue(get, d.key, d.dflt, time.Millisecond); err != nil {
			return nil, err
		}
	}
	l.timeout = backoffMax + 4*(connect+read)
	switch u.Scheme {
	case "file":
		path := u.Path
		l.source = func(context.Context) (string, error) {
			b, err := os.ReadFile(path)
			return strings.TrimSpace(string(b)), err
		}
	case "https", "http":
		id, secret := strings.TrimSpace(j.Options["clientId"]), strings.TrimSpace(j.Options["clientSecret"])
		if id == "" || secret == "" {
			return nil, fmt.Errorf("%s: a token endpoint (%s) needs the JAAS options clientId and clientSecret", jaasKey, urlKey)
		}
		tlsCfg, err := jaasTLS(j, jaasKey)
		if err != nil {
			return nil, err
		}
		hc := &http.Client{Transport: &http.Transport{
			TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: connect}).DialContext,
			TLSHandshakeTimeout: connect, ResponseHeaderTimeout: read,
		}}
		form := url.Values{"grant_type": {"client_credentials"}}
		if s := strings.TrimSpace(j.Options["scope"]); s != "" {
			form.Set("scope", s)
		}
		grant := tokenGrant{hc: hc, url: raw, body: form.Encode(),
			auth: "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret)), read: read}
		l.source = func(ctx context.Context) (string, error) {
			b, err := retryBackoff(ctx, backoff, backoffMax, grant.post)
			if err != nil {
				return "", err
			}
			return accessToken(b)
		}
	default:
		return nil, fmt.Errorf("%s: %q is neither a file:// nor an https:// URL", urlKey, raw)
	}
	return l, nil
}

func (l *tokenLogin) principal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.principal
}

// clientMessage carries the token in hand, or a new one once the one in hand is due for
// refresh.
func (l *tokenLogin) clientMessage(now time.Time) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.token == "" || !now.Before(l.mu.refreshAt) {
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		tok, err := l.source(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("OAUTHBEARER login: no token from %s: %w", l.what, err)
		}
		p, exp, err := checkLoginToken(tok, l.subClaim)
		if err != nil {
			return nil, fmt.Errorf("OAUTHBEARER login: the token from %s is not usable: %w", l.what, err)
		}
		l.mu.token, l.mu.principal = tok, p
		l.mu.refreshAt = now.Add(time.Duration(float64(exp.Sub(now)) * tokenRefreshFactor))
	}
	return bearerMessage(l.mu.token, l.extensions), nil
}

// checkLoginToken checks tok as Kafka's client-side validator does and returns its
// principal and expiry.
func checkLoginToken(tok, subClaim string) (string, time.Time, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", time.Time{}, fmt.Errorf("not a JWT of three parts but %d", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("its payload is not base64url: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", time.Time{}, fmt.Errorf("its payload is not a JSON object: %v", err)
	}
	exp, ok := claims["exp"].(float64)
	if !ok {
		return "", time.Time{}, errors.New("it has no numeric exp claim")
	}
	if iat, present := claims["iat"]; present {
		if _, ok := iat.(float64); !ok {
			return "", time.Time{}, errors.New("its iat claim is not a number")
		}
	}
	sub, _ := claims[subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("its %s claim is not a non-blank string", subClaim)
	}
	return sub, time.UnixMilli(int64(exp * 1000)), nil
}

// tokenGrant is one client_credentials request to a token endpoint.
type tokenGrant struct {
	hc        *http.Client
	url, body string
	auth      string
	read      time.Duration // the answer's body, as its headers, within this
}

// unretryableStatus are the answers asking again cannot change (Kafka's
// HttpAccessTokenRetriever list); any other failure is tried again.
var unretryableStatus = []int{400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505}

func (g tokenGrant) post(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(g.body))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnretryable, err)
	}
	req.Header.Set("Authorization", g.auth)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := g.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	t := time.AfterFunc(g.read, func() { resp.Body.Close() })
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	t.Stop()
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		if len(b) == 0 {
			return nil, fmt.Errorf("POST %s: %s with an empty body", g.url, resp.Status)
		}
		return b, nil
	case slices.Contains(unretryableStatus, resp.StatusCode):
		return nil, fmt.Errorf("%w: POST %s: %s %s", errUnretryable, g.url, resp.Status, providerError(b))
	default:
		return nil, fmt.Errorf("POST %s: %s %s", g.url, resp.Status, providerError(b))
	}
}

// providerError is the gist of an identity provider's error body: OAuth's error and
// error_description (RFC 6749 5.2) when it has them, else the body, shortened.
func providerError(b []byte) string {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return "{" + e.Error + " - " + e.Description + "}"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// accessToken is the access_token of a token endpoint's answer.
func accessToken(b []byte) (string, error) {
	var r struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("the token endpoint's answer is not JSON: %v", err)
	}
	if strings.TrimSpace(r.AccessToken) == "" {
		return "", errors.New("the token endpoint's answer has no access_token")
	}
	return strings.TrimSpace(r.AccessToken), nil
}
