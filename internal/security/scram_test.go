package security

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/pbkdf2"
)

type oneUser struct{ c ScramCredential }

func (o oneUser) ScramCredential(user, mech string) (ScramCredential, bool) {
	return o.c, user == "alice" && mech == ScramSHA256
}

func mac(key, data []byte) []byte { m := hmac.New(sha256.New, key); m.Write(data); return m.Sum(nil) }

// scramClient runs a client's side by hand; doubleNonce repeats the client nonce in the final
// message, as librdkafka before 2.6.1 does.
func scramClient(t *testing.T, ex exchange, password string, doubleNonce bool) error {
	t.Helper()
	cnonce := "fyko+d2lbbFgONRv9qkxdawL"
	first := "n=alice,r=" + cnonce
	out, _, err := ex.step([]byte("n,,"+first), time.Time{})
	if err != nil {
		return err
	}
	server1 := string(out)
	parts := strings.Split(server1, ",")
	nonce, saltB64 := parts[0][2:], parts[1][2:]
	salt, _ := base64.StdEncoding.DecodeString(saltB64)
	salted := pbkdf2.Key([]byte(password), salt, 4096, 32, sha256.New)
	if doubleNonce {
		nonce = cnonce + nonce
	}
	final := "c=biws,r=" + nonce
	ck := mac(salted, []byte("Client Key"))
	h := sha256.Sum256(ck)
	sig := mac(h[:], []byte(first+","+server1+","+final))
	proof := make([]byte, len(ck))
	for i := range ck {
		proof[i] = ck[i] ^ sig[i]
	}
	out, done, err := ex.step([]byte(final+",p="+base64.StdEncoding.EncodeToString(proof)), time.Time{})
	if err != nil {
		return err
	}
	want := "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, []byte("Server Key")), []byte(first+","+server1+","+final)))
	if !done || string(out) != want {
		t.Fatalf("server final %q done %v, want %q", out, done, want)
	}
	return nil
}

func TestScramServer(t *testing.T) {
	salt := []byte("0123456789abcdef")
	salted := pbkdf2.Key([]byte("pencil"), salt, 4096, 32, sha256.New)
	ck := sha256.Sum256(mac(salted, []byte("Client Key")))
	cred := ScramCredential{Salt: salt, Iterations: 4096, StoredKey: ck[:], ServerKey: mac(salted, []byte("Server Key"))}
	m, err := newScram(ScramSHA256, oneUser{cred})
	if err != nil {
		t.Fatal(err)
	}
	if err := scramClient(t, m.start(), "pencil", false); err != nil {
		t.Fatalf("right password: %v", err)
	}
	if err := scramClient(t, m.start(), "pencil", true); err != nil {
		t.Fatalf("right password, client nonce repeated (as Kafka accepts): %v", err)
	}
	if err := scramClient(t, m.start(), "wrong", false); err == nil {
		t.Fatal("a wrong password authenticated")
	}
	for _, bad := range []string{"", "p=tls-unique,,n=alice,r=x", "n,,r=x", "n,,n=alice", "n,a=bob,n=alice,r=x", "n,,n=alice,r=x,tokenauth=true", "n,,n=al=ice,r=x"} {
		if _, _, err := m.start().step([]byte(bad), time.Time{}); err == nil {
			t.Errorf("client-first %q accepted", bad)
		}
	}
	if n, ok := saslName("a=2Cb=3Dc"); !ok || n != "a,b=c" {
		t.Errorf("saslName: %q %v", n, ok)
	}
}
