package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"
)

// selfSigned is a key pair for cn with DNS names dns.
func selfSigned(t testing.TB, cn string, dns ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: dns}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A new key store keeps the subject and the subject alternative names of the one in
// service, unless ssl.allow.dn.changes / ssl.allow.san.changes say otherwise.
func TestReconfigureCompatible(t *testing.T) {
	old := selfSigned(t, "broker", "a.example", "b.example")
	cfg := func(allowDN, allowSAN string) *listenerConfig {
		return &listenerConfig{
			values: map[string]string{"ssl.allow.dn.changes": allowDN, "ssl.allow.san.changes": allowSAN},
			setKey: map[string]string{"ssl.keystore.location": "listener.name.ssl.ssl.keystore.location"},
		}
	}
	for _, tc := range []struct {
		name              string
		next              tls.Certificate
		allowDN, allowSAN string
		says              string // "" when accepted
	}{
		{"same subject and names, new key", selfSigned(t, "broker", "b.example", "a.example"), "false", "false", ""},
		{"another subject", selfSigned(t, "other", "a.example", "b.example"), "false", "false", "DistinguishedName does not match: existing={CN=broker}, new={CN=other}"},
		{"another subject, allowed", selfSigned(t, "other", "a.example", "b.example"), "true", "false", ""},
		{"fewer names", selfSigned(t, "broker", "a.example"), "false", "false", "SubjectAltNames do not match"},
		{"fewer names, allowed", selfSigned(t, "broker", "a.example"), "false", "true", ""},
	} {
		err := compatible(old, tc.next, cfg(tc.allowDN, tc.allowSAN))
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says) || !strings.HasPrefix(err.Error(), "listener.name.ssl.ssl.keystore.location: ")):
			t.Errorf("%s: %v, want an error naming the key and saying %q", tc.name, err, tc.says)
		}
	}
}
