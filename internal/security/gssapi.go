package security

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	krb5config "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/asnAppTag"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/service"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The server side of SASL/GSSAPI with Kerberos V5 (RFC 4752 over RFC 4121), as Kafka's
// brokers serve it with the JDK's GSSAPI SaslServer:
//
//	client  GSS initial context token: 0x60, the Kerberos OID, TOK_ID 01 00, an AP-REQ for
//	        the broker's principal (service/host@REALM)
//	server  with mutual authentication requested (the authenticator's GSS checksum flags):
//	        the AP-REP token (0x60, OID, TOK_ID 02 00, AP-REP), and the client answers with an
//	        empty token; without it this step is skipped
//	server  a wrap token (RFC 4121 4.2.6.2, integrity only) of 4 bytes: the security layers
//	        offered (1: no security layer, the only one Kafka offers) and the largest buffer
//	        (65536, the JDK's default)
//	client  a wrap token of 4 bytes or more: the layer chosen (must be 1), its largest
//	        buffer, then its authorization id
//	server  an empty token: authenticated
//
// The principal is the client's Kerberos principal (cname@crealm of the verified ticket)
// mapped by sasl.kerberos.principal.to.local.rules; the authorization id is not used, as
// Kafka's callback handler authorizes the authentication id whatever the client asked for.
// Wrap tokens are keyed as RFC 4121 says: the initiator's subkey from the authenticator when
// there is one (the AP-REP offers no acceptor subkey), else the ticket's session key. Only
// the RFC 4121 encryption types (AES with SHA-1 or SHA-2) are served: a ticket of an older
// type (RC4, DES), whose tokens are RFC 1964's, fails authentication with its name.

// krb5LoginModule is the JAAS login module of Kerberos.
const krb5LoginModule = "com.sun.security.auth.module.Krb5LoginModule"

// gssMaxBuffer is the largest buffer the server announces (the JDK's default
// javax.security.sasl.maxbuffer); with no security layer it bounds nothing.
const gssMaxBuffer = 65536

// gssNoSecurityLayer is RFC 4752's bit for "no security layer".
const gssNoSecurityLayer = 1

// gss checksum flag of the authenticator (RFC 4121 4.1.1.1).
const gssMutualFlag = 2

// KerberosOptions are what the GSSAPI mechanism of a listener is built from.
type KerberosOptions struct {
	JAAS        JAAS   // the listener's gssapi.sasl.jaas.config
	ServiceName string // sasl.kerberos.service.name
	Rules       []string
	// ConfigPath is krb5.conf: KRB5_CONFIG, else /etc/krb5.conf.
	ConfigPath string
}

