package replication

import (
	"testing"
	"time"

	"github.com/gregor-project/gregor/internal/testutil"
)

// killRounds is how many times TestKillLeaderRepeatedly kills the leader.
const killRounds = 10

// Test 1: the leader of a partition with replication factor 3 and
// min.insync.replicas 2 is killed with SIGKILL again and again while an
// idempotent acks=all producer writes. Each round waits for the ISR to be
// full (the node killed in the last round back in it), kills the current
// leader, waits for the survivors to elect another and for the producer to
// get writes through it, and restarts the dead node. Afterwards no
// acknowledged record may be missing, duplicated or at another offset, the
// offsets are contiguous and the three logs are byte-identical below the
// high watermark.
func TestKillLeaderRepeatedly(t *testing.T) {
	killLeaderRepeatedly(t, testutil.ClusterOptions{Nodes: 3}, killRounds)
}

// The same test with replication secured: the brokers' INTERNAL listener is SASL_SSL (TLS
// with the test CA's certificates, SASL PLAIN between brokers), so every follower fetch and
// every marker crosses TLS and authenticates, through the kills and restarts.
func TestKillLeaderRepeatedlySecured(t *testing.T) {
	ca := testutil.NewCA(t)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";`
	killLeaderRepeatedly(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{
		"listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT",
		"listener.name.internal.ssl.keystore.type=PEM",
		"listener.name.internal.ssl.keystore.location=" + ca.KeyPEM("broker", ca.Issue("broker")),
		"listener.name.internal.ssl.truststore.type=PEM",
		"listener.name.internal.ssl.truststore.location=" + ca.TrustPEM(),
		"listener.name.internal.sasl.enabled.mechanisms=PLAIN",
		"listener.name.internal.plain.sasl.jaas.config=" + jaas,
		"sasl.mechanism.inter.broker.protocol=PLAIN",
	}}, 4)
}

// The same test with the cluster secured everywhere between nodes: INTERNAL and CONTROLLER
// are both SASL_SSL (the test CA's certificates, SASL PLAIN), so follower fetches, markers,
// broker registrations and heartbeats, forwarded requests and metadata fetches cross TLS and
// authenticate, and the controllers' raft traffic crosses mutual TLS, through every kill
// and restart (a restarted node rejoins the quorum over TLS).
func TestKillLeaderRepeatedlyFullySecured(t *testing.T) {
	ca := testutil.NewCA(t)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";`
	keyStore, trustStore := ca.KeyPEM("broker", ca.Issue("broker")), ca.TrustPEM()
	sets := []string{"listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL"}
	for _, l := range []string{"internal", "controller"} {
		p := "listener.name." + l + "."
		sets = append(sets,
			p+"ssl.keystore.type=PEM", p+"ssl.keystore.location="+keyStore,
			p+"ssl.truststore.type=PEM", p+"ssl.truststore.location="+trustStore,
			p+"sasl.enabled.mechanisms=PLAIN", p+"plain.sasl.jaas.config="+jaas)
	}
	sets = append(sets, "sasl.mechanism.inter.broker.protocol=PLAIN", "sasl.mechanism.controller.protocol=PLAIN")
	killLeaderRepeatedly(t, testutil.ClusterOptions{Nodes: 3, Sets: sets}, 3)
}

func killLeaderRepeatedly(t *testing.T, opt testutil.ClusterOptions, killRounds int) {
	c := testutil.StartCluster(t, opt)
	const topic = "kill-leader"
	CreateTopic(t, c, topic, 3, map[string]string{"min.insync.replicas": "2"})

	p := StartProducer(t, c, topic, ProducerOptions{})
	p.WaitAcked(t, 200, 30*time.Second)
	start := time.Now()
	var leaders []int32
	for round := range killRounds {
		st := WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "a full ISR")
		old := st.Leader
		leaders = append(leaders, old)
		c.Node(old).Kill()
		var survivors []string
		for _, n := range c.Nodes() {
			if n.ID != old {
				survivors = append(survivors, n.ClientAddr())
			}
		}
		next := WaitPartition(t, c, topic, 0, 30*time.Second, func(s PartitionState) bool {
			return s.Leader >= 0 && s.Leader != old && s.LeaderEpoch > st.LeaderEpoch
		}, "a new leader", survivors...)
		// Writes go through the new leader before the old one returns.
		p.WaitMoreAcked(t, 100, 30*time.Second)
		t.Logf("round %d: killed leader %d (epoch %d); node %d leads at epoch %d; %d acknowledged, %d failed",
			round, old, st.LeaderEpoch, next.Leader, next.LeaderEpoch, p.Acked(), p.Failed())
		c.Node(old).Start()
	}
	WaitPartition(t, c, topic, 0, 30*time.Second, PartitionState.FullISR, "a full ISR after the last restart")
	p.WaitMoreAcked(t, 100, 30*time.Second)
	res := p.Stop()
	t.Logf("%d kills in %v (leaders killed %v); produced %d: acknowledged %d, failed %d %v",
		killRounds, time.Since(start).Round(time.Millisecond), leaders, res.Sent, len(res.Acked), len(res.Failed), res.ErrorCounts())
	Verify(t, c, topic, res)
}
