package security

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xdg-go/scram"

	"github.com/gregor-project/gregor/internal/authz"
)

// The server side of a SCRAM exchange (RFC 5802), as Kafka's ScramSaslServer runs it:
//
//	client-first   gs2-header client-first-bare      "n,,n=alice,r=<client nonce>"
//	server-first   "r=<client nonce><server nonce>,s=<salt>,i=<iterations>"
//	client-final   "c=<base64 gs2-header>,r=<nonce>,p=<proof>"
//	server-final   "v=<server signature>"
//
// Channel binding is not offered (a gs2 flag "p" is refused); an authorization id, when
// given, must be the user. As Kafka's server, the client-final nonce must end with the nonce
// the server sent (not equal it): librdkafka before 2.6.1 sends the client's nonce twice
// there, and Kafka's brokers accept it, so Gregor does too; the proof, computed over the
// messages as sent, is what authenticates. The one extension of the client-first message is
// Kafka's tokenauth=true (delegation tokens, KIP-48): the user is then a token id, its
// password the token's HMAC, and the client is authenticated as the token's owner until the
// token expires (TokenCredentials); any other extension is refused, as Kafka refuses it.

type scramExchange struct {
	m        *scramMechanism
	stage    int    // 0: expects client-first, 1: expects client-final
	username string // decoded saslname
	gs2      string // the gs2 header as sent
	first    string // client-first-bare
	server1  string // server-first
	nonce    string // client nonce + server nonce
	cred     ScramCredential
	token    bool            // tokenauth=true: username is a delegation token's id
	owner    authz.Principal // the token's owner
	expires  time.Time       // the token's expiry
}

func (e *scramExchange) user() string                { return e.username }
func (e *scramExchange) credentialExpiry() time.Time { return e.expires }

// tokenOwner is the principal of a delegation token's authentication.
func (e *scramExchange) tokenOwner() (authz.Principal, bool) { return e.owner, e.token }

// TokenCredentials finds a delegation token's SCRAM credential for a mechanism (derived from
// its HMAC), its owner and its expiry, unless the token is unknown or expired at now. A
// ScramCredentials that also implements it serves tokenauth=true. Safe for concurrent use.
type TokenCredentials interface {
	TokenCredential(tokenID, mechanism string, now time.Time) (cred ScramCredential, owner authz.Principal, expires time.Time, ok bool)
}

func (e *scramExchange) fail() error {
	return fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism %s", errAuthFailed, e.m.mech)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

func (e *scramExchange) step(in []byte, now time.Time) ([]byte, bool, error) {
	msg := string(in)
	if e.stage == 0 {
		e.stage = 1
		return e.clientFirst(msg, now)
	}
	return e.clientFinal(msg)
}

func (e *scramExchange) clientFirst(msg string, now time.Time) ([]byte, bool, error) {
	// gs2-header: cbind-flag "," [authzid] ","
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, false, malformed("Invalid SCRAM client first message")
	}
	switch flag {
	case "n", "y":
	default:
		return nil, false, malformed("SCRAM channel binding is not supported")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false, malformed("Invalid SCRAM client first message")
	}
	e.gs2 = flag + "," + authz + ","
	e.first = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, malformed("Invalid SCRAM client first message")
	}
	for _, ext := range attrs[2:] {
		k, v, _ := strings.Cut(ext, "=")
		if k != "tokenauth" {
			return nil, false, fmt.Errorf("%w: Authentication failed: unsupported SCRAM extension %q", errAuthFailed, k)
		}
		e.token = strings.EqualFold(v, "true")
	}
	user, ok := saslName(attrs[0][2:])
	if !ok || user == "" {
		return nil, false, malformed("Invalid SCRAM username")
	}
	if authz != "" {
		a, ok := saslName(strings.TrimPrefix(authz, "a="))
		if !strings.HasPrefix(authz, "a=") || !ok || a != user {
			return nil, false, fmt.Errorf("%w: Authentication failed: Client requested an authorization id that is different from username", errAuthFailed)
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" {
		return nil, false, malformed("Invalid SCRAM client nonce")
	}
	e.username = user
	var c ScramCredential
	found := false
	switch tc, ok := e.m.creds.(TokenCredentials); {
	case e.token && ok:
		c, e.owner, e.expires, found = tc.TokenCredential(user, e.m.mech, now)
	case e.token:
	case e.m.creds != nil:
		c, found = e.m.creds.ScramCredential(user, e.m.mech)
	}
	if !found {
		return nil, false, e.fail()
	}
	e.cred = c
	var sn [18]byte
	if _, err := rand.Read(sn[:]); err != nil {
		return nil, false, fmt.Errorf("SCRAM server nonce: %w", err)
	}
	e.nonce = cnonce + base64.RawURLEncoding.EncodeToString(sn[:])
	e.server1 = "r=" + e.nonce + ",s=" + base64.StdEncoding.EncodeToString(c.Salt) + ",i=" + strconv.Itoa(c.Iterations)
	return []byte(e.server1), false, nil
}

func (e *scramExchange) clientFinal(msg string) ([]byte, bool, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, false, malformed("Invalid SCRAM client final message")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, malformed("Invalid SCRAM client final message")
	}
	if attrs[0][2:] != base64.StdEncoding.EncodeToString([]byte(e.gs2)) {
		return nil, false, malformed("SCRAM channel binding does not match the first message")
	}
	if !strings.HasSuffix(attrs[1][2:], e.nonce) {
		return nil, false, malformed("Invalid client nonce in the final client message")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, false, malformed("Invalid SCRAM proof")
	}
	auth := []byte(e.first + "," + e.server1 + "," + withoutProof)
	sig := e.hmac(e.cred.StoredKey, auth)
	if len(proof) != len(sig) {
		return nil, false, e.fail()
	}
	clientKey := make([]byte, len(sig))
	for j := range sig {
		clientKey[j] = proof[j] ^ sig[j]
	}
	h := e.m.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), e.cred.StoredKey) != 1 {
		return nil, false, e.fail()
	}
	return []byte("v=" + base64.StdEncoding.EncodeToString(e.hmac(e.cred.ServerKey, auth))), true, nil
}

func (e *scramExchange) hmac(key, data []byte) []byte {
	m := hmac.New(e.m.hash, key)
	m.Write(data)
	return m.Sum(nil)
}

// saslName decodes RFC 5802's saslname: "=2C" is ',' and "=3D" is '='; any other '=' is
// invalid.
func saslName(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// ScramCredentialFor derives the credential a server keeps of password for a SCRAM
// mechanism ("SCRAM-SHA-256", "SCRAM-SHA-512"): the salted password with salt and
// iterations, and its StoredKey and ServerKey (RFC 5802). A delegation token's credential is
// this of its password, the HMAC in base64.
func ScramCredentialFor(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	h := scram.SHA256
	switch mechanism {
	case ScramSHA256:
	case ScramSHA512:
		h = scram.SHA512
	default:
		return ScramCredential{}, fmt.Errorf("security: %q is not a SCRAM mechanism", mechanism)
	}
	cl, err := h.NewClient("token", password, "")
	if err != nil {
		return ScramCredential{}, err
	}
	sc := cl.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	return ScramCredential{Salt: salt, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey, Iterations: iterations}, nil
}