// Krb5ConfigPath is the krb5.conf to read: the KRB5_CONFIG environment variable (its
// first existing file, as MIT Kerberos reads a colon-separated list), else /etc/krb5.conf.
func Krb5ConfigPath() string {
	if v := os.Getenv("KRB5_CONFIG"); v != "" {
		parts := strings.Split(v, ":")
		for _, p := range parts {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		return parts[0]
	}
	return "/etc/krb5.conf"
}

// kerberosLogin is a JAAS Krb5LoginModule entry with a keytab: the principal and its keys.
type kerberosLogin struct {
	keytab      *keytabFile
	keytabPath  string
	principal   types.PrincipalName
	realm       string
	serviceName string
	krb5        *krb5config.Config
}

// parseKerberosLogin reads a Krb5LoginModule JAAS line that logs in with a keytab, and the
// service name (the JAAS serviceName option or sasl.kerberos.service.name, which must agree,
// as Kafka requires), and loads the keytab and krb5.conf.
func parseKerberosLogin(j JAAS, serviceName, krb5Path string) (*kerberosLogin, error) {
	if j.LoginModule != krb5LoginModule {
		return nil, fmt.Errorf("GSSAPI needs %s, not %s", krb5LoginModule, j.LoginModule)
	}
	o := j.Options
	if o["useKeyTab"] != "true" {
		return nil, errors.New(`GSSAPI logs in with a keytab: set useKeyTab=true and keyTab="<path>"`)
	}
	if o["storeKey"] == "false" {
		return nil, errors.New("storeKey=false keeps the keys from the broker, which then cannot accept Kerberos tickets: set storeKey=true")
	}
	path := o["keyTab"]
	if path == "" {
		return nil, errors.New(`useKeyTab=true needs keyTab="<path>"`)
	}
	princ := o["principal"]
	if princ == "" {
		return nil, errors.New(`principal="<service>/<host>@<REALM>" is not set`)
	}
	jaasService := o["serviceName"]
	switch {
	case jaasService != "" && serviceName != "" && jaasService != serviceName:
		return nil, fmt.Errorf("conflicting serviceName values found in JAAS (%s) and sasl.kerberos.service.name (%s)", jaasService, serviceName)
	case jaasService != "":
		serviceName = jaasService
	case serviceName == "":
		return nil, errors.New("no serviceName defined in either the JAAS line or sasl.kerberos.service.name (it is required with GSSAPI, e.g. kafka)")
	}
	stamp, _ := stampOf(path)
	kt, err := keytab.Load(path)
	if err != nil {
		return nil, fmt.Errorf("keyTab %s: %w", path, err)
	}
	kc, err := krb5config.Load(krb5Path)
	if err != nil {
		var ud krb5config.UnsupportedDirective
		if !errors.As(err, &ud) {
			return nil, fmt.Errorf("Kerberos configuration %s (KRB5_CONFIG): %w", krb5Path, err)
		}
	}
	name, realm, _ := strings.Cut(princ, "@")
	if realm == "" {
		realm = kc.LibDefaults.DefaultRealm
	}
	if realm == "" {
		return nil, fmt.Errorf("principal %s has no realm and %s names no default_realm", princ, krb5Path)
	}
	pn := types.NewPrincipalName(1, name) // KRB_NT_PRINCIPAL; the name type plays no part in matching
	if !hasKeys(kt, pn, realm) {
		return nil, fmt.Errorf("keyTab %s holds no key of %s@%s", path, name, realm)
	}
	ktf := &keytabFile{path: path, principal: pn, realm: realm}
	ktf.mu.kt, ktf.mu.stamp = kt, stamp
	return &kerberosLogin{keytab: ktf, keytabPath: path, principal: pn, realm: realm, serviceName: serviceName, krb5: kc}, nil
}

// keytabFile is the broker's keytab, read again when its file changes, as the JDK reads a
// KeyTab's file whenever keys are needed: a key rotated with kadmin (a new kvno exported to
// the file, or a new file moved over it) serves the next authentication without a restart.
// A rewrite that cannot be read, or holds no key of the principal, keeps the keys in force
// until the file changes again.
type keytabFile struct {
	path      string
	principal types.PrincipalName
	realm     string

	mu struct {
		sync.Mutex
		kt    *keytab.Keytab
		stamp fileStamp // the file as last read (or last found broken)
	}
}

// keys returns the keytab, read again first if its file changed since the last look.
func (f *keytabFile) keys() *keytab.Keytab {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := stampOf(f.path); ok && st != f.mu.stamp {
		f.mu.stamp = st
		if kt, err := keytab.Load(f.path); err == nil && hasKeys(kt, f.principal, f.realm) {
			f.mu.kt = kt
		}
	}
	return f.mu.kt
}

// hasKeys reports whether kt holds a key of principal pn@realm.
func hasKeys(kt *keytab.Keytab, pn types.PrincipalName, realm string) bool {
	for _, e := range kt.Entries {
		if e.Principal.Realm == realm && strings.Join(e.Principal.Components, "/") == pn.PrincipalNameString() {
			return true
		}
	}
	return false
}

// gssapiMechanism is GSSAPI on a listener: the broker's principal and keys, and the rules
// that map a client's principal to its name.
type gssapiMechanism struct {
	login *kerberosLogin
	names *KerberosShortNamer
}

func newGSSAPI(o KerberosOptions) (*gssapiMechanism, error) {
	login, err := parseKerberosLogin(o.JAAS, o.ServiceName, o.ConfigPath)
	if err != nil {
		return nil, err
	}
	names, err := ParseKerberosRules(o.Rules, login.krb5.LibDefaults.DefaultRealm)
	if err != nil {
		return nil, err
	}
	return &gssapiMechanism{login: login, names: names}, nil
}

func (m *gssapiMechanism) start() exchange { return &gssapiExchange{m: m} }

type gssapiStage int8

const (
	gssAwaitAPReq    gssapiStage = iota // the client's initial context token
	gssAwaitEmpty                       // after the AP-REP: the client's empty token
	gssAwaitSecLayer                    // after the server's wrap token: the client's choice
)

type gssapiExchange struct {
	m        *gssapiMechanism
	stage    gssapiStage
	key      types.EncryptionKey // wrap tokens' key
	seq      uint64              // the acceptor's sequence number
	peer     string              // the client's principal, name@REALM
	username string
}

func (e *gssapiExchange) user() string { return e.username }

// credentialExpiry is none: as in Kafka, only OAUTHBEARER ties the session to its credential
// (connections.max.reauth.ms still applies).
func (e *gssapiExchange) credentialExpiry() time.Time { return time.Time{} }

// silentLast: the last step's answer is not sent on bare tokens (Session.RawToken).
func (e *gssapiExchange) silentLast() bool { return true }

func (e *gssapiExchange) fail(reason string, args ...any) error {
	return fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism GSSAPI: %s", errAuthFailed, fmt.Sprintf(reason, args...))
}

func (e *gssapiExchange) step(in []byte, _ time.Time) ([]byte, bool, error) {
	switch e.stage {
	case gssAwaitAPReq:
		return e.acceptContext(in)
	case gssAwaitEmpty:
		if len(in) > 0 {
			return nil, false, malformed("GSSAPI: expected an empty token after the AP-REP")
		}
		out, err := e.securityLayerOffer()
		return out, false, err
	default:
		return e.securityLayerChoice(in)
	}
}

// acceptContext verifies the client's AP-REQ with the broker's keytab.
func (e *gssapiExchange) acceptContext(in []byte) ([]byte, bool, error) {
	var tok spnego.KRB5Token
	if err := tok.Unmarshal(in); err != nil {
		return nil, false, malformed("GSSAPI: not a Kerberos initial context token: %v", err)
	}
	if !tok.IsAPReq() {
		return nil, false, malformed("GSSAPI: the initial context token holds no AP-REQ")
	}
	req := tok.APReq
	l := e.m.login
	if req.Ticket.Realm != l.realm || !req.Ticket.SName.Equal(l.principal) {
		return nil, false, e.fail("the ticket is for %s@%s, not the broker's principal %s@%s",
			req.Ticket.SName.PrincipalNameString(), req.Ticket.Realm, l.principal.PrincipalNameString(), l.realm)
	}
	settings := service.NewSettings(l.keytab.keys(), service.DecodePAC(false), service.KeytabPrincipal(l.principal.PrincipalNameString()))
	ok, _, err := service.VerifyAPREQ(&req, settings)
	if err != nil || !ok {
		reason := "the AP-REQ did not verify"
		if err != nil {
			reason = err.Error()
		}
		return nil, false, e.fail("%s", reason)
	}
	a := req.Authenticator
	if a.Cksum.CksumType != chksumtype.GSSAPI || len(a.Cksum.Checksum) < 24 {
		return nil, false, malformed("GSSAPI: the authenticator carries no GSS checksum (RFC 4121 4.1.1)")
	}
	flags := binary.LittleEndian.Uint32(a.Cksum.Checksum[20:24])
	e.key = req.Ticket.DecryptedEncPart.Key
	if len(a.SubKey.KeyValue) > 0 {
		e.key = a.SubKey
	}
	switch e.key.KeyType {
	case etypeID.AES128_CTS_HMAC_SHA1_96, etypeID.AES256_CTS_HMAC_SHA1_96,
		etypeID.AES128_CTS_HMAC_SHA256_128, etypeID.AES256_CTS_HMAC_SHA384_192:
	default:
		return nil, false, e.fail("encryption type %s of the session is not served (AES only)", etypeName(e.key.KeyType))
	}
	e.seq = uint64(uint32(a.SeqNumber))
	e.peer = a.CName.PrincipalNameString() + "@" + a.CRealm
	if flags&gssMutualFlag == 0 {
		out, err := e.securityLayerOffer()
		return out, false, err
	}
	out, err := e.apRep(req)
	if err != nil {
		return nil, false, err
	}
	e.stage = gssAwaitEmpty
	return out, false, nil
}

// etypeName names an encryption type for a message.
func etypeName(id int32) string {
	for n, v := range etypeID.ETypesByName {
		if v == id {
			return n
		}
	}
	return fmt.Sprint(id)
}

// encAPRepPart is RFC 4120's EncAPRepPart without a subkey (the acceptor offers none).
type encAPRepPart struct {
	CTime          time.Time `asn1:"generalized,explicit,tag:0"`
	Cusec          int       `asn1:"explicit,tag:1"`
	SequenceNumber int64     `asn1:"explicit,tag:3"`
}

// apRep builds the GSS token holding the AP-REP for req: the authenticator's time, and the
// acceptor's sequence number (the initiator's, RFC 4121 leaves it to the acceptor).
func (e *gssapiExchange) apRep(req messages.APReq) ([]byte, error) {
	part, err := asn1.Marshal(encAPRepPart{CTime: req.Authenticator.CTime, Cusec: req.Authenticator.Cusec, SequenceNumber: int64(e.seq)})
	if err != nil {
		return nil, fmt.Errorf("GSSAPI: AP-REP: %w", err)
	}
	part = asn1tools.AddASNAppTag(part, asnAppTag.EncAPRepPart)
	enc, err := crypto.GetEncryptedData(part, req.Ticket.DecryptedEncPart.Key, keyusage.AP_REP_ENCPART, 0)
	if err != nil {
		return nil, fmt.Errorf("GSSAPI: AP-REP: %w", err)
	}
	rep, err := asn1.Marshal(messages.APRep{PVNO: 5, MsgType: msgtype.KRB_AP_REP, EncPart: enc})
	if err != nil {
		return nil, fmt.Errorf("GSSAPI: AP-REP: %w", err)
	}
	rep = asn1tools.AddASNAppTag(rep, asnAppTag.APREP)
	oid, err := asn1.Marshal(gssapi.OIDKRB5.OID())
	if err != nil {
		return nil, fmt.Errorf("GSSAPI: AP-REP: %w", err)
	}
	tok := append(oid, 0x02, 0x00)
	return asn1tools.AddASNAppTag(append(tok, rep...), 0), nil
}

// securityLayerOffer is the server's wrap token: no security layer, the largest buffer.
func (e *gssapiExchange) securityLayerOffer() ([]byte, error) {
	payload := []byte{gssNoSecurityLayer, gssMaxBuffer >> 16 & 0xff, gssMaxBuffer >> 8 & 0xff, gssMaxBuffer & 0xff}
	et, err := crypto.GetEtype(e.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("GSSAPI: %w", err)
	}
	wt := gssapi.WrapToken{Flags: 0x01, EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: e.seq, Payload: payload}
	if err := wt.SetCheckSum(e.key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
		return nil, fmt.Errorf("GSSAPI: %w", err)
	}
	e.stage = gssAwaitSecLayer
	return wt.Marshal()
}

// securityLayerChoice verifies the client's wrap token and settles the principal.
func (e *gssapiExchange) securityLayerChoice(in []byte) ([]byte, bool, error) {
	in = unrotate(in)
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(in, false); err != nil {
		return nil, false, malformed("GSSAPI: the security layer answer is not a wrap token: %v", err)
	}
	if wt.Flags&0x02 != 0 {
		return nil, false, malformed("GSSAPI: the security layer answer is sealed; a token of no security layer carries only a checksum")
	}
	if wt.Flags&0x04 != 0 {
		return nil, false, malformed("GSSAPI: the wrap token names an acceptor subkey the broker did not offer")
	}
	if ok, err := wt.Verify(e.key, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
		return nil, false, e.fail("the security layer answer does not verify: %v", err)
	}
	p := wt.Payload
	if len(p) < 4 {
		return nil, false, malformed("GSSAPI: the security layer answer is %d bytes, not 4 or more", len(p))
	}
	if p[0] != gssNoSecurityLayer {
		return nil, false, e.fail("client selected unsupported protection: %d (only 1, no security layer, is offered)", p[0])
	}
	name, err := e.m.names.ShortName(e.peer)
	if err != nil {
		return nil, false, e.fail("%v", err)
	}
	e.username = name
	return nil, true, nil
}

// unrotate undoes a wrap token's right rotation (RFC 4121 4.2.5): the RRC bytes after the
// header are moved back to the end, and RRC set to 0.
func unrotate(b []byte) []byte {
	if len(b) < gssapi.HdrLen || !bytes.Equal(b[:2], []byte{0x05, 0x04}) {
		return b
	}
	rrc := int(binary.BigEndian.Uint16(b[6:8]))
	body := b[gssapi.HdrLen:]
	if rrc == 0 || len(body) == 0 {
		return b
	}
	rrc %= len(body)
	out := make([]byte, len(b))
	copy(out, b[:gssapi.HdrLen])
	out[6], out[7] = 0, 0
	copy(out[gssapi.HdrLen:], body[rrc:])
	copy(out[gssapi.HdrLen+len(body)-rrc:], body[:rrc])
	return out
}
