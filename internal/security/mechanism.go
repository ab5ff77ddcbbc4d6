package security

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"
)

// SASL mechanism names, as clients send them in SaslHandshake.
const (
	Plain        = "PLAIN"
	ScramSHA256  = "SCRAM-SHA-256"
	ScramSHA512  = "SCRAM-SHA-512"
	OAuthBearer  = "OAUTHBEARER"
	GSSAPI       = "GSSAPI"
	plainLoginJA = "org.apache.kafka.common.security.plain.PlainLoginModule"
	oauthLoginJA = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// ScramCredential is a user's stored SCRAM credential for one mechanism (Kafka's
// ScramCredential): never the password, only what verifies a proof of it.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// ScramCredentials finds a user's SCRAM credential (the broker's metadata image, where
// AlterUserScramCredentials stores them). Safe for concurrent use.
type ScramCredentials interface {
	ScramCredential(user, mechanism string) (ScramCredential, bool)
}

// errAuthFailed is a failed authentication: wrong password, unknown user, a bad proof. The
// message the client gets is the wrapping error's.
var errAuthFailed = errors.New("security: authentication failed")

// errMalformed is a SASL token that does not parse.
var errMalformed = errors.New("security: malformed SASL token")

// mechanism serves one SASL mechanism on a listener.
type mechanism interface {
	start() exchange
}

// exchange is one authentication of one connection: tokens in, tokens out.
type exchange interface {
	// step takes the client's next token, arriving at now, and returns the server's answer;
	// done once the client is authenticated as user. An error ends the exchange
	// (errAuthFailed or errMalformed wrapped with the message for the client).
	step(in []byte, now time.Time) (out []byte, done bool, err error)
	user() string
	// credentialExpiry is when the credential the client authenticated with stops being
	// valid (an OAUTHBEARER token's exp); zero when it does not expire. KIP-368: the session
	// ends then at the latest, whatever connections.max.reauth.ms says.
	credentialExpiry() time.Time
}

// plainMechanism is PLAIN (RFC 4616) with the users of the listener's JAAS configuration,
// as Kafka's PlainLoginModule and PlainServerCallbackHandler serve it: each option
// user_<name>="<password>" is a user.
type plainMechanism struct {
	users map[string]string
}

func newPlain(j JAAS) (*plainMechanism, error) {
	if j.LoginModule != plainLoginJA {
		return nil, fmt.Errorf("PLAIN needs %s, not %s", plainLoginJA, j.LoginModule)
	}
	m := &plainMechanism{users: map[string]string{}}
	for k, v := range j.Options {
		if u, ok := strings.CutPrefix(k, "user_"); ok {
			m.users[u] = v
		}
	}
	return m, nil
}

func (m *plainMechanism) start() exchange { return &plainExchange{m: m} }

type plainExchange struct {
	m        *plainMechanism
	username string
}

func (e *plainExchange) user() string                { return e.username }
func (e *plainExchange) credentialExpiry() time.Time { return time.Time{} }

func (e *plainExchange) step(in []byte, _ time.Time) ([]byte, bool, error) {
	// authzid NUL authcid NUL passwd
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, false, fmt.Errorf("%w: Invalid SASL/PLAIN response: expected 3 tokens, got %d", errMalformed, len(parts))
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, false, fmt.Errorf("%w: Authentication failed: username not specified", errAuthFailed)
	}
	if len(pass) == 0 {
		return nil, false, fmt.Errorf("%w: Authentication failed: password not specified", errAuthFailed)
	}
	want, ok := e.m.users[user]
	// Compare against something even for an unknown user, so timing tells nothing.
	match := subtle.ConstantTimeCompare(pass, []byte(want)) == 1
	if !ok || !match {
		return nil, false, fmt.Errorf("%w: Authentication failed: Invalid username or password", errAuthFailed)
	}
	if authzid != "" && authzid != user {
		return nil, false, fmt.Errorf("%w: Authentication failed: Client requested an authorization id that is different from username", errAuthFailed)
	}
	e.username = user
	return nil, true, nil
}

// scramMechanism is SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677) against the
// credentials in the metadata log, as Kafka's ScramSaslServer serves it (scram.go).
type scramMechanism struct {
	mech  string
	creds ScramCredentials
	hash  func() hash.Hash
}

func newScram(mech string, creds ScramCredentials) (*scramMechanism, error) {
	h := sha256.New
	if mech == ScramSHA512 {
		h = sha512.New
	}
	return &scramMechanism{mech: mech, creds: creds, hash: h}, nil
}

func (m *scramMechanism) start() exchange { return &scramExchange{m: m} }
