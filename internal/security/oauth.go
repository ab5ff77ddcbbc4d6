package security

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
)

// OAUTHBEARER (RFC 7628; KIP-255, KIP-768) as Kafka's OAuthBearerSaslServer serves it. The
// client sends one message:
//
//	n,[a=<authzid>],\x01auth=Bearer <token>\x01[<key>=<value>\x01]*\x01
//
// a gs2 header without channel binding, the token, and SASL extensions. The token goes to the
// listener's validator: the unsecured one (alg none JWS, Kafka's
// OAuthBearerUnsecuredValidatorCallbackHandler, the default) or, with
// listener.name.<l>.oauthbearer.sasl.server.callback.handler.class set to Kafka's
// OAuthBearerValidatorCallbackHandler, signed JWTs checked against a JWKS. A valid token
// authenticates its principal at once (an empty answer); an authzid must equal that
// principal. An invalid one is answered, not failed: the server sends a JSON error
// ({"status":"invalid_token"}, or "insufficient_scope" with the scope required), the client
// acknowledges it with a single \x01, and only then does the exchange fail with
// SASL_AUTHENTICATION_FAILED, the JSON as its message. Any other message after the error
// is taken as a new client message, as Kafka does. Both validators accept every extension.
//
// The session lasts until the token's exp at the latest (sessionExpiry): KIP-368's
// re-authentication brings a fresh token.

// oauthToken is a validated token: who it names and until when.
type oauthToken struct {
	principal string
	expires   time.Time
}

// oauthInvalid is a token a validator refused: the RFC 7628 error status (invalid_token,
// insufficient_scope), the scope that was required, and why (for the broker's log only).
type oauthInvalid struct {
	status, scope string
	reason        string
}

// tokenValidator validates a bearer token at now. Safe for concurrent use.
type tokenValidator interface {
	validate(token string, now time.Time) (oauthToken, *oauthInvalid)
}

type oauthMechanism struct {
	v   tokenValidator
	log *slog.Logger
}

func (m *oauthMechanism) start() exchange { return &oauthExchange{m: m} }

type oauthExchange struct {
	m        *oauthMechanism
	errorMsg string // the JSON error sent, while the client's \x01 is awaited
	tok      oauthToken
}

func (e *oauthExchange) user() string                { return e.tok.principal }
func (e *oauthExchange) credentialExpiry() time.Time { return e.tok.expires }

// oauthInvalidCredentials is Kafka's answer to a client message it cannot read.
var oauthInvalidCredentials = fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism %s", errAuthFailed, OAuthBearer)

func (e *oauthExchange) step(in []byte, now time.Time) ([]byte, bool, error) {
	if len(in) == 1 && in[0] == 0x01 && e.errorMsg != "" {
		return nil, false, fmt.Errorf("%w: %s", errAuthFailed, e.errorMsg)
	}
	e.errorMsg = ""
	r, err := parseOAuthClientMessage(in)
	if err != nil {
		e.m.log.Debug("OAUTHBEARER client message refused", "reason", err)
		return nil, false, oauthInvalidCredentials
	}
	tok, bad := e.m.v.validate(r.token, now)
	if bad != nil {
		e.errorMsg = oauthJSONError(bad.status, bad.scope)
		e.m.log.Debug("OAUTHBEARER token refused", "reason", bad.reason)
		return []byte(e.errorMsg), false, nil
	}
	if r.authzid != "" && r.authzid != tok.principal {
		return nil, false, fmt.Errorf("%w: Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", errAuthFailed, r.authzid, tok.principal)
	}
	e.tok = tok
	return []byte{}, true, nil
}

// oauthJSONError is the server's error message of RFC 7628 section 3.2.2, written as Kafka
// writes it.
func oauthJSONError(status, scope string) string {
	s := fmt.Sprintf(`{"status":"%s"`, status)
	if scope != "" {
		s += fmt.Sprintf(`, "scope":"%s"`, scope)
	}
	return s + "}"
}

// oauthClientMessage is a parsed OAUTHBEARER client message.
type oauthClientMessage struct {
	authzid    string
	token      string
	extensions map[string]string
}

// The client message's grammar, as Kafka's OAuthBearerClientInitialResponse reads it: a
// saslname is any 7-bit character but NUL, ',' and '=' (those two escaped =2C and =3D), a key
// is letters, a value printable ASCII or blanks.
var (
	oauthMessageRE = regexp.MustCompile("^n,(?:a=((?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01$")
	oauthAuthRE    = regexp.MustCompile(`^(\w+) +([-_.a-zA-Z0-9]+)$`)
	oauthKeyRE     = regexp.MustCompile(`^[A-Za-z]+$`)
	oauthValueRE   = regexp.MustCompile("^[\x21-\x7E \t\r\n]+$")
)

