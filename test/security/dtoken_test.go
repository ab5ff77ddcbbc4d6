package security_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// scramAs is a SCRAM-SHA-512 login; asToken logs in with a delegation token (tokenauth=true).
func scramAs(user, pass string, asToken bool) kgo.Opt {
	return kgo.SASL(scram.Auth{User: user, Pass: pass, IsToken: asToken}.AsSha512Mechanism())
}

func createToken(t *testing.T, cl *kgo.Client, maxLife int64, owner string, renewers ...string) *kmsg.CreateDelegationTokenResponse {
	t.Helper()
	req := kmsg.NewPtrCreateDelegationTokenRequest()
	req.MaxLifetimeMillis = maxLife
	if owner != "" {
		typ := "User"
		req.OwnerPrincipalType, req.OwnerPrincipalName = &typ, &owner
	}
	for _, r := range renewers {
		rn := kmsg.NewCreateDelegationTokenRequestRenewer()
		rn.PrincipalType, rn.PrincipalName = "User", r
		req.Renewers = append(req.Renewers, rn)
	}
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func describeTokens(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	resp, err := kmsg.NewPtrDescribeDelegationTokenRequest().RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("describe tokens: %v", err)
	}
	var ids []string
	for _, d := range resp.TokenDetails {
		ids = append(ids, d.TokenID)
	}
	return ids
}

