package security_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/internal/wire"
)

// controllerSASLSSL are the configs of a cluster whose CONTROLLER listener is SASL_SSL with
// ca's certificates and PLAIN (admin is the brokers' own user towards the controllers).
func controllerSASLSSL(ca *testutil.CA) []string {
	p := "listener.name.controller."
	return []string{
		"listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:SASL_SSL",
		p + "ssl.keystore.type=PEM", p + "ssl.keystore.location=" + ca.KeyPEM("controller", ca.Issue("controller")),
		p + "ssl.truststore.type=PEM", p + "ssl.truststore.location=" + ca.TrustPEM(),
		p + "sasl.enabled.mechanisms=PLAIN", p + "plain.sasl.jaas.config=" + plainJAAS,
		"sasl.mechanism.controller.protocol=PLAIN",
	}
}

// metadataQuorum asks the controller at addr (SASL_SSL, trusting ca) for its view of the
// metadata quorum with DescribeQuorum.
func metadataQuorum(ctx context.Context, ca *testutil.CA, addr string) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	var none kmsg.DescribeQuorumResponseTopicPartition
	sec := &security.Client{TLS: &tls.Config{RootCAs: ca.Pool()}, Mechanism: security.Plain, Username: "admin", Password: "admin-secret"}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := wire.DialSecure(ctx, addr, "test", sec)
	if err != nil {
		return none, err
	}
	defer c.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 1
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	r, err := c.Request(ctx, req)
	if err != nil {
		return none, err
	}
	resp := r.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return none, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return none, kerr.UnknownTopicOrPartition
	}
	return resp.Topics[0].Partitions[0], nil
}

// A controller whose trust store does not hold the quorum's CA cannot join it: it cannot
// verify the other controllers' certificates, nor the client certificates they present
// when they dial it, so no raft message crosses either way. The other two elect an active
// controller and commit; the third knows no leader and has applied nothing. Its own
// CONTROLLER listener still serves the Kafka protocol over SASL_SSL (its key store is
// good), which is how the test asks it.
func TestControllerWithWrongTrustStoreCannotJoin(t *testing.T) {
	ca, other := testutil.NewCA(t), testutil.NewCA(t)
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: controllerSASLSSL(ca), NodeSets: map[int32][]string{
		3: {"listener.name.controller.ssl.truststore.location=" + other.TrustPEM()},
	}})
	thirdControllerShutOut(t, c, ca, "unknown authority")

	// A raft connection over TLS but without a client certificate is refused before its
	// hello is read: raft peers prove themselves with their certificate.
	good := c.Node(1)
	tc, err := tls.Dial("tcp", good.ControllerAddr(), &tls.Config{RootCAs: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := tc.Write([]byte("GRFT\x01\x02\x00")); err != nil {
		t.Fatal(err)
	}
	if err := tc.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := tc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a raft connection without a client certificate was kept open (read %d bytes, %v)", n, err)
	}
	c.WaitFor(t, 10*time.Second, func() bool {
		b, err := os.ReadFile(good.LogFile)
		return err == nil && strings.Contains(string(b), "refused controller connection") && strings.Contains(string(b), "no verified client certificate")
	}, "controller 1 to log the refused raft connection")
}

// thirdControllerShutOut checks that controllers 1 and 2 elect an active controller and
// commit while controller 3, which logs why (refused, a substring of its log), knows no
// leader and has applied less; it keeps running.
func thirdControllerShutOut(t *testing.T, c *testutil.Cluster, ca *testutil.CA, refused string) {
	t.Helper()
	ctx := ctxT(t)
	var led kmsg.DescribeQuorumResponseTopicPartition
	c.WaitFor(t, 60*time.Second, func() bool {
		var err error
		led, err = metadataQuorum(ctx, ca, c.Node(1).ControllerAddr())
		return err == nil && (led.LeaderID == 1 || led.LeaderID == 2) && led.HighWatermark > 0
	}, "controllers 1 and 2 to elect an active controller over TLS and commit")
	bad := c.Node(3)
	c.WaitFor(t, 30*time.Second, func() bool {
		b1, err1 := os.ReadFile(c.Node(1).LogFile)
		b3, err3 := os.ReadFile(bad.LogFile)
		return (err1 == nil && strings.Contains(string(b1), refused)) || (err3 == nil && strings.Contains(string(b3), refused))
	}, "controller 3 to be refused: "+refused)
	got, err := metadataQuorum(ctx, ca, bad.ControllerAddr())
	if err != nil {
		t.Fatalf("DescribeQuorum to controller 3: %v", err)
	}
	if got.LeaderID != -1 || got.HighWatermark >= led.HighWatermark {
		t.Fatalf("controller 3 joined the quorum: leader %d, applied %d (controller 1: leader %d, applied %d)", got.LeaderID, got.HighWatermark, led.LeaderID, led.HighWatermark)
	}
	if !bad.Running() {
		t.Fatal("controller 3 exited")
	}
}

// With an authorizer, a raft peer's certificate must map to a super user (KIP-801): a
// controller whose certificate, from the same CA, names another subject cannot join.
func TestControllerNotSuperUserCannotJoin(t *testing.T) {
	ca := testutil.NewCA(t)
	sets := append(controllerSASLSSL(ca), standardAuthorizer, "super.users=User:CN=controller,O=Gregor;User:ANONYMOUS")
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: sets, NodeSets: map[int32][]string{
		3: {"listener.name.controller.ssl.keystore.location=" + ca.KeyPEM("intruder", ca.Issue("intruder"))},
	}})
	thirdControllerShutOut(t, c, ca, "not one of super.users")
}

// SCRAM on a controller listener authenticates against the controller's own state (a
// controller-only node has no broker metadata image): a user created with
// AlterUserScramCredentials logs in to the controllers too, while the brokers use PLAIN.
func TestSCRAMOnControllerListener(t *testing.T) {
	ca := testutil.NewCA(t)
	sets := append(controllerSASLSSL(ca), "listener.name.controller.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256")
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1, Sets: sets})
	adm := kadm.NewClient(c.Client(t))
	res, err := adm.AlterUserSCRAMs(ctxT(t), nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	dial := func(password string) error {
		sec := &security.Client{TLS: &tls.Config{RootCAs: ca.Pool()}, Mechanism: security.ScramSHA256, Username: "carol", Password: password}
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		defer cancel()
		wc, err := wire.DialSecure(ctx, c.Node(1).ControllerAddr(), "test", sec)
		if err == nil {
			wc.Close()
		}
		return err
	}
	if err := dial("carol-secret"); err != nil {
		t.Fatalf("SCRAM login to the controller: %v", err)
	}
	if err := dial("wrong"); err == nil {
		t.Fatal("a wrong SCRAM password logged in to the controller")
	}
}
