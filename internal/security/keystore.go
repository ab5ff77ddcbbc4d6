package security

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// Key and trust stores, as Kafka's DefaultSslEngineFactory reads them:
//
//   - PEM: ssl.keystore.location is a file with the private key (PKCS#8 "PRIVATE KEY", or
//     PKCS#1/SEC1 "RSA PRIVATE KEY"/"EC PRIVATE KEY") and the certificate chain, leaf first;
//     or the key and chain inline in ssl.keystore.key and ssl.keystore.certificate.chain.
//     A trust store is a file of certificates (ssl.truststore.location) or the certificates
//     inline (ssl.truststore.certificates).
//   - PKCS12: the store's password decrypts both the key and the certificates.
//   - JKS: Java's key store; the first private key entry (in alias order) is the key, its
//     password ssl.key.password or, when unset, the store's password. Every trusted
//     certificate entry of a trust store is trusted (and a trust store's private key
//     entries' chains too, as Java's trust manager reads them).

// storeSpec names where a store comes from, and the configuration keys that said so (for
// errors that name what the user wrote).
type storeSpec struct {
	typ         string // JKS, PKCS12 or PEM
	location    string // path, "" when inline or absent
	password    string
	keyPassword string // ssl.key.password (key stores only)
	inlineKey   string // PEM only
	inlineChain string // PEM only (certificate chain for a key store, certificates for a trust store)

	locationKey, passwordKey, keyPasswordKey, inlineKeyKey, inlineChainKey string
}

// configured reports whether the store is given at all.
func (s storeSpec) configured() bool {
	return s.location != "" || s.inlineKey != "" || s.inlineChain != ""
}

// errStore is wrapped by every store loading error.
var errStore = errors.New("security: cannot load store")

func storeErr(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", errStore, key, fmt.Sprintf(format, args...))
}

// loadKeyPair reads a key store into a TLS certificate (chain and private key).
func loadKeyPair(s storeSpec) (tls.Certificate, error) {
	if s.location != "" && (s.inlineKey != "" || s.inlineChain != "") {
		// As Kafka's DefaultSslEngineFactory: one source, never one silently ignored.
		return tls.Certificate{}, storeErr(s.locationKey, "Both SSL key store location and separate private key are specified (%s, %s).", s.locationKey, s.inlineKeyKey)
	}
	if s.typ == "PEM" && s.password != "" {
		// As Kafka: a PEM file has no store password; an encrypted key's is ssl.key.password.
		return tls.Certificate{}, storeErr(s.passwordKey, "SSL key store password cannot be specified with PEM format, only key password may be specified.")
	}
	if s.location == "" {
		if s.typ != "PEM" {
			return tls.Certificate{}, storeErr(s.locationKey, "no key store location")
		}
		if s.inlineKey == "" || s.inlineChain == "" {
			return tls.Certificate{}, storeErr(s.inlineKeyKey, "an inline PEM key store needs both %s and %s", s.inlineKeyKey, s.inlineChainKey)
		}
		return pemKeyPair([]byte(s.inlineChain+"\n"+s.inlineKey), s.inlineKeyKey)
	}
	data, err := os.ReadFile(s.location)
	if err != nil {
		return tls.Certificate{}, storeErr(s.locationKey, "%v", err)
	}
	switch s.typ {
	case "PEM":
		return pemKeyPair(data, s.locationKey)
	case "PKCS12":
		key, leaf, cas, err := pkcs12.DecodeChain(data, s.password)
		if err != nil {
			return tls.Certificate{}, storeErr(s.locationKey, "PKCS12 key store %s: %v (is %s right?)", s.location, err, s.passwordKey)
		}
		return certificate(key, append([]*x509.Certificate{leaf}, cas...), s.locationKey)
	case "JKS":
		ks := keystore.New(keystore.WithOrderedAliases())
		if err := ks.Load(bytes.NewReader(data), []byte(s.password)); err != nil {
			return tls.Certificate{}, storeErr(s.locationKey, "JKS key store %s: %v (is %s right?)", s.location, err, s.passwordKey)
		}
		pass := s.keyPassword
		if pass == "" {
			pass = s.password
		}
		for _, alias := range ks.Aliases() {
			if !ks.IsPrivateKeyEntry(alias) {
				continue
			}
			e, err := ks.GetPrivateKeyEntry(alias, []byte(pass))
			if err != nil {
				return tls.Certificate{}, storeErr(s.keyPasswordKey, "JKS key entry %q of %s: %v", alias, s.location, err)
			}
			key, err := x509.ParsePKCS8PrivateKey(e.PrivateKey)
			if err != nil {
				return tls.Certificate{}, storeErr(s.locationKey, "JKS key entry %q of %s: %v", alias, s.location, err)
			}
			var chain []*x509.Certificate
			for _, c := range e.CertificateChain {
				cert, err := x509.ParseCertificate(c.Content)
				if err != nil {
					return tls.Certificate{}, storeErr(s.locationKey, "JKS key entry %q of %s: %v", alias, s.location, err)
				}
				chain = append(chain, cert)
			}
			return certificate(key, chain, s.locationKey)
		}
		return tls.Certificate{}, storeErr(s.locationKey, "JKS key store %s has no private key entry", s.location)
	}
	return tls.Certificate{}, storeErr(s.locationKey, "unknown key store type %q", s.typ)
}