// Delegation tokens (KIP-48) end to end on a SASL_PLAINTEXT/SCRAM listener with ACLs: alice
// creates a token with bob as renewer; a client logging in with the token (SCRAM,
// tokenauth=true) is alice, and may not ask for tokens itself; carol may neither renew nor
// see it until an ACL lets her describe it; bob renews it; the tool describes and expires it,
// after which the token no longer logs in; a token past its expiry no longer logs in and is
// swept away; tokens are refused over PLAINTEXT, for another owner without CREATE_TOKENS,
// when the broker's connection to the controller is no super user, and on a broker without
// delegation.token.secret.key.
func TestDelegationTokens(t *testing.T) {
	b := startSecure(t, []string{"SASL_PLAINTEXT"}, "sasl.enabled.mechanisms=SCRAM-SHA-512",
		standardAuthorizer, "super.users=User:ANONYMOUS",
		"delegation.token.secret.key=gregor-test-secret", "delegation.token.expiry.check.interval.ms=200")
	addr := addrOf(t, b, "SASL_PLAINTEXT")
	op := client(t, addrOf(t, b, "PLAINTEXT"))
	for _, u := range []string{"alice", "bob", "carol"} {
		setScram(t, op, u, u+"-secret")
	}
	allowTopic(t, b, "User:alice", "dt")
	alice := client(t, addr, scramAs("alice", "alice-secret", false))
	carol := client(t, addr, scramAs("carol", "carol-secret", false))

	if r := createToken(t, op, -1, ""); r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Fatalf("a token over PLAINTEXT: %v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := createToken(t, alice, -1, "dave"); r.ErrorCode != kerr.DelegationTokenAuthorizationFailed.Code {
		t.Fatalf("a token for dave without CREATE_TOKENS: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	tok := createToken(t, alice, -1, "", "bob")
	if tok.ErrorCode != 0 || tok.TokenID == "" || len(tok.HMAC) == 0 || tok.PrincipalName != "alice" {
		t.Fatalf("alice's token: %+v (%v)", tok, kerr.ErrorForCode(tok.ErrorCode))
	}
	hmacB64 := base64.StdEncoding.EncodeToString(tok.HMAC)

	// Logged in with the token, a client is alice: it writes to her topic.
	if _, err := kadm.NewClient(alice).CreateTopic(ctxT(t), 1, 1, nil, "dt"); err != nil {
		t.Fatal(err)
	}
	asToken := client(t, addr, scramAs(tok.TokenID, hmacB64, true))
	if err := asToken.ProduceSync(ctxT(t), &kgo.Record{Topic: "dt", Value: []byte("by token")}).FirstErr(); err != nil {
		t.Fatalf("writing as alice through her token: %v", err)
	}
	if r := createToken(t, asToken, -1, ""); r.ErrorCode != kerr.DelegationTokenRequestNotAllowed.Code {
		t.Fatalf("a token asked for over a token: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := client(t, addr, scramAs(tok.TokenID, "wrong", true)).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a token with a wrong HMAC: %v", err)
	}

	renew := func(cl *kgo.Client) *kmsg.RenewDelegationTokenResponse {
		req := kmsg.NewPtrRenewDelegationTokenRequest()
		req.HMAC, req.RenewTimeMillis = tok.HMAC, 60_000
		r, err := req.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := renew(carol); r.ErrorCode != kerr.DelegationTokenOwnerMismatch.Code {
		t.Fatalf("carol renews: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if ids := describeTokens(t, carol); len(ids) != 0 {
		t.Fatalf("carol sees %v", ids)
	}
	plainAddr := addrOf(t, b, "PLAINTEXT")
	if out, err := gregor(t, "", "acl", "add", "--allow-principal", "User:carol", "--operation", "Describe", "--delegation-token", tok.TokenID, "-b", plainAddr); err != nil {
		t.Fatalf("acl add --delegation-token: %q %v", out, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ids := describeTokens(t, carol); len(ids) != 1 || ids[0] != tok.TokenID; ids = describeTokens(t, carol) {
		if time.Now().After(deadline) {
			t.Fatalf("carol with DESCRIBE on the token sees %v", ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bob := client(t, addr, scramAs("bob", "bob-secret", false))
	if r := renew(bob); r.ErrorCode != 0 || r.ExpiryTimestamp < tok.IssueTimestamp+55_000 || r.ExpiryTimestamp > tok.MaxTimestamp {
		t.Fatalf("bob renews: expiry %d %v", r.ExpiryTimestamp, kerr.ErrorForCode(r.ErrorCode))
	}

	// A token for another owner, with CREATE_TOKENS on that user: it logs in as dave, who has
	// no password of his own.
	if out, err := gregor(t, "", "acl", "add", "--allow-principal", "User:alice", "--operation", "CreateTokens", "--user-principal", "User:dave", "-b", plainAddr); err != nil {
		t.Fatalf("acl add --user-principal: %q %v", out, err)
	}
	var forDave *kmsg.CreateDelegationTokenResponse
	deadline = time.Now().Add(10 * time.Second)
	for forDave = createToken(t, alice, -1, "dave"); forDave.ErrorCode != 0; forDave = createToken(t, alice, -1, "dave") {
		if time.Now().After(deadline) {
			t.Fatalf("a token for dave with CREATE_TOKENS: %v", kerr.ErrorForCode(forDave.ErrorCode))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if forDave.PrincipalName != "dave" || forDave.TokenRequesterPrincipalName != "alice" {
		t.Fatalf("owner %s, requester %s: want dave and alice", forDave.PrincipalName, forDave.TokenRequesterPrincipalName)
	}
	if err := client(t, addr, scramAs(forDave.TokenID, base64.StdEncoding.EncodeToString(forDave.HMAC), true)).Ping(ctxT(t)); err != nil {
		t.Fatalf("dave's token: %v", err)
	}
	out, err := gregor(t, "", "acl", "list", "--user-principal", "User:dave", "-b", plainAddr)
	if err != nil || !strings.Contains(out, "CREATE_TOKENS") || !strings.Contains(out, "User:alice") {
		t.Fatalf("acl list --user-principal: %q %v", out, err)
	}
	if out, err := gregor(t, "", "acl", "remove", "--user-principal", "User:dave", "-b", plainAddr); err != nil || !strings.Contains(out, "User:alice") {
		t.Fatalf("acl remove --user-principal: %q %v", out, err)
	}
	if out, _ := gregor(t, "", "acl", "list", "--user-principal", "User:dave", "-b", plainAddr); strings.Contains(out, "User:alice") {
		t.Fatalf("the USER ACL is still there: %q", out)
	}

	// The tool, as alice.
	props := writeProps(t, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`+"\n")
	out, err = gregor(t, "", "delegation-token", "describe", "-b", addr, "--command-config", props)
	if err != nil || !strings.Contains(out, tok.TokenID) || !strings.Contains(out, hmacB64) || !strings.Contains(out, "User:bob") {
		t.Fatalf("describe: %q %v", out, err)
	}
	if out, err := gregor(t, "", "delegation-token", "expire", "--hmac", hmacB64, "--expiry-time-period", "-1", "-b", addr, "--command-config", props); err != nil {
		t.Fatalf("expire: %q %v", out, err)
	}
	if err := client(t, addr, scramAs(tok.TokenID, hmacB64, true)).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("an expired token logs in: %v", err)
	}
	out, err = gregor(t, "", "delegation-token", "create", "--max-life-time-period", "1500", "-b", addr, "--command-config", props, "-o", "json")
	if err != nil || !strings.Contains(out, `"token_id"`) {
		t.Fatalf("create: %q %v", out, err)
	}

	// A token lives no longer than its max: then it no longer logs in, and the sweep
	// removes it.
	short := createToken(t, alice, 1500, "")
	if short.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(short.ErrorCode))
	}
	shortPass := base64.StdEncoding.EncodeToString(short.HMAC)
	if err := client(t, addr, scramAs(short.TokenID, shortPass, true)).Ping(ctxT(t)); err != nil {
		t.Fatalf("a fresh short token: %v", err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		ids := describeTokens(t, alice)
		if !contains(ids, short.TokenID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the short token was never swept: %v", ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := client(t, addr, scramAs(short.TokenID, shortPass, true)).Ping(ctxT(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("a token past its life logs in: %v", err)
	}

	// With an authorizer, only a super user may send the controller an Envelope (Kafka asks
	// CLUSTER_ACTION): here the broker's own connection to its controller is not one.
	strict := startSecure(t, []string{"SASL_PLAINTEXT"}, "sasl.enabled.mechanisms=SCRAM-SHA-512",
		standardAuthorizer, "super.users=User:admin", "allow.everyone.if.no.acl.found=true",
		"delegation.token.secret.key=gregor-test-secret")
	setScram(t, client(t, addrOf(t, strict, "PLAINTEXT")), "alice", "alice-secret")
	if r := createToken(t, client(t, addrOf(t, strict, "SASL_PLAINTEXT"), scramAs("alice", "alice-secret", false)), -1, ""); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("an envelope from a principal that is no super user: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(r.ErrorCode))
	}

	off := startSecure(t, []string{"SASL_PLAINTEXT"}, "sasl.enabled.mechanisms=SCRAM-SHA-512")
	setScram(t, client(t, addrOf(t, off, "PLAINTEXT")), "alice", "alice-secret")
	if r := createToken(t, client(t, addrOf(t, off, "SASL_PLAINTEXT"), scramAs("alice", "alice-secret", false)), -1, ""); r.ErrorCode != kerr.DelegationTokenAuthDisabled.Code {
		t.Fatalf("a broker without delegation.token.secret.key: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
