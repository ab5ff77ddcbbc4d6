package security

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/flags"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The client side of SASL/GSSAPI, for the broker's own connections to other brokers, as
// Kafka's brokers run it with the JDK's GSSAPI SaslClient: the broker logs in with its
// keytab (the JAAS line's principal), asks the KDC for a ticket to
// <sasl.kerberos.service.name>/<host dialled>, and runs the exchange gssapi.go serves, with
// mutual authentication: the AP-REP must carry the authenticator's time, encrypted with the
// session key, so a server without the service's key cannot pass for a broker.

// gssapiClientExchange is one GSSAPI authentication of one connection, driven by
// Client.Authenticate with the server's answers.
type gssapiClientExchange struct {
	login *kerberosLogin
	host  string
	cl    *krbclient.Client
	auth  types.Authenticator
	key   types.EncryptionKey // the session key; the acceptor's subkey once it sends one
	sub   bool                // the AP-REP carried an acceptor subkey
}

// start logs in with the keytab and returns the initial context token for host.
func (x *gssapiClientExchange) start() ([]byte, error) {
	l := x.login
	x.cl = krbclient.NewWithKeytab(l.principal.PrincipalNameString(), l.realm, l.keytab.keys(), l.krb5, krbclient.DisablePAFXFAST(true))
	if err := x.cl.Login(); err != nil {
		return nil, fmt.Errorf("Kerberos login as %s@%s with %s: %w", l.principal.PrincipalNameString(), l.realm, l.keytabPath, err)
	}
	spn := l.serviceName + "/" + x.host
	tkt, key, err := x.cl.GetServiceTicket(spn)
	if err != nil {
		return nil, fmt.Errorf("Kerberos service ticket for %s: %w", spn, err)
	}
	auth, err := types.NewAuthenticator(x.cl.Credentials.Domain(), x.cl.Credentials.CName())
	if err != nil {
		return nil, err
	}
	cksum := make([]byte, 24)
	binary.LittleEndian.PutUint32(cksum[:4], 16)
	binary.LittleEndian.PutUint32(cksum[20:], uint32(gssapi.ContextFlagMutual|gssapi.ContextFlagInteg|gssapi.ContextFlagConf))
	auth.Cksum = types.Checksum{CksumType: chksumtype.GSSAPI, Checksum: cksum}
	req, err := messages.NewAPReq(tkt, key, auth)
	if err != nil {
		return nil, err
	}
	types.SetFlag(&req.APOptions, flags.APOptionMutualRequired)
	rb, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	oid, err := asn1.Marshal(gssapi.OIDKRB5.OID())
	if err != nil {
		return nil, err
	}
	x.auth, x.key = auth, key
	tok := append(append(oid, 0x01, 0x00), rb...)
	return asn1tools.AddASNAppTag(tok, 0), nil
}

// close ends the Kerberos client's sessions.
func (x *gssapiClientExchange) close() {
	if x.cl != nil {
		x.cl.Destroy()
	}
}

// apRep verifies the server's AP-REP: the authenticator's time, under the session key.
func (x *gssapiClientExchange) apRep(in []byte) error {
	var tok spnego.KRB5Token
	if err := tok.Unmarshal(in); err != nil {
		return fmt.Errorf("GSSAPI: the server's answer is not a Kerberos context token: %w", err)
	}
	if tok.IsKRBError() {
		return fmt.Errorf("GSSAPI: the server refused the ticket: %s", tok.KRBError.Error())
	}
	if !tok.IsAPRep() {
		return errors.New("GSSAPI: the server's answer holds no AP-REP")
	}
	b, err := crypto.DecryptEncPart(tok.APRep.EncPart, x.key, keyusage.AP_REP_ENCPART)
	if err != nil {
		return fmt.Errorf("GSSAPI: the AP-REP does not decrypt with the session key: %w", err)
	}
	var part messages.EncAPRepPart
	if err := part.Unmarshal(b); err != nil {
		return fmt.Errorf("GSSAPI: AP-REP: %w", err)
	}
	if !part.CTime.Equal(x.auth.CTime.Truncate(time.Second)) || part.Cusec != x.auth.Cusec {
		return errors.New("GSSAPI: the AP-REP does not answer this authenticator (mutual authentication failed)")
	}
	if len(part.Subkey.KeyValue) > 0 {
		x.key, x.sub = part.Subkey, true
	}
	return nil
}

// securityLayer verifies the server's offer and answers it: no security layer, no
// authorization id (the principal is the ticket's).
func (x *gssapiClientExchange) securityLayer(in []byte) ([]byte, error) {
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(unrotate(in), true); err != nil {
		return nil, fmt.Errorf("GSSAPI: the security layer offer is not a wrap token: %w", err)
	}
	if ok, err := wt.Verify(x.key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return nil, fmt.Errorf("GSSAPI: the security layer offer does not verify: %v", err)
	}
	if len(wt.Payload) != 4 || wt.Payload[0]&gssNoSecurityLayer == 0 {
		return nil, errors.New("GSSAPI: the server does not offer to run without a security layer")
	}
	et, err := crypto.GetEtype(x.key.KeyType)
	if err != nil {
		return nil, err
	}
	var fl byte
	if x.sub {
		fl = 0x04
	}
	out := gssapi.WrapToken{Flags: fl, EC: uint16(et.GetHMACBitLength() / 8), SndSeqNum: uint64(uint32(x.auth.SeqNumber)),
		Payload: []byte{gssNoSecurityLayer, gssMaxBuffer >> 16 & 0xff, gssMaxBuffer >> 8 & 0xff, gssMaxBuffer & 0xff}}
	if err := out.SetCheckSum(x.key, keyusage.GSSAPI_INITIATOR_SEAL); err != nil {
		return nil, err
	}
	return out.Marshal()
}

// authenticateGSSAPI runs the client side over step (one SaslAuthenticate round trip each).
func (c *Client) authenticateGSSAPI(host string, step func([]byte) ([]byte, error)) error {
	x := &gssapiClientExchange{login: c.Kerberos, host: host}
	defer x.close()
	tok, err := x.start()
	if err != nil {
		return err
	}
	rep, err := step(tok)
	if err != nil {
		return err
	}
	if err := x.apRep(rep); err != nil {
		return err
	}
	offer, err := step(nil)
	if err != nil {
		return err
	}
	answer, err := x.securityLayer(offer)
	if err != nil {
		return err
	}
	last, err := step(answer)
	if err != nil {
		return err
	}
	if len(last) != 0 {
		return errors.New("GSSAPI: the server answered the security layer choice with a token; expected none")
	}
	return nil
}
