package security

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// TLS configuration of a listener (server side) and of the broker's own outgoing
// connections (client side), from Kafka's ssl.* keys.
//
// Reloading: a server's key and trust stores are files; before a handshake, at most once per
// reloadCheck, their sizes and modification times are compared with those last loaded, and
// on a change they are loaded again (certificate rotation without a restart). A store that
// fails to load keeps the previous one in service and is logged; the next change is tried
// again.

// Dynamic update (KIP-226): the stores themselves may be replaced at runtime by new
// configuration (Reconfigure, from a broker's dynamic listener.name.<listener>.ssl.keystore.*
// and ssl.truststore.* configs). As Kafka's SslFactory does, the new stores must load, a
// key store or trust store in service cannot be removed nor one added, and unless
// ssl.allow.dn.changes / ssl.allow.san.changes the new certificate keeps the subject
// distinguished name and subject alternative names of the one in service. On the
// inter-broker listener, whose stores the brokers also use as clients towards each other,
// the trust store in service must trust the new certificate and the new trust store the
// certificate in service (Kafka's SslEngineValidator: a rolling update keeps brokers with
// the old stores and brokers with the new ones talking). New connections
// then get the new stores (a connection keeps the tls.Config it started with), and the
// files watched are the new ones.

// reloadCheck bounds how often a listener looks at its store files.
const reloadCheck = time.Second

// tlsSettings are the ssl.* values that are not stores.
type tlsSettings struct {
	clientAuth tls.ClientAuthType
	minVersion uint16
	maxVersion uint16
	ciphers    []uint16 // nil: Go's defaults
}

// ServerTLS serves TLS on one listener. Safe for concurrent use.
type ServerTLS struct {
	settings tlsSettings
	mapper   *PrincipalMapper
	log      *slog.Logger

	mu struct {
		sync.Mutex
		key, trust storeSpec // where the stores in service come from
		cfg        *tls.Config
		stamps     map[string]fileStamp // store files as last loaded
		checked    time.Time            // last look at the files
	}
}

// fileStamp identifies a version of a file.
type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) (fileStamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, false
	}
	return fileStamp{fi.Size(), fi.ModTime()}, true
}

// newServerTLS loads a listener's stores; an error names the configuration key at fault.
func newServerTLS(c *listenerConfig, log *slog.Logger) (*ServerTLS, error) {
	s := &ServerTLS{log: log}
	key, trust := c.keyStore(), c.trustStore()
	if !key.configured() {
		return nil, fmt.Errorf("listener %s (%s) needs a key store: set %s (or %s and %s with ssl.keystore.type=PEM)",
			c.name, c.protocol, c.setKey["ssl.keystore.location"], c.setKey["ssl.keystore.key"], c.setKey["ssl.keystore.certificate.chain"])
	}
	var err error
	if s.settings, err = c.tlsSettings(); err != nil {
		return nil, err
	}
	if s.settings.clientAuth != tls.NoClientCert && !trust.configured() {
		return nil, fmt.Errorf("listener %s: %s=%s needs a trust store to verify client certificates: set %s",
			c.name, c.setKey["ssl.client.auth"], c.values["ssl.client.auth"], c.setKey["ssl.truststore.location"])
	}
	if s.mapper, err = ParsePrincipalMapping(c.values["ssl.principal.mapping.rules"]); err != nil {
		return nil, fmt.Errorf("listener %s: %s: %w", c.name, c.setKey["ssl.principal.mapping.rules"], err)
	}
	cfg, stamps, err := s.load(key, trust)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", c.name, err)
	}
	s.mu.key, s.mu.trust = key, trust
	s.mu.cfg, s.mu.stamps, s.mu.checked = cfg, stamps, time.Now()
	return s, nil
}

// load reads the stores key and trust and builds the tls.Config.
func (s *ServerTLS) load(key, trust storeSpec) (*tls.Config, map[string]fileStamp, error) {
	stamps := map[string]fileStamp{}
	for _, p := range []string{key.location, trust.location} {
		if p != "" {
			st, _ := stampOf(p) // a missing file fails the load below, with its error
			stamps[p] = st
		}
	}
	cert, err := loadKeyPair(key)
	if err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   s.settings.clientAuth,
		MinVersion:   s.settings.minVersion,
		MaxVersion:   s.settings.maxVersion,
		CipherSuites: s.settings.ciphers,
	}
	if trust.configured() {
		if cfg.ClientCAs, err = loadTrust(trust); err != nil {
			return nil, nil, err
		}
	}
	return cfg, stamps, nil
}

