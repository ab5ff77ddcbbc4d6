package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/security"
)

// --command-config FILE: Kafka's client properties, as every kafka-*.sh tool takes them, so
// the tools work against a secured cluster with the file a Kafka user already has:
//
//	security.protocol=SASL_SSL
//	sasl.mechanism=SCRAM-SHA-512
//	sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";
//	ssl.truststore.type=PEM
//	ssl.truststore.location=/etc/gregor/ca.pem
//
// Keys understood: security.protocol, sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
// OAUTHBEARER, GSSAPI), sasl.jaas.config, sasl.kerberos.service.name, the ssl.* trust store,
// key store (mutual TLS) and protocol keys, client.id, and for OAUTHBEARER tokens from an
// identity provider sasl.login.callback.handler.class, sasl.oauthbearer.token.endpoint.url,
// sasl.oauthbearer.sub.claim.name and the sasl.login.* timeouts and backoffs. Any other key is refused by name rather than ignored.

// commandConfigKeys are the client properties --command-config accepts.
var commandConfigKeys = map[string]bool{
	"security.protocol": true, "sasl.mechanism": true, "sasl.jaas.config": true, "sasl.kerberos.service.name": true, "client.id": true,
	"ssl.truststore.type": true, "ssl.truststore.location": true, "ssl.truststore.password": true, "ssl.truststore.certificates": true,
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.password": true, "ssl.key.password": true,
	"ssl.keystore.key": true, "ssl.keystore.certificate.chain": true,
	"ssl.endpoint.identification.algorithm": true, "ssl.enabled.protocols": true, "ssl.protocol": true, "ssl.cipher.suites": true,
	// OAUTHBEARER tokens from an identity provider (KIP-768)
	"sasl.login.callback.handler.class": true, "sasl.oauthbearer.token.endpoint.url": true, "sasl.oauthbearer.sub.claim.name": true,
	"sasl.login.connect.timeout.ms": true, "sasl.login.read.timeout.ms": true, "sasl.login.retry.backoff.ms": true, "sasl.login.retry.backoff.max.ms": true,
}

// commandConfigOpts reads a client properties file into client options.
func commandConfigOpts(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	props, err := config.ReadProperties(f)
	cerr := f.Close()
	if err = errors.Join(err, cerr); err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return clientSecurityOpts(props, path)
}

// clientSecurityOpts turns client properties into client options.
func clientSecurityOpts(props map[string]string, path string) ([]kgo.Opt, error) {
	for k := range props {
		if !commandConfigKeys[k] {
			return nil, fmt.Errorf("--command-config %s: %s is not a client property the tools understand", path, k)
		}
	}
	var opts []kgo.Opt
	if id := props["client.id"]; id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	if proto == "" {
		proto = security.ProtocolPlaintext
	}
	switch proto {
	case security.ProtocolPlaintext, security.ProtocolSASLPlaintext:
	case security.ProtocolSSL, security.ProtocolSASLSSL:
		values := map[string]string{
			"ssl.truststore.type": "JKS", "ssl.keystore.type": "JKS", "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
			"ssl.protocol": "TLSv1.3", "ssl.endpoint.identification.algorithm": "https",
		}
		for k, v := range props {
			if strings.HasPrefix(k, "ssl.") {
				values[k] = strings.TrimSpace(v)
			}
		}
		cfg, err := security.ClientTLS(values, nil)
		if err != nil {
			return nil, fmt.Errorf("--command-config %s: %w", path, err)
		}
		// Over a security.Wire: each request leaves in writes of several TLS records, not
		// one system call per record.
		d := &net.Dialer{Timeout: 10 * time.Second} // franz-go's own dial timeout
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c, err := security.DialWire(ctx, d, network, host, cfg)
			if err != nil {
				return nil, err
			}
			return c, nil
		}))
	default:
		return nil, fmt.Errorf("--command-config %s: security.protocol %q is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", path, props["security.protocol"])
	}
	if proto == security.ProtocolSASLPlaintext || proto == security.ProtocolSASLSSL {
		m, err := saslMechanism(props, path)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// saslMechanism builds the client's SASL mechanism from sasl.mechanism, sasl.jaas.config and
// (GSSAPI) sasl.kerberos.service.name, with the code the broker's own connections use
// (internal/security's Client): PLAIN and SCRAM with the JAAS line's username and password,
// OAUTHBEARER with Kafka's unsecured login options (unsecuredLoginStringClaim_sub, ...) or
// tokens from an identity provider (sasl.login.callback.handler.class),
// GSSAPI with a Krb5LoginModule keytab and principal (krb5.conf from KRB5_CONFIG).
func saslMechanism(props map[string]string, path string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = security.GSSAPI // Kafka's client default
	}
	jaasKey := strings.ToLower(mech) + ".sasl.jaas.config"
	values := map[string]string{"sasl.mechanism": mech}
	setKey := map[string]string{"sasl.mechanism": "sasl.mechanism", jaasKey: "sasl.jaas.config", "sasl.kerberos.service.name": "sasl.kerberos.service.name"}
	if v, ok := props["sasl.jaas.config"]; ok {
		values[jaasKey] = v
	}
	for k, v := range props {
		if k == "sasl.kerberos.service.name" || strings.HasPrefix(k, "sasl.login.") || strings.HasPrefix(k, "sasl.oauthbearer.") {
			values[k], setKey[k] = v, k
		}
	}
	c, err := security.NewClient("client", security.ProtocolSASLPlaintext, values, setKey, "sasl.mechanism")
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return c.FranzSASL(), nil
}