func parseOAuthClientMessage(in []byte) (oauthClientMessage, error) {
	var r oauthClientMessage
	m := oauthMessageRE.FindSubmatch(in)
	if m == nil {
		return r, fmt.Errorf("Invalid OAUTHBEARER client first message")
	}
	r.authzid = string(m[1])
	props := map[string]string{}
	for _, kv := range strings.Split(string(m[2]), "\x01") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		props[k] = v
	}
	auth, ok := props["auth"]
	if !ok {
		return r, fmt.Errorf("Invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	delete(props, "auth")
	for k, v := range props {
		if !oauthKeyRE.MatchString(k) {
			return r, fmt.Errorf("Extension name %s is invalid", k)
		}
		if !oauthValueRE.MatchString(v) {
			return r, fmt.Errorf("Extension value (%s) for extension %s is invalid", v, k)
		}
	}
	a := oauthAuthRE.FindStringSubmatch(auth)
	if a == nil {
		return r, fmt.Errorf("Invalid OAUTHBEARER client first message: invalid 'auth' format")
	}
	if !strings.EqualFold(a[1], "bearer") {
		return r, fmt.Errorf("Invalid scheme in OAUTHBEARER client first message: %s", a[1])
	}
	r.token, r.extensions = a[2], props
	return r, nil
}

// oauthMessage is the client message for token (the other side, for the broker's own
// connections and tests).
func oauthMessage(token string) []byte { return bearerMessage(token, nil) }

// newOAuth builds OAUTHBEARER for a listener: the validator chosen by
// <mechanism>.sasl.server.callback.handler.class, configured from the JAAS line and the
// sasl.oauthbearer.* keys.
func newOAuth(c *listenerConfig, log *slog.Logger) (*oauthMechanism, error) {
	jaasKey := c.mechKey(OAuthBearer, "sasl.jaas.config")
	text, ok := c.values["oauthbearer.sasl.jaas.config"]
	if !ok {
		return nil, fmt.Errorf("listener %s: OAUTHBEARER is enabled (%s) but %s is not set: it needs at least %q", c.name, c.setKey["sasl.enabled.mechanisms"], jaasKey, oauthLoginJA+" required ;")
	}
	j, err := ParseJAAS(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", jaasKey, err)
	}
	if j.LoginModule != oauthLoginJA {
		return nil, fmt.Errorf("%s: OAUTHBEARER needs %s, not %s", jaasKey, oauthLoginJA, j.LoginModule)
	}
	m := &oauthMechanism{log: log}
	switch h := c.values["oauthbearer.sasl.server.callback.handler.class"]; h {
	case "":
		m.v, err = newUnsecuredValidator(j, jaasKey)
	case OAuthBearerValidatorCallbackHandler:
		m.v, err = newJWKSValidator(c, j, jaasKey, log)
	default:
		return nil, fmt.Errorf("%s: %q is not served by Gregor (unset for unsecured tokens, or %s for signed tokens checked against a JWKS)", c.mechKey(OAuthBearer, "sasl.server.callback.handler.class"), h, OAuthBearerValidatorCallbackHandler)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// OAuthBearerValidatorCallbackHandler is Kafka's class validating signed OAUTHBEARER tokens
// against a JWKS (KIP-768).
const OAuthBearerValidatorCallbackHandler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

// mechKey is the per-listener, per-mechanism configuration key of key, as a user writes it.
func (c *listenerConfig) mechKey(mech, key string) string {
	if k, ok := c.setKey[strings.ToLower(mech)+"."+key]; ok && strings.HasPrefix(k, "listener.name.") {
		return k
	}
	return "listener.name." + strings.ToLower(c.name) + "." + strings.ToLower(mech) + "." + key
}

// oauthValue is a sasl.oauthbearer.* value for OAUTHBEARER, as Kafka's handlers read it: the
// mechanism-prefixed form (oauthbearer.<key>) first, then the listener's or broker's key; and
// the configuration key it came from.
func (c *listenerConfig) oauthValue(key string) (value, setKey string) {
	if v, ok := c.values["oauthbearer."+key]; ok {
		return v, c.mechKey(OAuthBearer, key)
	}
	if k := c.setKey[key]; k != "" {
		return c.values[key], k
	}
	return c.values[key], key
}