// Config is the tls.Config to serve a connection with: the one in service, reloaded first
// when its files changed.
func (s *ServerTLS) Config() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if now.Sub(s.mu.checked) < reloadCheck {
		return s.mu.cfg
	}
	s.mu.checked = now
	changed := false
	for p, old := range s.mu.stamps {
		if st, ok := stampOf(p); ok && st != old {
			changed = true
		}
	}
	if !changed {
		return s.mu.cfg
	}
	cfg, stamps, err := s.load(s.mu.key, s.mu.trust)
	if err != nil {
		s.log.Warn("TLS stores changed but cannot be loaded; keeping the ones in service", "err", err)
		// Remember the failed version so the same broken files are not retried on every
		// connection; a later change is tried again.
		for p := range s.mu.stamps {
			if st, ok := stampOf(p); ok {
				s.mu.stamps[p] = st
			}
		}
		return s.mu.cfg
	}
	s.log.Info("TLS stores reloaded", "files", strings.Join(keysOf(stamps), ","))
	s.mu.cfg, s.mu.stamps = cfg, stamps
	return cfg
}

// reconfigure replaces the listener's stores with the ones c's values name, when they
// differ from those in service (Kafka's SslFactory.reconfigure); with TLSValidate it only
// checks them (validateReconfiguration), with TLSStartUp it only loads them. The checks are
// Kafka's: the new stores load; a key store or trust store is neither removed nor added;
// the new certificate keeps the subject distinguished name and the subject alternative
// names of the one in service, unless ssl.allow.dn.changes / ssl.allow.san.changes; and on
// the inter-broker listener old and new trust each other. On error nothing changes; the
// error names the configuration key at fault.
func (s *ServerTLS) reconfigure(c *listenerConfig, interBroker bool, change TLSChange) error {
	key, trust := c.keyStore(), c.trustStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sameStore(key, s.mu.key) && sameStore(trust, s.mu.trust) {
		return nil
	}
	if change == TLSStartUp {
		cfg, stamps, err := s.load(key, trust)
		if err != nil {
			return err
		}
		s.serveLocked(key, trust, cfg, stamps)
		return nil
	}
	switch {
	case !key.configured():
		return fmt.Errorf("%s: Cannot remove the SSL keystore from an existing listener for which a keystore was configured.", c.setKey["ssl.keystore.location"])
	case trust.configured() && !s.mu.trust.configured():
		return fmt.Errorf("%s: Cannot add SSL truststore to an existing listener for which no truststore was configured.", c.setKey["ssl.truststore.location"])
	case !trust.configured() && s.mu.trust.configured():
		return fmt.Errorf("%s: Cannot remove the SSL truststore from an existing listener for which a truststore was configured.", c.setKey["ssl.truststore.location"])
	}
	cfg, stamps, err := s.load(key, trust)
	if err != nil {
		return err
	}
	if !sameStore(key, s.mu.key) {
		if err := compatible(s.mu.cfg.Certificates[0], cfg.Certificates[0], c); err != nil {
			return err
		}
	}
	if interBroker {
		if err := trustEachOther(s.mu.cfg, cfg, c); err != nil {
			return err
		}
	}
	if change == TLSValidate {
		return nil
	}
	s.serveLocked(key, trust, cfg, stamps)
	return nil
}

// serveLocked puts stores key and trust, loaded as cfg from the files of stamps, in service.
func (s *ServerTLS) serveLocked(key, trust storeSpec, cfg *tls.Config, stamps map[string]fileStamp) {
	s.mu.key, s.mu.trust = key, trust
	s.mu.cfg, s.mu.stamps, s.mu.checked = cfg, stamps, time.Now()
	s.log.Info("TLS stores reconfigured", "keystore", storeName(key), "truststore", storeName(trust))
}

