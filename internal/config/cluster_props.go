package config

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Listener names of a cluster node written by ClusterNodeProperties: clients
// connect to CLIENT, brokers replicate over INTERNAL, and the controller
// quorum (and brokers talking to it) use CONTROLLER.
const (
	ClusterClientListener     = "CLIENT"
	ClusterInternalListener   = "INTERNAL"
	ClusterControllerListener = "CONTROLLER"
)

// ClusterNode describes one node of a local cluster for ClusterNodeProperties.
// Addresses are host:port.
type ClusterNode struct {
	ID        int32
	Roles     []string // process.roles: "broker", "controller" or both
	ClusterID string   // cluster.id, shared by every node of the cluster
	LogDir    string   // log.dirs

	ClientAddr     string // CLIENT listener (brokers only)
	InternalAddr   string // INTERNAL listener (brokers only)
	ControllerAddr string // CONTROLLER listener (controllers only)

	// AdvertisedInternalAddr is the INTERNAL address other brokers are told
	// to dial; "" advertises InternalAddr. A test puts a proxy here.
	AdvertisedInternalAddr string

	// Voters is controller.quorum.voters as this node dials them. Each node
	// may see the same voter at a different address (a proxy per pair).
	Voters []Voter

	// Brokers is how many brokers the cluster has; it caps the replication
	// factor of the internal topics (Kafka's 3) and their min ISR (2).
	Brokers int

	// Sets are extra key=value lines written last, so they override
	// everything above (a key given twice keeps its last value).
	Sets []string
}

// ClusterNodeProperties returns the server.properties text of one node of a
// KRaft-style cluster: Kafka's own keys (node.id, process.roles, listeners,
// advertised.listeners, listener.security.protocol.map,
// inter.broker.listener.name, controller.listener.names,
// controller.quorum.voters, log.dirs) plus cluster.id, with which an empty
// log dir is formatted. A broker-only node has no CONTROLLER listener but
// still names it in controller.listener.names and the protocol map, as Kafka
// requires, to know how to reach the quorum.
func ClusterNodeProperties(n ClusterNode) string {
	isBroker := contains(n.Roles, "broker")
	isController := contains(n.Roles, "controller")
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%s=%s\n", k, v) }

	fmt.Fprintf(&b, "# Node %d of cluster %s (%s).\n", n.ID, n.ClusterID, strings.Join(n.Roles, ","))
	line("node.id", strconv.Itoa(int(n.ID)))
	line("process.roles", strings.Join(n.Roles, ","))
	line("cluster.id", n.ClusterID)
	line("log.dirs", n.LogDir)

	var listeners, advertised []string
	if isBroker {
		listeners = append(listeners,
			ClusterClientListener+"://"+n.ClientAddr,
			ClusterInternalListener+"://"+n.InternalAddr)
		adv := n.AdvertisedInternalAddr
		if adv == "" {
			adv = n.InternalAddr
		}
		advertised = append(advertised,
			ClusterClientListener+"://"+n.ClientAddr,
			ClusterInternalListener+"://"+adv)
	}
	if isController {
		listeners = append(listeners, ClusterControllerListener+"://"+n.ControllerAddr)
	}
	b.WriteString("\n# Listeners: clients, replication between brokers, the controller quorum.\n")
	line("listeners", strings.Join(listeners, ","))
	if isBroker {
		line("advertised.listeners", strings.Join(advertised, ","))
	}
	line("listener.security.protocol.map", ClusterClientListener+":PLAINTEXT,"+
		ClusterInternalListener+":PLAINTEXT,"+ClusterControllerListener+":PLAINTEXT")
	line("inter.broker.listener.name", ClusterInternalListener)
	line("controller.listener.names", ClusterControllerListener)
	line("controller.quorum.voters", FormatVoters(n.Voters))

	if isBroker && n.Brokers > 0 {
		rf := min(n.Brokers, 3)
		b.WriteString("\n# Internal topics: Kafka's replication (3, min ISR 2), capped by the cluster's size.\n")
		line("offsets.topic.replication.factor", strconv.Itoa(rf))
		line("transaction.state.log.replication.factor", strconv.Itoa(rf))
		line("transaction.state.log.min.isr", strconv.Itoa(min(rf, 2)))
	}
	if len(n.Sets) > 0 {
		b.WriteString("\n# Overrides.\n")
		for _, s := range n.Sets {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// FormatVoters writes voters as controller.quorum.voters: id@host:port,...
func FormatVoters(vs []Voter) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.Itoa(int(v.ID)) + "@" + net.JoinHostPort(v.Host, strconv.Itoa(v.Port))
	}
	return strings.Join(s, ",")
}

// NewClusterID returns a random cluster id in Kafka's format: 16 random
// bytes, base64url without padding (22 characters), as kafka-storage.sh
// random-uuid prints.
func NewClusterID() string {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms.
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}
