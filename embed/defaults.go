package embed

import "maps"

// The broker configs embed sets, under Options.Config (which overrides each of them). This
// is the one place they are set: a key added to the broker that an embedded node must set
// differently from the server (a port of its own, a listener that must stay off) goes here.
//
// Each differs from Kafka's default for a reason a test in the same process has, never to
// change what a client sees of a partition, a record or an error:
//
//   - group.initial.rebalance.delay.ms=0: the first member of a new group is answered at
//     once, not after Kafka's 3 s wait for more members to join;
//
//   - broker.heartbeat.interval.ms=200 and broker.session.timeout.ms=2000 (Kafka: 2000 and
//     9000): a stopped or isolated node is fenced, and its leaderships moved, in about two
//     seconds instead of nine;
//
//   - replica.lag.time.max.ms=3000 (Kafka: 30000): a follower that stopped fetching leaves
//     the ISR in seconds, so acks=all producing goes on without it.
//
//   - http.listener=127.0.0.1:0 (Kafka has no such key; Gregor's default is 127.0.0.1:9644):
//     each node serves /metrics, /healthz and /readyz on a port of its own, since several
//     nodes, and other processes' brokers, share the machine.
var nodeDefaults = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"broker.heartbeat.interval.ms":     "200",
	"broker.session.timeout.ms":        "2000",
	"replica.lag.time.max.ms":          "3000",
	"http.listener":                    "127.0.0.1:0",
}

// Defaults returns the broker configs embed sets over Kafka's defaults (a copy): the ones
// Options.Config overrides. A harness that runs nodes in processes of their own uses them
// to behave as embedded nodes do.
func Defaults() map[string]string { return maps.Clone(nodeDefaults) }

// clusterKeys are placed by StartCluster for every node (its id, roles, listeners, the
// controller quorum, its log dir, the cluster id); Options.Config may not set them.
var clusterKeys = []string{
	"node.id", "process.roles", "cluster.id", "log.dirs", "log.dir",
	"listeners", "advertised.listeners", "listener.security.protocol.map",
	"inter.broker.listener.name", "controller.listener.names", "controller.quorum.voters",
}

// nodeKeys are placed by Start for a single node: its log dir is Options.Dir.
var nodeKeys = []string{"log.dirs", "log.dir"}