// sameStore reports whether a and b name the same store (same source and password).
func sameStore(a, b storeSpec) bool {
	return a.typ == b.typ && a.location == b.location && a.password == b.password && a.keyPassword == b.keyPassword &&
		a.inlineKey == b.inlineKey && a.inlineChain == b.inlineChain
}

// storeName is a store's file, or "inline", for the log.
func storeName(s storeSpec) string {
	switch {
	case s.location != "":
		return s.location
	case s.configured():
		return "inline"
	}
	return "none"
}

// compatible checks that the new certificate keeps the old one's subject distinguished name
// and subject alternative names, unless ssl.allow.dn.changes / ssl.allow.san.changes (Kafka's
// CertificateEntries.ensureCompatible, with its messages).
func compatible(old, next tls.Certificate, c *listenerConfig) error {
	o, err := leafOf(old)
	if err != nil {
		return err
	}
	n, err := leafOf(next)
	if err != nil {
		return fmt.Errorf("%s: %w", c.setKey["ssl.keystore.location"], err)
	}
	if c.values["ssl.allow.dn.changes"] != "true" && !bytes.Equal(o.RawSubject, n.RawSubject) {
		return fmt.Errorf("%s: Keystore DistinguishedName does not match: existing={%s}, new={%s}",
			c.setKey["ssl.keystore.location"], DistinguishedName(o), DistinguishedName(n))
	}
	if c.values["ssl.allow.san.changes"] != "true" {
		if oldNames, newNames := subjectAltNames(o), subjectAltNames(n); !slices.Equal(oldNames, newNames) {
			return fmt.Errorf("%s: Keystore SubjectAltNames do not match: existing={%s}, new={%s}",
				c.setKey["ssl.keystore.location"], strings.Join(oldNames, ", "), strings.Join(newNames, ", "))
		}
	}
	return nil
}

// trustEachOther checks, for the inter-broker listener, that the trust store of old
// verifies the certificate of next and the trust store of next the certificate of old (the
// system's roots where a listener has no trust store, as the broker's client then uses
// them). Host names are not checked: the stores, not the addresses, change.
func trustEachOther(old, next *tls.Config, c *listenerConfig) error {
	verify := func(pool *x509.CertPool, cert tls.Certificate) error {
		leaf, err := leafOf(cert)
		if err != nil {
			return err
		}
		if pool == nil {
			if pool, err = x509.SystemCertPool(); err != nil {
				return err
			}
		}
		opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool()}
		for _, der := range cert.Certificate[1:] {
			if ic, err := x509.ParseCertificate(der); err == nil {
				opts.Intermediates.AddCert(ic)
			}
		}
		_, err = leaf.Verify(opts)
		return err
	}
	if err := verify(old.ClientCAs, next.Certificates[0]); err != nil {
		return fmt.Errorf("%s: the inter-broker listener's trust store in service does not trust the new certificate, so brokers not yet updated could not connect to this one: %v",
			c.setKey["ssl.keystore.location"], err)
	}
	if err := verify(next.ClientCAs, old.Certificates[0]); err != nil {
		return fmt.Errorf("%s: the new trust store of the inter-broker listener does not trust the certificate in service, so this broker could not connect to brokers not yet updated: %v",
			c.setKey["ssl.truststore.location"], err)
	}
	return nil
}

// leafOf is the parsed end-entity certificate of a key pair.
func leafOf(c tls.Certificate) (*x509.Certificate, error) {
	if c.Leaf != nil {
		return c.Leaf, nil
	}
	if len(c.Certificate) == 0 {
		return nil, fmt.Errorf("the key store holds no certificate")
	}
	return x509.ParseCertificate(c.Certificate[0])
}

// subjectAltNames are a certificate's subject alternative names as Java lists them (type
// number and value), sorted: DNS names (2), e-mail addresses (1), URIs (6), IP addresses (7).
func subjectAltNames(c *x509.Certificate) []string {
	var out []string
	for _, d := range c.DNSNames {
		out = append(out, "[2, "+d+"]")
	}
	for _, e := range c.EmailAddresses {
		out = append(out, "[1, "+e+"]")
	}
	for _, u := range c.URIs {
		out = append(out, "[6, "+u.String()+"]")
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "[7, "+ip.String()+"]")
	}
	slices.Sort(out)
	return out
}

