package testutil

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// CA is a certificate authority made for one test: it issues server and client
// certificates and writes them as PEM, PKCS12 and JKS stores, as a Kafka operator would
// make them with openssl and keytool.
type CA struct {
	t      testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	PEM    string // the CA certificate in PEM, a trust store's content
	serial int64
}

// Cert is an issued certificate with its key.
type Cert struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM string // the certificate then the CA's (the chain a key store holds)
	KeyPEM  string // PKCS#8
}

// NewCA makes a CA whose files go to a temporary directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gregor-test-ca", Organization: []string{"Gregor"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{t: t, dir: t.TempDir(), cert: cert, key: key, serial: 1,
		PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// Issue makes a certificate for subject (its CN and OU), valid for 127.0.0.1 and localhost,
// for both server and client use.
func (ca *CA) Issue(cn string, ou ...string) *Cert {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: cn, OrganizationalUnit: ou, Organization: []string{"Gregor"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		ca.t.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return &Cert{
		Cert: cert, Key: key,
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) + ca.PEM,
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})),
	}
}

// write puts data in a file of the CA's directory and returns its path.
func (ca *CA) write(name string, data []byte) string {
	ca.t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// TrustPEM writes the CA certificate as a PEM trust store and returns its path.
func (ca *CA) TrustPEM() string { return ca.write("ca.pem", []byte(ca.PEM)) }

// KeyPEM writes c's key and chain as one PEM key store file and returns its path.
func (ca *CA) KeyPEM(name string, c *Cert) string {
	return ca.write(name+".pem", []byte(c.KeyPEM+c.CertPEM))
}

// KeyPKCS12 writes c as a PKCS12 key store with password and returns its path.
func (ca *CA) KeyPKCS12(name string, c *Cert, password string) string {
	ca.t.Helper()
	data, err := pkcs12.Modern.Encode(c.Key, c.Cert, []*x509.Certificate{ca.cert}, password)
	if err != nil {
		ca.t.Fatal(err)
	}
	return ca.write(name+".p12", data)
}

// TrustPKCS12 writes the CA certificate as a PKCS12 trust store and returns its path.
func (ca *CA) TrustPKCS12(password string) string {
	ca.t.Helper()
	data, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.cert}, password)
	if err != nil {
		ca.t.Fatal(err)
	}
	return ca.write("truststore.p12", data)
}

// KeyJKS writes c as a JKS key store (store and key password the same) and returns its path.
func (ca *CA) KeyJKS(name string, c *Cert, password string) string {
	ca.t.Helper()
	p8, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		ca.t.Fatal(err)
	}
	ks := keystore.New()
	err = ks.SetPrivateKeyEntry(name, keystore.PrivateKeyEntry{
		CreationTime: time.Now(), PrivateKey: p8,
		CertificateChain: []keystore.Certificate{{Type: "X509", Content: c.Cert.Raw}, {Type: "X509", Content: ca.cert.Raw}},
	}, []byte(password))
	if err != nil {
		ca.t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(password)); err != nil {
		ca.t.Fatal(err)
	}
	return ca.write(name+".jks", buf.Bytes())
}

// TrustJKS writes the CA certificate as a JKS trust store and returns its path.
func (ca *CA) TrustJKS(password string) string {
	ca.t.Helper()
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{
		CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: ca.cert.Raw},
	}); err != nil {
		ca.t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ks.Store(&buf, []byte(password)); err != nil {
		ca.t.Fatal(err)
	}
	return ca.write("truststore.jks", buf.Bytes())
}

// Pool is a certificate pool holding the CA, for a client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// CertFiles writes c's certificate chain and its key as two PEM files, the way most clients
// outside the JVM take a client certificate (librdkafka's ssl.certificate.location and
// ssl.key.location, Python's ssl_certfile and ssl_keyfile), and returns their paths.
func (ca *CA) CertFiles(name string, c *Cert) (certPath, keyPath string) {
	return ca.write(name+"-cert.pem", []byte(c.CertPEM)), ca.write(name+"-key.pem", []byte(c.KeyPEM))
}
