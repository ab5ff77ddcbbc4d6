// Package security is the connection edge of Kafka's security model: how a listener's
// connections are encrypted (TLS) and authenticated (SASL), and who each one is (its
// principal). The server (internal/server) asks it at accept and before each request; the
// API handlers only ever see the principal it settled on (server.Conn.Principal), which they
// hand to internal/authz.
//
// # Shape
//
//   - Listener is one listener's security, built once at start-up from the broker's
//     configuration (config.Broker.ListenerSecurity: the ssl.*, sasl.* and
//     connections.max.reauth.ms keys, each overridable per listener as
//     listener.name.<listener>.<key>, and listener.name.<listener>.<mechanism>.sasl.jaas.config).
//     NewListener refuses, naming the key, anything it cannot serve as configured: an SSL
//     or SASL_SSL listener without a readable key store, client authentication without a
//     trust store, an unknown cipher suite or TLS version, a SASL mechanism Gregor does not
//     serve, PLAIN, OAUTHBEARER or GSSAPI without its JAAS line, GSSAPI without
//     sasl.kerberos.service.name, an unreadable keytab or krb5.conf, a
//     sasl.server.callback.handler.class Gregor does not serve, a JWKS that cannot be read.
//     A listener never falls back to plaintext or to no authentication.
//   - ServerTLS (tls.go, keystore.go) loads PEM, PKCS12 and JKS stores, and reloads them
//     when their files change (checked at most once a second, before a handshake; a store
//     that fails to load leaves the previous one serving), and replaces them by new ones a
//     dynamic config names (Listener.ReconfigureTLS: Kafka's SslFactory checks first, new
//     connections only). A client certificate's subject
//     becomes the principal name through ssl.principal.mapping.rules (principal.go).
//   - Session (session.go) is one connection's authentication, a deterministic core the
//     connection goroutine drives with the time: which requests it admits in each state,
//     the answers to SaslHandshake and SaslAuthenticate, bare tokens after a v0 handshake,
//     and KIP-368 session expiry and re-authentication. Its state diagram is on the type.
//   - Mechanisms (mechanism.go): PLAIN against the JAAS line's user_<name> options, and
//     SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802) against the credentials
//     AlterUserScramCredentials stored in the metadata log (a ScramCredentials, the broker's
//     metadata image): salted, never the password itself, and delegation tokens (KIP-48:
//     tokenauth=true, the token id and its HMAC; a TokenCredentials gives the credential,
//     the owner the connection becomes and the token's expiry); OAUTHBEARER (RFC 7628,
//     KIP-255, KIP-768; oauth.go) with the validator Kafka's
//     listener.name.<l>.oauthbearer.sasl.server.callback.handler.class chooses: unset, the
//     unsecured one (alg none tokens, the JAAS line's unsecuredValidator* options, for
//     development); OAuthBearerValidatorCallbackHandler, signed JWTs checked against a JWKS
//     read from a file or over https and re-read every
//     sasl.oauthbearer.jwks.endpoint.refresh.ms (oauth_jwks.go). A token's exp ends its
//     session (KIP-368: the earlier of exp and connections.max.reauth.ms).
//     and GSSAPI (gssapi.go; Kerberos V5,
//     RFC 4752 over RFC 4121) with the broker's principal and keytab from the listener's
//     Krb5LoginModule JAAS line (useKeyTab=true storeKey=true keyTab="..." principal="..."),
//     the realm and KDC from krb5.conf (KRB5_CONFIG, else /etc/krb5.conf): the client's
//     AP-REQ is verified with the keytab (read again when its file changes, so a rotated key
//     serves without a restart, as the JDK reads a keytab), answered with an AP-REP when it asks for mutual
//     authentication, then the wrapped security layer offer (no security layer, as Kafka)
//     and the client's wrapped choice. A GSSAPI token sent without SaslHandshake (Kafka 0.9
//     clients, sarama's handshake v0) starts GSSAPI on bare tokens, as Kafka's brokers
//     accept it (Session.LegacyGSSAPI).
//   - Client (client.go) is the other side, for the broker's own connections to other
//     brokers on the inter-broker listener and to the controllers on the controller
//     listener: TLS with the listener's trust store (and key store for mutual TLS), then
//     SASL with sasl.mechanism.inter.broker.protocol (or sasl.mechanism.controller.protocol)
//     and the username and password of that mechanism's JAAS line; for OAUTHBEARER, an
//     unsecured token made from that line's unsecuredLogin* options, as Kafka's unsecured
//     login does, or with sasl.login.callback.handler.class OAuthBearerLoginCallbackHandler
//     a token from the identity provider's token endpoint (oauth_login.go); for GSSAPI
//     (gssapi_client.go) the broker's keytab, a ticket for
//     <sasl.kerberos.service.name>/<host dialled> and mutual authentication required.
//   - Wire (wire.go) is the TCP connection under a tls.Conn: it reads several TLS records
//     per system call (the listeners' connections, the clients'), and a client's WireConn
//     (Client, the command-line tools) writes a request's records with one system call,
//     where crypto/tls alone makes one per record.
//   - PeerTLS (peer.go) secures the raft traffic between controllers on a TLS controller
//     listener: mutual TLS with the listener's stores, no SASL (raft is not the Kafka
//     protocol); a controller proves itself with its certificate.
//
// # Principals
//
// PLAINTEXT and SASL before authentication: User:ANONYMOUS. SSL: User:<mapped certificate
// subject>, or User:ANONYMOUS without a client certificate. SASL_PLAINTEXT and SASL_SSL:
// User:<the authenticated name>; for GSSAPI the client's Kerberos principal mapped by
// sasl.kerberos.principal.to.local.rules (kerberosname.go; DEFAULT: its first component
// when its realm is krb5.conf's default, so client@REALM is User:client; a principal no
// rule maps fails authentication). A re-authentication must keep the principal and the
// mechanism.
//
// # Failures
//
// Every failure closes the connection with one log line and reaches no API handler. A failed
// SASL step is answered (SASL_AUTHENTICATION_FAILED with Kafka's message, for OAUTHBEARER
// the JSON error the client acknowledged, or
// UNSUPPORTED_SASL_MECHANISM with the enabled list, or ILLEGAL_SASL_STATE for a malformed
// token) after connection.failed.authentication.delay.ms, then the connection is closed;
// only the failing connection's goroutine waits, so the broker stays responsive to others.
// Frames before authentication are bounded by sasl.server.max.receive.size.
//
// # Concurrency
//
// Listener and its mechanisms are immutable and shared by every connection, but for the keys
// of an OAUTHBEARER JWKS, which its jwksSource guards with its mutex and replaces from a read
// on a goroutine of its own that ends with the read; ServerTLS guards
// the tls.Config in service and the stores' file stamps with its mutex (held only to check
// and swap, never during a handshake). A Client's tokenLogin guards its token with its
// mutex, held across a fetch; the GSSAPI keytabFile guards its keytab and file stamp with
// its own. A Session belongs to its connection's goroutine.
package security