func keysOf(m map[string]fileStamp) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// peerName maps the verified client certificate of a TLS connection to a principal name;
// ok is false when no ssl.principal.mapping.rules rule matches it. Without a certificate
// there is no name (the caller uses ANONYMOUS), nor with ssl.client.auth=none: a
// certificate given anyway (to a controller listener, which asks raft peers for theirs) is
// not the connection's principal.
func (s *ServerTLS) peerName(cs tls.ConnectionState) (name string, hasCert, ok bool) {
	if len(cs.PeerCertificates) == 0 || s.settings.clientAuth == tls.NoClientCert {
		return "", false, true
	}
	n, ok := s.mapper.Name(DistinguishedName(cs.PeerCertificates[0]))
	return n, true, ok
}

// tlsSettings reads ssl.client.auth, ssl.enabled.protocols, ssl.protocol and
// ssl.cipher.suites.
func (c *listenerConfig) tlsSettings() (tlsSettings, error) {
	var t tlsSettings
	switch c.values["ssl.client.auth"] {
	case "required":
		t.clientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		t.clientAuth = tls.VerifyClientCertIfGiven
	default:
		t.clientAuth = tls.NoClientCert
	}
	for _, p := range splitComma(c.values["ssl.enabled.protocols"]) {
		v := map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}[p]
		if v == 0 {
			return t, fmt.Errorf("%s: %q is not a TLS version Gregor serves (TLSv1.2, TLSv1.3)", c.setKey["ssl.enabled.protocols"], p)
		}
		if t.minVersion == 0 || v < t.minVersion {
			t.minVersion = v
		}
		if v > t.maxVersion {
			t.maxVersion = v
		}
	}
	if t.minVersion == 0 {
		return t, fmt.Errorf("%s: no TLS version enabled", c.setKey["ssl.enabled.protocols"])
	}
	known := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		known[cs.Name] = cs.ID
	}
	tls13 := map[string]bool{}
	for _, id := range []uint16{tls.TLS_AES_128_GCM_SHA256, tls.TLS_AES_256_GCM_SHA384, tls.TLS_CHACHA20_POLY1305_SHA256} {
		tls13[tls.CipherSuiteName(id)] = true
	}
	for _, name := range splitComma(c.values["ssl.cipher.suites"]) {
		if tls13[name] {
			continue // TLS 1.3 suites are always enabled (crypto/tls does not configure them)
		}
		id, ok := known[name]
		if !ok {
			return t, fmt.Errorf("%s: %q is not a secure TLS 1.2 cipher suite Gregor knows (IANA names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", c.setKey["ssl.cipher.suites"], name)
		}
		t.ciphers = append(t.ciphers, id)
	}
	return t, nil
}

// ClientTLS builds the tls.Config of an outgoing connection to host from Kafka client
// properties (ssl.truststore.*, ssl.keystore.* for mutual TLS,
// ssl.endpoint.identification.algorithm, ssl.enabled.protocols, ssl.cipher.suites): what
// the broker uses towards other brokers and the controllers, and the command-line tools
// with --command-config. Without a trust store the system's roots are trusted.
func ClientTLS(values map[string]string, setKey map[string]string) (*tls.Config, error) {
	c := &listenerConfig{name: "client", values: values, setKey: withDefaults(setKey, values)}
	t, err := c.tlsSettings()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: t.minVersion, MaxVersion: t.maxVersion, CipherSuites: t.ciphers}
	if p := values["ssl.protocol"]; p == "TLSv1.2" && cfg.MaxVersion > tls.VersionTLS12 {
		cfg.MaxVersion = tls.VersionTLS12
	}
	if ts := c.trustStore(); ts.configured() {
		if cfg.RootCAs, err = loadTrust(ts); err != nil {
			return nil, err
		}
	}
	if ks := c.keyStore(); ks.configured() {
		cert, err := loadKeyPair(ks)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if values["ssl.endpoint.identification.algorithm"] == "" {
		// Verify the chain but not the host name, as Kafka does with the algorithm unset.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("security: the server sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, ic := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg, nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
