// Package embed runs Gregor inside the calling Go process: one node, or a cluster of several,
// on loopback ports it picks, with real storage, replication, consumer groups and
// transactions. It is the server's own code (the broker, the controller quorum, the log), not
// a fake: what a test sees is what a Kafka client sees against `gregor server`.
//
//	n, err := embed.Start(ctx, embed.Options{})
//	...
//	defer n.Close()
//	client, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
//
// A Cluster adds what a test of failures needs: Stop and Restart a node (a clean shutdown
// and a start on the same data), and Isolate and Heal it (a network partition: its
// connections to the other nodes are cut and new ones refused, while clients keep
// reaching it, as a broker cut off from its peers but not from its clients would be).
// Package embedtest ties both to testing.TB.
//
// # Shape
//
//   - Options carries the data directory (a temporary one, removed on Close, when empty)
//     and broker configs by Kafka's names. The configs embed sets itself (short broker
//     sessions, no initial rebalance delay) are in one place, defaults.go, and every one of
//     them yields to Options.Config. Keys that place a node in its cluster (node.id,
//     listeners, controller.quorum.voters, log.dirs, ...) belong to a Cluster and are
//     refused there.
//   - A node is internal/broker's Broker started with broker.Start, the path `gregor server`
//     takes. A cluster's ports are bound before any node starts and handed to the brokers
//     bound (broker.Options.Listeners), so no other process can take one meanwhile; a
//     restarted node binds the same ports again.
//   - Every connection a cluster node opens to another node goes through the cluster's
//     network (network.go, broker.Options.Dial), which knows each node by its ports: that is
//     where Isolate cuts. No proxy sits in the data path.
//
// `gregor server` calls broker.Start itself rather than this package: what embed adds
// (loopback ports of its own choosing, a temporary directory, the defaults for tests in one
// process, the network between nodes) is what a server must not have.
//
// Start-up takes what a server's start-up takes less the waits that only matter among
// separate processes: a single node is its own controller quorum and leads at once, and
// node 1 of a new cluster campaigns as it starts instead of after an election timeout (its
// peers' ports are bound already). One node serves in 10-20 ms and three in under 100 ms;
// docs/benchmarks.md has the figures and how to reproduce them.
package embed
