package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A broker whose client listener is SASL serves the console behind a login form, and the
// console acts with the user's credentials: a wrong password is refused, alice sees the
// topic her ACLs allow and not the operator's, and bob, whom no ACL names, gets Kafka's
// authorization error when he creates a topic.
func TestConsoleLogsInWithUsersCredentials(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";`
	b := testutil.StartBroker(t, "listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config="+jaas,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS", "http.listener="+addr)

	// The operator, on the PLAINTEXT listener (a super user as User:ANONYMOUS), makes a topic
	// of their own and one alice may use.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op, err := kgo.NewClient(kgo.SeedBrokers(b.ListenerAddr("PLAINTEXT").String()))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	adm := kadm.NewClient(op)
	for _, topic := range []string{"alice-topic", "operator-topic"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	acl := kadm.NewACLs().Allow("User:alice").Topics("alice-topic").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)
	if res, err := adm.CreateACLs(ctx, acl); err != nil || res[0].Err != nil {
		t.Fatalf("creating alice's ACL: %v %v", err, res)
	}

	base := "http://" + addr + "/console"
	browser := func() *http.Client {
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Jar: jar, Timeout: 20 * time.Second}
	}
	alice := browser()
	if res, body := get(t, alice, base+"/topics"); res.Request.URL.Path != "/console/login" || !strings.Contains(body, `id="login"`) {
		t.Fatalf("without a session: %s, want the login form", res.Request.URL)
	}
	if res, body := post(t, alice, base+"/login", url.Values{"username": {"alice"}, "password": {"wrong"}}); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "login failed") {
		t.Fatalf("a wrong password: %d\n%s", res.StatusCode, body)
	}
	if res, body := post(t, alice, base+"/login", url.Values{"username": {"alice"}, "password": {"alice-secret"}}); res.StatusCode != http.StatusOK || !strings.Contains(body, `id="brokers"`) {
		t.Fatalf("alice's login: %d\n%s", res.StatusCode, body)
	}
	_, body := get(t, alice, base+"/topics")
	if !strings.Contains(body, `data-topic="alice-topic"`) || strings.Contains(body, "operator-topic") {
		t.Fatalf("alice's topic list shows what her ACLs do not allow, or not what they do:\n%s", body)
	}

	bob := browser()
	if res, body := post(t, bob, base+"/login", url.Values{"username": {"bob"}, "password": {"bob-secret"}}); res.StatusCode != http.StatusOK {
		t.Fatalf("bob's login: %d\n%s", res.StatusCode, body)
	}
	if res, body := post(t, bob, base+"/topics", url.Values{"name": {"bob-topic"}}); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("bob creates a topic: %d\n%s", res.StatusCode, body)
	}
}

func get(t *testing.T, cl *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return res, readAll(t, res)
}

func post(t *testing.T, cl *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	res, err := cl.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	return res, readAll(t, res)
}

// A form posted from another site (a page elsewhere submitting to a console on loopback) is
// refused: the topic it would delete stays.
func TestConsoleRefusesCrossSitePosts(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := testutil.StartBroker(t, "http.listener="+addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	adm := kadm.NewClient(op)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/console/topics/kept/delete", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", "https://elsewhere.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, res)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site delete: %d, want 403", res.StatusCode)
	}
	md, err := adm.Metadata(ctx, "kept")
	if err != nil || md.Topics["kept"].Err != nil {
		t.Fatalf("the topic is gone: %v %v", err, md.Topics["kept"].Err)
	}
}