// pemKeyPair reads a private key and certificate chain from PEM blocks in any order.
func pemKeyPair(data []byte, key string) (tls.Certificate, error) {
	var certs [][]byte
	var keyDER []byte
	var keyType string
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			certs = append(certs, b.Bytes)
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			keyDER, keyType = b.Bytes, b.Type
		case "ENCRYPTED PRIVATE KEY":
			return tls.Certificate{}, storeErr(key, "encrypted PEM private keys are not supported yet: give the key unencrypted (PKCS#8) or use a PKCS12 or JKS key store")
		}
	}
	if keyDER == nil {
		return tls.Certificate{}, storeErr(key, "no PEM private key found")
	}
	if len(certs) == 0 {
		return tls.Certificate{}, storeErr(key, "no PEM certificate found")
	}
	var pk crypto.PrivateKey
	var err error
	switch keyType {
	case "PRIVATE KEY":
		pk, err = x509.ParsePKCS8PrivateKey(keyDER)
	case "RSA PRIVATE KEY":
		pk, err = x509.ParsePKCS1PrivateKey(keyDER)
	default:
		pk, err = x509.ParseECPrivateKey(keyDER)
	}
	if err != nil {
		return tls.Certificate{}, storeErr(key, "private key: %v", err)
	}
	chain := make([]*x509.Certificate, 0, len(certs))
	for _, der := range certs {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return tls.Certificate{}, storeErr(key, "certificate: %v", err)
		}
		chain = append(chain, c)
	}
	return certificate(pk, chain, key)
}

// certificate assembles a TLS certificate, checking that the key belongs to the leaf.
func certificate(key crypto.PrivateKey, chain []*x509.Certificate, cfgKey string) (tls.Certificate, error) {
	if len(chain) == 0 {
		return tls.Certificate{}, storeErr(cfgKey, "the key has no certificate")
	}
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	if !ok {
		return tls.Certificate{}, storeErr(cfgKey, "unsupported private key type %T", key)
	}
	if eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(chain[0].PublicKey) {
		return tls.Certificate{}, storeErr(cfgKey, "the private key does not match the certificate %q", chain[0].Subject)
	}
	c := tls.Certificate{PrivateKey: key, Leaf: chain[0]}
	for _, x := range chain {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c, nil
}

// loadTrust reads a trust store into a certificate pool.
func loadTrust(s storeSpec) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	var data []byte
	if s.typ == "PEM" && s.password != "" {
		return nil, storeErr(s.passwordKey, "SSL trust store password cannot be specified for PEM format.")
	}
	if s.location != "" && s.inlineChain != "" {
		return nil, storeErr(s.locationKey, "Both SSL trust store location and separate trust certificates are specified (%s, %s).", s.locationKey, s.inlineChainKey)
	}
	if s.location == "" {
		if s.typ != "PEM" || s.inlineChain == "" {
			return nil, storeErr(s.locationKey, "no trust store location")
		}
		data = []byte(s.inlineChain)
	} else {
		var err error
		if data, err = os.ReadFile(s.location); err != nil {
			return nil, storeErr(s.locationKey, "%v", err)
		}
	}
	n := 0
	switch s.typ {
	case "PEM":
		for rest := data; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, storeErr(s.locationKey, "certificate: %v", err)
			}
			pool.AddCert(c)
			n++
		}
	case "PKCS12":
		certs, err := pkcs12.DecodeTrustStore(data, s.password)
		if err != nil {
			return nil, storeErr(s.locationKey, "PKCS12 trust store %s: %v (is %s right?)", s.location, err, s.passwordKey)
		}
		for _, c := range certs {
			pool.AddCert(c)
			n++
		}
	case "JKS":
		ks := keystore.New(keystore.WithOrderedAliases())
		// Java reads a trust store without a password too (skipping the integrity check);
		// the library needs one, so an unset password is an error here.
		if err := ks.Load(bytes.NewReader(data), []byte(s.password)); err != nil {
			return nil, storeErr(s.locationKey, "JKS trust store %s: %v (is %s right?)", s.location, err, s.passwordKey)
		}
		for _, alias := range ks.Aliases() {
			var ders [][]byte
			if ks.IsTrustedCertificateEntry(alias) {
				e, err := ks.GetTrustedCertificateEntry(alias)
				if err != nil {
					return nil, storeErr(s.locationKey, "JKS entry %q: %v", alias, err)
				}
				ders = append(ders, e.Certificate.Content)
			} else if chain, err := ks.GetPrivateKeyEntryCertificateChain(alias); err == nil && len(chain) > 0 {
				ders = append(ders, chain[0].Content)
			}
			for _, der := range ders {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					return nil, storeErr(s.locationKey, "JKS entry %q: %v", alias, err)
				}
				pool.AddCert(c)
				n++
			}
		}
	default:
		return nil, storeErr(s.locationKey, "unknown trust store type %q", s.typ)
	}
	if n == 0 {
		return nil, storeErr(s.locationKey, "the trust store holds no certificate")
	}
	return pool, nil
}
