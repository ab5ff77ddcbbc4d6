package config

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Broker is the broker configuration: Kafka's server.properties keys, with
// Kafka's names, types, defaults and validation (see brokerDefs for the full
// table). Defaults are Kafka's except where a single-node Gregor needs
// otherwise; each such default says "Kafka: ..." in brokerDefs.
//
// A *Broker is an immutable snapshot: its exported fields are never written
// after Parse returns, so any number of goroutines may read them. Runtime
// changes (SetDynamic and friends, see dynamic.go) are copy-on-write: they
// build a new snapshot and publish it atomically, and Current returns the
// newest one. The methods Values, Explicit, TopicDefaults, ResolveTopic,
// DescribeTopic and DescribeBroker always read the newest snapshot; to read
// several fields consistently with dynamic changes, take cur := b.Current()
// once and read cur's fields.
//
// Durations are milliseconds (int64) named after their Kafka key; -1 in
// LogRetentionMs / LogRetentionBytes means unlimited, and math.MaxInt64
// means "never" for the flush settings.
type Broker struct {
	// Server and networking.
	NodeID                       int32             // node.id (Kafka: required; here 1)
	ProcessRoles                 []string          // process.roles (Kafka: required; here broker,controller)
	ClusterID                    string            // cluster.id: formats an empty log dir (Kafka: kafka-storage format --cluster-id)
	Listeners                    []Listener        // listeners
	AdvertisedListeners          []Listener        // advertised.listeners (default: listeners minus controller listeners)
	ListenerSecurityProtocolMap  map[string]string // listener.security.protocol.map, effective (controller listeners default to PLAINTEXT)
	InterBrokerListenerName      string            // inter.broker.listener.name (default PLAINTEXT)
	ControllerListenerNames      []string          // controller.listener.names
	ControllerQuorumVoters       string            // controller.quorum.voters, validated by ParseVoters
	ControllerQuorumBootstrap    []string          // controller.quorum.bootstrap.servers
	BrokerRack                   string            // broker.rack ("" = none)
	NumNetworkThreads            int32             // num.network.threads
	NumIOThreads                 int32             // num.io.threads
	QueuedMaxRequests            int32             // queued.max.requests
	QueuedMaxRequestBytes        int64             // queued.max.request.bytes (-1 = no limit)
	SocketSendBufferBytes        int32             // socket.send.buffer.bytes (-1 = OS default)
	SocketReceiveBufferBytes     int32             // socket.receive.buffer.bytes (-1 = OS default)
	SocketRequestMaxBytes        int32             // socket.request.max.bytes
	ConnectionsMaxIdleMs         int64             // connections.max.idle.ms
	MaxConnections               int32             // max.connections: over the broker's listeners (per listener: ListenerConnectionLimits)
	MaxConnectionsPerIP          int32             // max.connections.per.ip
	MaxConnectionsPerIPOverrides map[string]int32  // max.connections.per.ip.overrides: host (IP or name, as written) -> limit
	MaxConnectionCreationRate    int32             // max.connection.creation.rate: connections/s, broker-wide and default per listener
	FetchMaxBytes                int32             // fetch.max.bytes
	BrokerHeartbeatIntervalMs    int32             // broker.heartbeat.interval.ms
	BrokerSessionTimeoutMs       int32             // broker.session.timeout.ms
	HTTPListener                 string            // http.listener: /metrics, /healthz, /readyz ("" = off)

	// Topics.
	NumPartitions               int32  // num.partitions
	DefaultReplicationFactor    int32  // default.replication.factor
	AutoCreateTopicsEnable      bool   // auto.create.topics.enable
	DeleteTopicEnable           bool   // delete.topic.enable
	MessageMaxBytes             int32  // message.max.bytes
	CompressionType             string // compression.type
	CompressionGzipLevel        int32  // compression.gzip.level
	CompressionLz4Level         int32  // compression.lz4.level
	CompressionZstdLevel        int32  // compression.zstd.level
	MinInsyncReplicas           int32  // min.insync.replicas
	UncleanLeaderElectionEnable bool   // unclean.leader.election.enable

	// Log.
	LogDirs                                 []string // log.dirs, else log.dir
	MetadataLogDir                          string   // metadata.log.dir ("" = first of LogDirs)
	NumRecoveryThreadsPerDataDir            int32    // num.recovery.threads.per.data.dir
	LogSegmentBytes                         int32    // log.segment.bytes
	LogRollMs                               int64    // log.roll.ms, else log.roll.hours
	LogRollJitterMs                         int64    // log.roll.jitter.ms, else log.roll.jitter.hours
	LogRetentionMs                          int64    // log.retention.ms, else .minutes, else .hours; -1 = unlimited
	LogRetentionBytes                       int64    // log.retention.bytes; -1 = unlimited
	LogRetentionCheckIntervalMs             int64    // log.retention.check.interval.ms
	LogCleanupPolicy                        []string // log.cleanup.policy
	LogIndexSizeMaxBytes                    int32    // log.index.size.max.bytes
	LogIndexIntervalBytes                   int32    // log.index.interval.bytes
	LogFlushIntervalMessages                int64    // log.flush.interval.messages
	LogFlushIntervalMs                      int64    // log.flush.interval.ms, else log.flush.scheduler.interval.ms
	LogFlushSchedulerIntervalMs             int64    // log.flush.scheduler.interval.ms
	LogFlushOffsetCheckpointIntervalMs      int32    // log.flush.offset.checkpoint.interval.ms
	LogFlushStartOffsetCheckpointIntervalMs int32    // log.flush.start.offset.checkpoint.interval.ms
	LogSegmentDeleteDelayMs                 int64    // log.segment.delete.delay.ms
	LogPreallocate                          bool     // log.preallocate
	LogMessageTimestampType                 string   // log.message.timestamp.type: CreateTime or LogAppendTime
	LogMessageTimestampDifferenceMaxMs      int64    // log.message.timestamp.difference.max.ms
	LogMessageTimestampBeforeMaxMs          int64    // log.message.timestamp.before.max.ms
	LogMessageTimestampAfterMaxMs           int64    // log.message.timestamp.after.max.ms
	LogCleanerEnable                        bool     // log.cleaner.enable
	LogCleanerThreads                       int32    // log.cleaner.threads
	LogCleanerDeleteRetentionMs             int64    // log.cleaner.delete.retention.ms
	LogCleanerMinCompactionLagMs            int64    // log.cleaner.min.compaction.lag.ms
	LogCleanerMaxCompactionLagMs            int64    // log.cleaner.max.compaction.lag.ms
	LogCleanerMinCleanableRatio             float64  // log.cleaner.min.cleanable.ratio
	LogCleanerDedupeBufferSize              int64    // log.cleaner.dedupe.buffer.size
	LogCleanerIOBufferSize                  int32    // log.cleaner.io.buffer.size
	LogCleanerIOBufferLoadFactor            float64  // log.cleaner.io.buffer.load.factor
	LogCleanerIOMaxBytesPerSecond           float64  // log.cleaner.io.max.bytes.per.second
	LogCleanerBackoffMs                     int64    // log.cleaner.backoff.ms

	// Replication.
	ReplicaLagTimeMaxMs                      int64 // replica.lag.time.max.ms
	ReplicaFetchMaxBytes                     int32 // replica.fetch.max.bytes
	ReplicaFetchMinBytes                     int32 // replica.fetch.min.bytes
	ReplicaFetchWaitMaxMs                    int32 // replica.fetch.wait.max.ms
	ReplicaFetchResponseMaxBytes             int32 // replica.fetch.response.max.bytes
	ReplicaFetchBackoffMs                    int32 // replica.fetch.backoff.ms
	ReplicaSocketTimeoutMs                   int32 // replica.socket.timeout.ms
	ReplicaSocketReceiveBufferBytes          int32 // replica.socket.receive.buffer.bytes
	ReplicaHighWatermarkCheckpointIntervalMs int64 // replica.high.watermark.checkpoint.interval.ms
	NumReplicaFetchers                       int32 // num.replica.fetchers
	AutoLeaderRebalanceEnable                bool  // auto.leader.rebalance.enable
	LeaderImbalanceCheckIntervalSeconds      int64 // leader.imbalance.check.interval.seconds
	LeaderImbalancePerBrokerPercentage       int32 // leader.imbalance.per.broker.percentage
	LeaderReplicationThrottledRate           int64 // leader.replication.throttled.rate: bytes/s; math.MaxInt64 = no throttle
	FollowerReplicationThrottledRate         int64 // follower.replication.throttled.rate: bytes/s; math.MaxInt64 = no throttle
	ReplicaAlterLogDirsIOMaxBytesPerSecond   int64 // replica.alter.log.dirs.io.max.bytes.per.second: bytes/s copied by log dir moves; math.MaxInt64 = no throttle

	ReplicaSelectorClass string // replica.selector.class: "" (consumers read from leaders) or RackAwareReplicaSelector

	// Client quotas (KIP-13, KIP-124): the sample windows client rates are measured over.
	QuotaWindowNum         int32 // quota.window.num
	QuotaWindowSizeSeconds int32 // quota.window.size.seconds

	// Fetch sessions (KIP-227).
	MaxIncrementalFetchSessionCacheSlots int32 // max.incremental.fetch.session.cache.slots

	// Groups and offsets.
	OffsetsTopicNumPartitions       int32 // offsets.topic.num.partitions
	OffsetsTopicReplicationFactor   int16 // offsets.topic.replication.factor (Kafka: 3; here 1)
	OffsetsTopicSegmentBytes        int32 // offsets.topic.segment.bytes
	OffsetsRetentionMinutes         int32 // offsets.retention.minutes
	OffsetsRetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms
	OffsetsCommitTimeoutMs          int32 // offsets.commit.timeout.ms
	GroupInitialRebalanceDelayMs    int32 // group.initial.rebalance.delay.ms
	GroupMinSessionTimeoutMs        int32 // group.min.session.timeout.ms
	GroupMaxSessionTimeoutMs        int32 // group.max.session.timeout.ms
	GroupMaxSize                    int32 // group.max.size

	// Consumer groups of KIP-848's consumer protocol.
	GroupConsumerSessionTimeoutMs       int32    // group.consumer.session.timeout.ms
	GroupConsumerMinSessionTimeoutMs    int32    // group.consumer.min.session.timeout.ms
	GroupConsumerMaxSessionTimeoutMs    int32    // group.consumer.max.session.timeout.ms
	GroupConsumerHeartbeatIntervalMs    int32    // group.consumer.heartbeat.interval.ms
	GroupConsumerMinHeartbeatIntervalMs int32    // group.consumer.min.heartbeat.interval.ms
	GroupConsumerMaxHeartbeatIntervalMs int32    // group.consumer.max.heartbeat.interval.ms
	GroupConsumerMaxSize                int32    // group.consumer.max.size
	GroupConsumerAssignors              []string // group.consumer.assignors
	GroupConsumerMigrationPolicy        string   // group.consumer.migration.policy

	// Share groups (KIP-932, internal/share).
	GroupShareSessionTimeoutMs        int32 // group.share.session.timeout.ms
	GroupShareMinSessionTimeoutMs     int32 // group.share.min.session.timeout.ms
	GroupShareMaxSessionTimeoutMs     int32 // group.share.max.session.timeout.ms
	GroupShareHeartbeatIntervalMs     int32 // group.share.heartbeat.interval.ms
	GroupShareMinHeartbeatIntervalMs  int32 // group.share.min.heartbeat.interval.ms
	GroupShareMaxHeartbeatIntervalMs  int32 // group.share.max.heartbeat.interval.ms
	GroupShareRecordLockDurationMs    int32 // group.share.record.lock.duration.ms
	GroupShareMinRecordLockDurationMs int32 // group.share.min.record.lock.duration.ms
	GroupShareMaxRecordLockDurationMs int32 // group.share.max.record.lock.duration.ms
	GroupShareDeliveryCountLimit      int32 // group.share.delivery.count.limit
	GroupSharePartitionMaxRecordLocks int32 // group.share.partition.max.record.locks

	// Transactions and producer ids.
	TransactionStateLogNumPartitions     int32 // transaction.state.log.num.partitions
	TransactionStateLogReplicationFactor int16 // transaction.state.log.replication.factor (Kafka: 3; here 1)
	TransactionStateLogMinIsr            int32 // transaction.state.log.min.isr (Kafka: 2; here 1)

	ShareCoordinatorStateTopicNumPartitions     int32 // share.coordinator.state.topic.num.partitions
	ShareCoordinatorStateTopicReplicationFactor int16 // share.coordinator.state.topic.replication.factor (capped by the brokers)
	ShareCoordinatorStateTopicMinIsr            int32 // share.coordinator.state.topic.min.isr (capped by the replicas)
	TransactionStateLogSegmentBytes             int32 // transaction.state.log.segment.bytes
	TransactionMaxTimeoutMs                     int32 // transaction.max.timeout.ms
	TransactionalIDExpirationMs                 int32 // transactional.id.expiration.ms
	// transaction.abort.timed.out.transaction.cleanup.interval.ms
	TransactionAbortTimedOutTransactionCleanupIntervalMs int32
	// transaction.remove.expired.transaction.cleanup.interval.ms
	TransactionRemoveExpiredTransactionCleanupIntervalMs int32
	TransactionPartitionVerificationEnable               bool  // transaction.partition.verification.enable
	ProducerIDExpirationMs                               int32 // producer.id.expiration.ms
	ProducerIDExpirationCheckIntervalMs                  int32 // producer.id.expiration.check.interval.ms

	// Authorization.
	AuthorizerClassName       string   // authorizer.class.name ("" = no authorization)
	SuperUsers                []string // super.users, principals as Type:Name
	AllowEveryoneIfNoACLFound bool     // allow.everyone.if.no.acl.found

	// Delegation tokens (KIP-48).
	DelegationTokenSecretKey             string // delegation.token.secret.key ("" = tokens disabled)
	DelegationTokenMaxLifetimeMs         int64  // delegation.token.max.lifetime.ms
	DelegationTokenExpiryTimeMs          int64  // delegation.token.expiry.time.ms
	DelegationTokenExpiryCheckIntervalMs int64  // delegation.token.expiry.check.interval.ms

	lay    layers            // the configured values this snapshot was built from
	values map[string]string // effective value of every key, normalized
	null   map[string]bool   // keys whose effective value is Kafka's null
	live   *live             // shared by all snapshots of one configuration; nil for a literal Broker
}

// layers are the configured values of one snapshot, normalized, by source.
// The maps are never modified once a snapshot holds them.
type layers struct {
	static     map[string]string // server.properties and --set (STATIC_BROKER_CONFIG)
	dynDefault map[string]string // cluster-wide dynamic defaults (DYNAMIC_DEFAULT_BROKER_CONFIG)
	dynBroker  map[string]string // this broker's dynamic configs (DYNAMIC_BROKER_CONFIG)
}

// lookup returns the configured value of key with dynamic > dynamic default > static.
func (l layers) lookup(key string) (string, bool) {
	for _, m := range []map[string]string{l.dynBroker, l.dynDefault, l.static} {
		if v, ok := m[key]; ok {
			return v, true
		}
	}
	return "", false
}

// brokerDef describes one broker key.
type brokerDef struct {
	name  string
	vt    valueType
	dflt  *string             // nil: Kafka's null (no default)
	field func(b *Broker) any // pointer to the typed field; nil when derived in Broker.derive
	doc   string
	// dynamic is set for the keys Kafka lets AlterConfigs change per broker
	// that Gregor uses: the broker synonyms of topic configs (Kafka's
	// DynamicLogConfig), filled in from topicDefs by init, and the keys
	// marked dynamic in brokerDefList (the replication throttle rates,
	// Kafka's DynamicConfig.Broker).
	dynamic bool
}

func str(s string) *string { return &s }
func num(n int64) *string  { return str(strconv.FormatInt(n, 10)) }

const maxLong = math.MaxInt64
const maxInt = math.MaxInt32

// Value types shared by a broker key and its topic-level synonym, so that the
// broker default always passes topic validation.
var (
	vtSegmentBytes  = intType(14, noMax) // Kafka 3.x: LegacyRecord.RECORD_OVERHEAD_V0 (Kafka 4.0 raised it to 1 MiB)
	vtRollMs        = longType(1, noMax)
	vtNonNegLong    = longType(0, noMax)
	vtPositiveLong  = longType(1, noMax)
	vtAnyLong       = longType(noMin, noMax)
	vtNonNegInt     = intType(0, noMax)
	vtPositiveInt   = intType(1, noMax)
	vtIndexBytes    = intType(4, noMax)
	vtCleanup       = listType(false, "compact", "delete")
	vtCompression   = stringType("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
	vtGzipLevel     = levelType(-1, 1, 9)
	vtLz4Level      = levelType(9, 1, 17)
	vtZstdLevel     = levelType(3, -131072, 22)
	vtTimestampType = stringType("CreateTime", "LogAppendTime")
	vtRatio         = doubleType(0, 1)
	vtBool          = boolType()
)

// RackAwareReplicaSelector is the one replica.selector.class Gregor knows, by Kafka's class
// name: a consumer that names its rack (client.rack) reads from an in-sync replica in it.
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// brokerDefList is every broker key Gregor accepts. An unknown key is an
// error (Kafka only logs a warning), so the list includes the keys of Kafka's
// sample server.properties even where Gregor does not use them yet.
var brokerDefList = []*brokerDef{
	// Server and networking.
	{name: "node.id", vt: intType(0, noMax), dflt: num(1), field: func(b *Broker) any { return &b.NodeID }, doc: "The id of this node in the cluster."},
	{name: "process.roles", vt: listType(true, "broker", "controller"), dflt: str("broker,controller"), field: func(b *Broker) any { return &b.ProcessRoles }, doc: "The roles this node plays: broker, controller, or both."},
	{name: "cluster.id", vt: stringType(), field: func(b *Broker) any { return &b.ClusterID }, doc: "Cluster id written to an empty log dir when it is formatted; every node of a cluster shares it. Unset: a single-node cluster picks a random id, a node of a multi-node quorum refuses to start unformatted."},
	{name: "listeners", vt: listenersType(true), dflt: str("PLAINTEXT://127.0.0.1:9092"), field: func(b *Broker) any { return &b.Listeners }, doc: "Comma-separated NAME://host:port endpoints to listen on; an empty host listens on every interface."},
	{name: "advertised.listeners", vt: listenersType(false), doc: "Endpoints given to clients and other brokers; defaults to listeners without the controller listeners."},
	{name: "listener.security.protocol.map", vt: protocolMapType(), dflt: str("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"), doc: "Security protocol of each listener name, as NAME:PROTOCOL pairs."},
	{name: "inter.broker.listener.name", vt: stringType(), doc: "Listener brokers use to talk to each other; defaults to PLAINTEXT."},
	{name: "controller.listener.names", vt: upperListType(), field: func(b *Broker) any { return &b.ControllerListenerNames }, doc: "Comma-separated names of the listeners used by controllers."},
	{name: "controller.quorum.voters", vt: votersType(), dflt: str(""), field: func(b *Broker) any { return &b.ControllerQuorumVoters }, doc: "The controller quorum as id@host:port entries."},
	{name: "controller.quorum.bootstrap.servers", vt: hostPortListType(), dflt: str(""), field: func(b *Broker) any { return &b.ControllerQuorumBootstrap }, doc: "host:port endpoints used to discover the controller quorum."},
	{name: "http.listener", vt: hostPortType(), dflt: str("127.0.0.1:9644"), field: func(b *Broker) any { return &b.HTTPListener }, doc: "host:port of the broker's HTTP listener, serving /metrics (Prometheus text format), /healthz, /readyz and the web console under /console/; port 0 picks a free port (logged at start-up). Empty: no HTTP listener. Gregor's own key: Kafka exposes its metrics over JMX."},
	{name: "broker.rack", vt: stringType(), field: func(b *Broker) any { return &b.BrokerRack }, doc: "Rack of this broker, used for rack-aware replica placement."},
	{name: "num.network.threads", vt: vtPositiveInt, dflt: num(3), field: func(b *Broker) any { return &b.NumNetworkThreads }, doc: "Threads receiving requests and sending responses."},
	{name: "num.io.threads", vt: vtPositiveInt, dflt: num(8), field: func(b *Broker) any { return &b.NumIOThreads }, doc: "Threads processing requests."},
	{name: "queued.max.requests", vt: vtPositiveInt, dflt: num(500), field: func(b *Broker) any { return &b.QueuedMaxRequests }, doc: "Requests read from the connections and waiting for a handler, at most this many (Kafka's request queue between its network and handler threads). In Gregor no request waits: each connection's goroutine handles its request as soon as it is read and reads the next only once it is answered, so the bound always holds; the memory of requests read and not yet handled is bounded by queued.max.request.bytes."},
	{name: "queued.max.request.bytes", vt: vtAnyLong, dflt: num(-1), field: func(b *Broker) any { return &b.QueuedMaxRequestBytes }, doc: "Bytes of requests read and not yet handled, over all connections of the broker's listeners (the controller listener has its own); -1 or 0: no limit. A connection reads a request's body only while some of these bytes are free (so one request may take the total past the limit by at most socket.request.max.bytes); otherwise it stops reading its socket, and TCP slows the client, until handled requests give their bytes back. Must be at least socket.request.max.bytes when set."},
	{name: "socket.send.buffer.bytes", vt: intType(noMin, noMax), dflt: num(102400), field: func(b *Broker) any { return &b.SocketSendBufferBytes }, doc: "SO_SNDBUF of server sockets; -1 uses the OS default."},
	{name: "socket.receive.buffer.bytes", vt: intType(noMin, noMax), dflt: num(102400), field: func(b *Broker) any { return &b.SocketReceiveBufferBytes }, doc: "SO_RCVBUF of server sockets; -1 uses the OS default."},
	{name: "socket.request.max.bytes", vt: vtPositiveInt, dflt: num(104857600), field: func(b *Broker) any { return &b.SocketRequestMaxBytes }, doc: "Largest request the broker accepts, in bytes."},
	{name: "connections.max.idle.ms", vt: vtAnyLong, dflt: num(600000), field: func(b *Broker) any { return &b.ConnectionsMaxIdleMs }, doc: "A connection that sends no request for this many milliseconds after its last answer is closed (one with a request in progress, such as a waiting Fetch or acks=all Produce, is not idle); so is a connection whose request has not arrived whole this many milliseconds after its first byte (a stalled or dribbled request). Negative: never."},
	{name: "max.connections", vt: vtNonNegInt, dflt: num(maxInt), dynamic: true, field: func(b *Broker) any { return &b.MaxConnections }, doc: "Most connections the broker's listeners hold together, besides each address's max.connections.per.ip; listener.name.<listener>.max.connections bounds one listener (default: this value). At either limit a listener stops accepting until one of its connections closes, except the inter-broker listener (when the broker has another listener): its connections are accepted past the broker-wide limit, and the least recently active connection of another listener is closed for each connection over it. Lowering it closes the least recently active connections of the other listeners until the broker is within it."},
	{name: "max.connections.per.ip", vt: vtNonNegInt, dflt: num(maxInt), dynamic: true, field: func(b *Broker) any { return &b.MaxConnectionsPerIP }, doc: "Most connections from one IP address over the broker's listeners; a connection past it is closed as soon as it is accepted. 0 only together with max.connections.per.ip.overrides (to admit only the addresses named there)."},
	{name: "max.connections.per.ip.overrides", vt: connOverridesType(), dflt: str(""), dynamic: true, field: func(b *Broker) any { return &b.MaxConnectionsPerIPOverrides }, doc: "Per-address exceptions to max.connections.per.ip, as host:count pairs separated by commas (host an IP address or a host name, resolved when the value is applied), e.g. 127.0.0.1:200,broker-host:1000."},
	{name: "max.connection.creation.rate", vt: vtNonNegInt, dflt: num(maxInt), dynamic: true, field: func(b *Broker) any { return &b.MaxConnectionCreationRate }, doc: "Most new connections a second, over the broker's listeners and, unless listener.name.<listener>.max.connection.creation.rate says otherwise, on each listener; measured as client quotas are (quota.window.num windows of quota.window.size.seconds). A listener over either rate waits before accepting its next connection, at most one quota window at a time; the inter-broker listener (when the broker has another listener) only waits for its own listener rate."},
	{name: "fetch.max.bytes", vt: intType(1024, noMax), dflt: num(57671680), field: func(b *Broker) any { return &b.FetchMaxBytes }, doc: "Most bytes returned for one fetch request."},
	{name: "broker.heartbeat.interval.ms", vt: intType(noMin, noMax), dflt: num(2000), field: func(b *Broker) any { return &b.BrokerHeartbeatIntervalMs }, doc: "Milliseconds between broker heartbeats to the controller."},
	{name: "broker.session.timeout.ms", vt: intType(noMin, noMax), dflt: num(9000), field: func(b *Broker) any { return &b.BrokerSessionTimeoutMs }, doc: "A broker without a heartbeat for this long is fenced."},

	// Topics.
	{name: "num.partitions", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.NumPartitions }, doc: "Default partition count of new topics."},
	{name: "default.replication.factor", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.DefaultReplicationFactor }, doc: "Default replication factor of new topics."},
	{name: "auto.create.topics.enable", vt: vtBool, dflt: str("true"), field: func(b *Broker) any { return &b.AutoCreateTopicsEnable }, doc: "Create a topic when a client asks for metadata of a topic that does not exist."},
	{name: "delete.topic.enable", vt: vtBool, dflt: str("true"), field: func(b *Broker) any { return &b.DeleteTopicEnable }, doc: "Allow topics to be deleted."},
	{name: "message.max.bytes", vt: vtNonNegInt, dflt: num(1048588), field: func(b *Broker) any { return &b.MessageMaxBytes }, doc: "Largest record batch the broker accepts, in bytes."},
	{name: "compression.type", vt: vtCompression, dflt: str("producer"), field: func(b *Broker) any { return &b.CompressionType }, doc: "Final compression of topic data; producer keeps the producer's codec."},
	{name: "compression.gzip.level", vt: vtGzipLevel, dflt: num(-1), field: func(b *Broker) any { return &b.CompressionGzipLevel }, doc: "gzip level when compression.type is gzip."},
	{name: "compression.lz4.level", vt: vtLz4Level, dflt: num(9), field: func(b *Broker) any { return &b.CompressionLz4Level }, doc: "lz4 level when compression.type is lz4."},
	{name: "compression.zstd.level", vt: vtZstdLevel, dflt: num(3), field: func(b *Broker) any { return &b.CompressionZstdLevel }, doc: "zstd level when compression.type is zstd."},
	{name: "min.insync.replicas", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.MinInsyncReplicas }, doc: "Replicas that must have a write before an acks=all produce succeeds."},
	{name: "unclean.leader.election.enable", vt: vtBool, dflt: str("false"), field: func(b *Broker) any { return &b.UncleanLeaderElectionEnable }, doc: "Allow a replica outside the ISR to become leader, losing data."},

	// Log.
	{name: "log.dirs", vt: listType(true), doc: "Comma-separated directories holding partition data; defaults to log.dir."},
	{name: "log.dir", vt: listType(true), dflt: str("./data"), doc: "Directory holding partition data when log.dirs is not set."},
	{name: "metadata.log.dir", vt: stringType(), field: func(b *Broker) any { return &b.MetadataLogDir }, doc: "Directory of the cluster metadata log; defaults to the first log directory."},
	{name: "num.recovery.threads.per.data.dir", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.NumRecoveryThreadsPerDataDir }, doc: "Threads per data directory for log recovery at startup."},
	{name: "log.segment.bytes", vt: vtSegmentBytes, dflt: num(1073741824), field: func(b *Broker) any { return &b.LogSegmentBytes }, doc: "Largest size of one log segment file."},
	{name: "log.roll.ms", vt: vtRollMs, doc: "Milliseconds after which a new segment is rolled; defaults to log.roll.hours."},
	{name: "log.roll.hours", vt: intType(1, noMax), dflt: num(168), doc: "Hours after which a new segment is rolled, if log.roll.ms is not set."},
	{name: "log.roll.jitter.ms", vt: vtNonNegLong, doc: "Most milliseconds subtracted at random from the roll time; defaults to log.roll.jitter.hours."},
	{name: "log.roll.jitter.hours", vt: intType(0, noMax), dflt: num(0), doc: "Roll jitter in hours, if log.roll.jitter.ms is not set."},
	{name: "log.retention.ms", vt: vtAnyLong, doc: "Milliseconds a segment is kept before deletion; -1 keeps it forever. Defaults to log.retention.minutes."},
	{name: "log.retention.minutes", vt: intType(noMin, noMax), doc: "Retention in minutes, if log.retention.ms is not set. Defaults to log.retention.hours."},
	{name: "log.retention.hours", vt: intType(noMin, noMax), dflt: num(168), doc: "Retention in hours, if neither log.retention.ms nor log.retention.minutes is set."},
	{name: "log.retention.bytes", vt: vtAnyLong, dflt: num(-1), field: func(b *Broker) any { return &b.LogRetentionBytes }, doc: "Largest size of a partition's log before old segments are deleted; -1 is unlimited."},
	{name: "log.retention.check.interval.ms", vt: vtPositiveLong, dflt: num(300000), field: func(b *Broker) any { return &b.LogRetentionCheckIntervalMs }, doc: "Milliseconds between checks for segments to delete."},
	{name: "log.cleanup.policy", vt: vtCleanup, dflt: str("delete"), field: func(b *Broker) any { return &b.LogCleanupPolicy }, doc: "Default cleanup policy: delete, compact, or both."},
	{name: "log.index.size.max.bytes", vt: vtIndexBytes, dflt: num(10485760), field: func(b *Broker) any { return &b.LogIndexSizeMaxBytes }, doc: "Largest size of a segment's offset index."},
	{name: "log.index.interval.bytes", vt: vtNonNegInt, dflt: num(4096), field: func(b *Broker) any { return &b.LogIndexIntervalBytes }, doc: "Bytes of log between offset index entries."},
	{name: "log.flush.interval.messages", vt: vtPositiveLong, dflt: num(maxLong), field: func(b *Broker) any { return &b.LogFlushIntervalMessages }, doc: "Messages appended to a partition before it is fsynced."},
	{name: "log.flush.interval.ms", vt: vtNonNegLong, doc: "Most milliseconds a message stays unflushed; defaults to log.flush.scheduler.interval.ms."},
	{name: "log.flush.scheduler.interval.ms", vt: vtNonNegLong, dflt: num(maxLong), field: func(b *Broker) any { return &b.LogFlushSchedulerIntervalMs }, doc: "Milliseconds between checks for logs to flush."},
	{name: "log.flush.offset.checkpoint.interval.ms", vt: vtNonNegInt, dflt: num(60000), field: func(b *Broker) any { return &b.LogFlushOffsetCheckpointIntervalMs }, doc: "Milliseconds between writes of the recovery point checkpoint."},
	{name: "log.flush.start.offset.checkpoint.interval.ms", vt: vtNonNegInt, dflt: num(60000), field: func(b *Broker) any { return &b.LogFlushStartOffsetCheckpointIntervalMs }, doc: "Milliseconds between writes of the log start offset checkpoint."},
	{name: "log.segment.delete.delay.ms", vt: vtNonNegLong, dflt: num(60000), field: func(b *Broker) any { return &b.LogSegmentDeleteDelayMs }, doc: "Milliseconds a deleted segment's files linger before removal."},
	{name: "log.preallocate", vt: vtBool, dflt: str("false"), field: func(b *Broker) any { return &b.LogPreallocate }, doc: "Preallocate segment files at creation."},
	{name: "log.message.timestamp.type", vt: vtTimestampType, dflt: str("CreateTime"), field: func(b *Broker) any { return &b.LogMessageTimestampType }, doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's clock."},
	{name: "log.message.timestamp.difference.max.ms", vt: vtNonNegLong, dflt: num(maxLong), field: func(b *Broker) any { return &b.LogMessageTimestampDifferenceMaxMs }, doc: "Largest allowed difference between a CreateTime timestamp and the broker's clock (deprecated by the before/after settings)."},
	{name: "log.message.timestamp.before.max.ms", vt: vtNonNegLong, dflt: num(maxLong), field: func(b *Broker) any { return &b.LogMessageTimestampBeforeMaxMs }, doc: "How far a CreateTime timestamp may lie before the broker's clock."},
	{name: "log.message.timestamp.after.max.ms", vt: vtNonNegLong, dflt: num(maxLong), field: func(b *Broker) any { return &b.LogMessageTimestampAfterMaxMs }, doc: "How far a CreateTime timestamp may lie after the broker's clock."},
	{name: "log.cleaner.enable", vt: vtBool, dflt: str("true"), field: func(b *Broker) any { return &b.LogCleanerEnable }, doc: "Run the log cleaner, which compacts the logs of topics whose cleanup.policy includes compact (__consumer_offsets among them). false: compacted topics keep every record."},
	{name: "log.cleaner.threads", vt: vtNonNegInt, dflt: num(1), dynamic: true, field: func(b *Broker) any { return &b.LogCleanerThreads }, doc: "Cleaner threads per log directory, each cleaning one log at a time."},
	{name: "log.cleaner.dedupe.buffer.size", vt: vtAnyLong, dflt: num(134217728), dynamic: true, field: func(b *Broker) any { return &b.LogCleanerDedupeBufferSize }, doc: "Bytes of memory for the key -> offset maps of all cleaner threads, divided among them (at most 2 GiB a thread); a log with more distinct keys than a map holds is cleaned in several passes. With the cleaner enabled, each thread must get more than 1 MiB."},
	{name: "log.cleaner.io.buffer.size", vt: vtNonNegInt, dflt: num(524288), dynamic: true, field: func(b *Broker) any { return &b.LogCleanerIOBufferSize }, doc: "Bytes of I/O buffers of all cleaner threads, divided among them, half for reading and half for writing (a larger batch is read whole)."},
	{name: "log.cleaner.io.buffer.load.factor", vt: vtRatio, dflt: str("0.9"), dynamic: true, field: func(b *Broker) any { return &b.LogCleanerIOBufferLoadFactor }, doc: "How full a cleaner thread's key -> offset map may get; must be above 0 with the cleaner enabled."},
	{name: "log.cleaner.io.max.bytes.per.second", vt: doubleType(-math.MaxFloat64, math.MaxFloat64), dflt: str("1.7976931348623157E308"), dynamic: true, field: func(b *Broker) any { return &b.LogCleanerIOMaxBytesPerSecond }, doc: "Most bytes a second all cleaner threads of a log directory read and write together, so that cleaning leaves the disk to produce and fetch; the default is no limit."},
	{name: "log.cleaner.backoff.ms", vt: vtNonNegLong, dflt: num(15000), dynamic: true, field: func(b *Broker) any { return &b.LogCleanerBackoffMs }, doc: "Milliseconds a cleaner thread sleeps when no log is cleanable."},
	{name: "log.cleaner.delete.retention.ms", vt: vtNonNegLong, dflt: num(86400000), field: func(b *Broker) any { return &b.LogCleanerDeleteRetentionMs }, doc: "Default delete.retention.ms: milliseconds a tombstone stays in a compacted log after the first cleaning that kept it."},
	{name: "log.cleaner.min.compaction.lag.ms", vt: vtNonNegLong, dflt: num(0), field: func(b *Broker) any { return &b.LogCleanerMinCompactionLagMs }, doc: "Default min.compaction.lag.ms: least age of a record before it may be compacted."},
	{name: "log.cleaner.max.compaction.lag.ms", vt: vtPositiveLong, dflt: num(maxLong), field: func(b *Broker) any { return &b.LogCleanerMaxCompactionLagMs }, doc: "Default max.compaction.lag.ms: greatest age of a record before its log is cleaned, however little of it is dirty."},
	{name: "log.cleaner.min.cleanable.ratio", vt: vtRatio, dflt: str("0.5"), field: func(b *Broker) any { return &b.LogCleanerMinCleanableRatio }, doc: "Default min.cleanable.dirty.ratio: least share of a log not yet cleaned for it to be cleaned."},

	// Replication.
	{name: "replica.lag.time.max.ms", vt: vtAnyLong, dflt: num(30000), field: func(b *Broker) any { return &b.ReplicaLagTimeMaxMs }, doc: "A follower that has not caught up for this long leaves the ISR."},
	{name: "replica.fetch.max.bytes", vt: vtNonNegInt, dflt: num(1048576), field: func(b *Broker) any { return &b.ReplicaFetchMaxBytes }, doc: "Bytes a follower fetches per partition per request."},
	{name: "replica.fetch.min.bytes", vt: intType(noMin, noMax), dflt: num(1), field: func(b *Broker) any { return &b.ReplicaFetchMinBytes }, doc: "Least bytes a follower fetch waits for."},
	{name: "replica.fetch.wait.max.ms", vt: intType(noMin, noMax), dflt: num(500), field: func(b *Broker) any { return &b.ReplicaFetchWaitMaxMs }, doc: "Most milliseconds a follower fetch waits for data."},
	{name: "replica.fetch.response.max.bytes", vt: vtNonNegInt, dflt: num(10485760), field: func(b *Broker) any { return &b.ReplicaFetchResponseMaxBytes }, doc: "Bytes a follower fetches per request."},
	{name: "replica.fetch.backoff.ms", vt: vtNonNegInt, dflt: num(1000), field: func(b *Broker) any { return &b.ReplicaFetchBackoffMs }, doc: "Milliseconds a follower waits after a fetch error."},
	{name: "replica.socket.timeout.ms", vt: intType(noMin, noMax), dflt: num(30000), field: func(b *Broker) any { return &b.ReplicaSocketTimeoutMs }, doc: "Socket timeout of follower fetches."},
	{name: "replica.socket.receive.buffer.bytes", vt: intType(noMin, noMax), dflt: num(65536), field: func(b *Broker) any { return &b.ReplicaSocketReceiveBufferBytes }, doc: "SO_RCVBUF of follower connections."},
	{name: "replica.high.watermark.checkpoint.interval.ms", vt: vtAnyLong, dflt: num(5000), field: func(b *Broker) any { return &b.ReplicaHighWatermarkCheckpointIntervalMs }, doc: "Milliseconds between writes of the high watermark checkpoint."},
	{name: "replica.selector.class", vt: stringType("", RackAwareReplicaSelector), field: func(b *Broker) any { return &b.ReplicaSelectorClass }, doc: "The replica a leader directs consumers to (KIP-392). Empty: consumers read from the leader. " + RackAwareReplicaSelector + ": a consumer that names its rack (client.rack) is directed to an in-sync replica in that rack when the leader is not in it."},
	{name: "max.incremental.fetch.session.cache.slots", vt: vtNonNegInt, dflt: num(1000), field: func(b *Broker) any { return &b.MaxIncrementalFetchSessionCacheSlots }, doc: "The most incremental fetch sessions (KIP-227) the broker keeps, divided equally among 8 shards as in Kafka (fewer than 8 keeps none); a fetch that finds no room is answered sessionless."},
	{name: "num.replica.fetchers", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.NumReplicaFetchers }, doc: "Fetcher threads per source broker."},
	{name: "auto.leader.rebalance.enable", vt: vtBool, dflt: str("true"), field: func(b *Broker) any { return &b.AutoLeaderRebalanceEnable }, doc: "Move leadership back to preferred replicas in the background."},
	{name: "leader.imbalance.check.interval.seconds", vt: vtPositiveLong, dflt: num(300), field: func(b *Broker) any { return &b.LeaderImbalanceCheckIntervalSeconds }, doc: "Seconds between leader imbalance checks."},
	{name: "leader.imbalance.per.broker.percentage", vt: intType(noMin, noMax), dflt: num(10), field: func(b *Broker) any { return &b.LeaderImbalancePerBrokerPercentage }, doc: "Allowed leader imbalance per broker, in percent."},
	// Kafka's tools set the throttle rates dynamically (kafka-configs,
	// kafka-reassign-partitions --throttle); Gregor also takes them statically.
	{name: "leader.replication.throttled.rate", vt: vtNonNegLong, dflt: num(maxLong), dynamic: true, field: func(b *Broker) any { return &b.LeaderReplicationThrottledRate }, doc: "Upper bound, in bytes/sec, on replication traffic sent by this broker as leader for the replicas listed in each topic's leader.replication.throttled.replicas. 9223372036854775807 means no throttle."},
	{name: "follower.replication.throttled.rate", vt: vtNonNegLong, dflt: num(maxLong), dynamic: true, field: func(b *Broker) any { return &b.FollowerReplicationThrottledRate }, doc: "Upper bound, in bytes/sec, on replication traffic fetched by this broker as follower for the replicas listed in each topic's follower.replication.throttled.replicas. 9223372036854775807 means no throttle."},
	{name: "replica.alter.log.dirs.io.max.bytes.per.second", vt: vtNonNegLong, dflt: num(maxLong), dynamic: true, field: func(b *Broker) any { return &b.ReplicaAlterLogDirsIOMaxBytesPerSecond }, doc: "Upper bound, in bytes/sec, on the copying of replicas this broker moves between its log dirs (AlterReplicaLogDirs). 9223372036854775807 means no throttle."},

	// Client quotas.
	{name: "quota.window.num", vt: vtPositiveInt, dflt: num(11), field: func(b *Broker) any { return &b.QuotaWindowNum }, doc: "Samples a client's byte and request rates are measured over: the rate is what the retained samples recorded divided by the time they span (at least quota.window.num - 1 windows)."},
	{name: "quota.window.size.seconds", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.QuotaWindowSizeSeconds }, doc: "Seconds each sample of a client's rate covers."},

	// Groups and offsets.
	{name: "offsets.topic.num.partitions", vt: vtPositiveInt, dflt: num(50), field: func(b *Broker) any { return &b.OffsetsTopicNumPartitions }, doc: "Partitions of __consumer_offsets."},
	{name: "offsets.topic.replication.factor", vt: shortType(1, noMax), dflt: num(1), field: func(b *Broker) any { return &b.OffsetsTopicReplicationFactor }, doc: "Replication factor of __consumer_offsets (Kafka's default is 3)."},
	{name: "offsets.topic.segment.bytes", vt: vtPositiveInt, dflt: num(104857600), field: func(b *Broker) any { return &b.OffsetsTopicSegmentBytes }, doc: "Segment size of __consumer_offsets."},
	{name: "offsets.retention.minutes", vt: vtPositiveInt, dflt: num(10080), field: func(b *Broker) any { return &b.OffsetsRetentionMinutes }, doc: "Minutes committed offsets of an empty group are kept."},
	{name: "offsets.retention.check.interval.ms", vt: vtPositiveLong, dflt: num(600000), field: func(b *Broker) any { return &b.OffsetsRetentionCheckIntervalMs }, doc: "Milliseconds between checks for expired offsets."},
	{name: "offsets.commit.timeout.ms", vt: vtPositiveInt, dflt: num(5000), field: func(b *Broker) any { return &b.OffsetsCommitTimeoutMs }, doc: "Milliseconds an offset commit waits for its write to replicate."},
	{name: "group.initial.rebalance.delay.ms", vt: vtNonNegInt, dflt: num(3000), field: func(b *Broker) any { return &b.GroupInitialRebalanceDelayMs }, doc: "Milliseconds the first rebalance of an empty group waits for more members."},
	{name: "group.min.session.timeout.ms", vt: intType(noMin, noMax), dflt: num(6000), field: func(b *Broker) any { return &b.GroupMinSessionTimeoutMs }, doc: "Least session timeout a group member may ask for."},
	{name: "group.max.session.timeout.ms", vt: intType(noMin, noMax), dflt: num(1800000), field: func(b *Broker) any { return &b.GroupMaxSessionTimeoutMs }, doc: "Greatest session timeout a group member may ask for."},
	{name: "group.max.size", vt: vtPositiveInt, dflt: num(maxInt), field: func(b *Broker) any { return &b.GroupMaxSize }, doc: "Most members in one consumer group."},
	{name: "group.consumer.session.timeout.ms", vt: vtPositiveInt, dflt: num(45000), field: func(b *Broker) any { return &b.GroupConsumerSessionTimeoutMs }, doc: "Session timeout of consumer-protocol (KIP-848) group members."},
	{name: "group.consumer.min.session.timeout.ms", vt: vtPositiveInt, dflt: num(45000), field: func(b *Broker) any { return &b.GroupConsumerMinSessionTimeoutMs }, doc: "Least consumer-protocol session timeout: group.consumer.session.timeout.ms may not be below it (checked at start-up, as Kafka does); it also bounds the consumer.* group configs."},
	{name: "group.consumer.max.session.timeout.ms", vt: vtPositiveInt, dflt: num(60000), field: func(b *Broker) any { return &b.GroupConsumerMaxSessionTimeoutMs }, doc: "Greatest consumer-protocol session timeout: group.consumer.session.timeout.ms may not exceed it (checked at start-up, as Kafka does); it also bounds the consumer.* group configs."},
	{name: "group.consumer.heartbeat.interval.ms", vt: vtPositiveInt, dflt: num(5000), field: func(b *Broker) any { return &b.GroupConsumerHeartbeatIntervalMs }, doc: "Heartbeat interval told to consumer-protocol group members."},
	{name: "group.consumer.min.heartbeat.interval.ms", vt: vtPositiveInt, dflt: num(5000), field: func(b *Broker) any { return &b.GroupConsumerMinHeartbeatIntervalMs }, doc: "Least consumer-protocol heartbeat interval: group.consumer.heartbeat.interval.ms may not be below it (checked at start-up, as Kafka does); it also bounds the consumer.* group configs."},
	{name: "group.consumer.max.heartbeat.interval.ms", vt: vtPositiveInt, dflt: num(15000), field: func(b *Broker) any { return &b.GroupConsumerMaxHeartbeatIntervalMs }, doc: "Greatest consumer-protocol heartbeat interval: group.consumer.heartbeat.interval.ms may not exceed it (checked at start-up, as Kafka does); it also bounds the consumer.* group configs."},
	{name: "group.share.session.timeout.ms", vt: vtPositiveInt, dflt: num(45000), field: func(b *Broker) any { return &b.GroupShareSessionTimeoutMs }, doc: "Session timeout of share group members: a member that does not heartbeat within it is removed from its group."},
	{name: "group.share.min.session.timeout.ms", vt: vtPositiveInt, dflt: num(45000), field: func(b *Broker) any { return &b.GroupShareMinSessionTimeoutMs }, doc: "Least share group session timeout: group.share.session.timeout.ms may not be below it (checked at start-up); it also bounds the share.session.timeout.ms group config."},
	{name: "group.share.max.session.timeout.ms", vt: vtPositiveInt, dflt: num(60000), field: func(b *Broker) any { return &b.GroupShareMaxSessionTimeoutMs }, doc: "Greatest share group session timeout: group.share.session.timeout.ms may not exceed it (checked at start-up); it also bounds the share.session.timeout.ms group config."},
	{name: "group.share.heartbeat.interval.ms", vt: vtPositiveInt, dflt: num(5000), field: func(b *Broker) any { return &b.GroupShareHeartbeatIntervalMs }, doc: "Heartbeat interval told to share group members."},
	{name: "group.share.min.heartbeat.interval.ms", vt: vtPositiveInt, dflt: num(5000), field: func(b *Broker) any { return &b.GroupShareMinHeartbeatIntervalMs }, doc: "Least share group heartbeat interval: group.share.heartbeat.interval.ms may not be below it (checked at start-up); it also bounds the share.heartbeat.interval.ms group config."},
	{name: "group.share.max.heartbeat.interval.ms", vt: vtPositiveInt, dflt: num(15000), field: func(b *Broker) any { return &b.GroupShareMaxHeartbeatIntervalMs }, doc: "Greatest share group heartbeat interval: group.share.heartbeat.interval.ms may not exceed it (checked at start-up); it also bounds the share.heartbeat.interval.ms group config."},
	{name: "group.share.record.lock.duration.ms", vt: intType(1000, 3600000), dflt: num(30000), field: func(b *Broker) any { return &b.GroupShareRecordLockDurationMs }, doc: "How long a share group member holds the records it acquired: unacknowledged when it ends, they are delivered again (to any member)."},
	{name: "group.share.min.record.lock.duration.ms", vt: intType(1000, 30000), dflt: num(15000), field: func(b *Broker) any { return &b.GroupShareMinRecordLockDurationMs }, doc: "Least record lock duration: group.share.record.lock.duration.ms may not be below it (checked at start-up); it also bounds the share.record.lock.duration.ms group config."},
	{name: "group.share.max.record.lock.duration.ms", vt: intType(30000, 3600000), dflt: num(60000), field: func(b *Broker) any { return &b.GroupShareMaxRecordLockDurationMs }, doc: "Greatest record lock duration: group.share.record.lock.duration.ms may not exceed it (checked at start-up); it also bounds the share.record.lock.duration.ms group config."},
	{name: "group.share.delivery.count.limit", vt: intType(2, 10), dflt: num(5), field: func(b *Broker) any { return &b.GroupShareDeliveryCountLimit }, doc: "Deliveries of a record to share group members after which it is archived instead of delivered again (a poison record stops coming back)."},
	{name: "group.share.partition.max.record.locks", vt: intType(100, 10000), dflt: num(2000), field: func(b *Broker) any { return &b.GroupSharePartitionMaxRecordLocks }, doc: "Most in-flight records (acquired, or waiting behind an acquired one) of one share-partition: the window a share group reads ahead by."},
	{name: "group.consumer.max.size", vt: vtPositiveInt, dflt: num(maxInt), field: func(b *Broker) any { return &b.GroupConsumerMaxSize }, doc: "Most members in one consumer-protocol group."},
	{name: "group.consumer.assignors", vt: listType(true, "uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor", "org.apache.kafka.coordinator.group.assignor.RangeAssignor"), dflt: str("uniform,range"), field: func(b *Broker) any { return &b.GroupConsumerAssignors }, doc: "Server-side assignors of consumer-protocol groups; the first is used when a member names none."},
	{name: "group.consumer.migration.policy", vt: stringType("bidirectional", "upgrade", "downgrade", "disabled"), dflt: str("bidirectional"), field: func(b *Broker) any { return &b.GroupConsumerMigrationPolicy }, doc: "Whether classic groups convert to consumer-protocol groups (upgrade), back (downgrade), both or neither."},

	// Transactions and producer ids.
	{name: "transaction.state.log.num.partitions", vt: vtPositiveInt, dflt: num(50), field: func(b *Broker) any { return &b.TransactionStateLogNumPartitions }, doc: "Partitions of __transaction_state."},
	{name: "transaction.state.log.replication.factor", vt: shortType(1, noMax), dflt: num(1), field: func(b *Broker) any { return &b.TransactionStateLogReplicationFactor }, doc: "Replication factor of __transaction_state (Kafka's default is 3)."},
	{name: "share.coordinator.state.topic.num.partitions", vt: vtPositiveInt, dflt: num(50), field: func(b *Broker) any { return &b.ShareCoordinatorStateTopicNumPartitions }, doc: "Partitions of __share_group_state."},
	{name: "share.coordinator.state.topic.replication.factor", vt: shortType(1, noMax), dflt: num(3), field: func(b *Broker) any { return &b.ShareCoordinatorStateTopicReplicationFactor }, doc: "Replication factor of __share_group_state, capped by the brokers registered when it is created."},
	{name: "share.coordinator.state.topic.min.isr", vt: vtPositiveInt, dflt: num(2), field: func(b *Broker) any { return &b.ShareCoordinatorStateTopicMinIsr }, doc: "min.insync.replicas of __share_group_state, capped by its replication factor."},
	{name: "transaction.state.log.min.isr", vt: vtPositiveInt, dflt: num(1), field: func(b *Broker) any { return &b.TransactionStateLogMinIsr }, doc: "min.insync.replicas of __transaction_state (Kafka's default is 2)."},
	{name: "transaction.state.log.segment.bytes", vt: vtPositiveInt, dflt: num(104857600), field: func(b *Broker) any { return &b.TransactionStateLogSegmentBytes }, doc: "Segment size of __transaction_state."},
	{name: "transaction.max.timeout.ms", vt: vtPositiveInt, dflt: num(900000), field: func(b *Broker) any { return &b.TransactionMaxTimeoutMs }, doc: "Longest transaction timeout a producer may ask for."},
	{name: "transactional.id.expiration.ms", vt: vtPositiveInt, dflt: num(604800000), field: func(b *Broker) any { return &b.TransactionalIDExpirationMs }, doc: "Milliseconds an idle transactional id is kept."},
	{name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", vt: vtPositiveInt, dflt: num(10000), field: func(b *Broker) any { return &b.TransactionAbortTimedOutTransactionCleanupIntervalMs }, doc: "The interval at which the transaction coordinator aborts transactions that have timed out."},
	{name: "transaction.remove.expired.transaction.cleanup.interval.ms", vt: vtPositiveInt, dflt: num(3600000), field: func(b *Broker) any { return &b.TransactionRemoveExpiredTransactionCleanupIntervalMs }, doc: "The interval at which the transaction coordinator removes transactional ids that expired after transactional.id.expiration.ms."},
	{name: "transaction.partition.verification.enable", vt: vtBool, dflt: str("true"), dynamic: true, field: func(b *Broker) any { return &b.TransactionPartitionVerificationEnable }, doc: "Verify with the transaction coordinator that a partition was added to the transaction before a transactional batch that starts a transaction on it is appended (KIP-890), so a late or stray write cannot leave a hanging transaction."},
	{name: "producer.id.expiration.ms", vt: vtPositiveInt, dflt: num(86400000), field: func(b *Broker) any { return &b.ProducerIDExpirationMs }, doc: "Milliseconds an idle producer id's state is kept."},
	{name: "producer.id.expiration.check.interval.ms", vt: vtPositiveInt, dflt: num(600000), field: func(b *Broker) any { return &b.ProducerIDExpirationCheckIntervalMs }, doc: "Milliseconds between checks for producer ids idle past producer.id.expiration.ms."},

	// Security: TLS and SASL. Every key here may also be set for one listener as
	// listener.name.<listener>.<key> (security.go), which wins over the plain key.
	{name: "ssl.keystore.type", vt: stringType("JKS", "PKCS12", "PEM"), dflt: str("JKS"), doc: "Format of the key store: JKS, PKCS12 or PEM."},
	{name: "ssl.keystore.location", vt: stringType(), doc: "Path of the key store holding the listener's certificate chain and private key (a PEM file for type PEM)."},
	{name: "ssl.keystore.password", vt: passwordType(), doc: "Password of the key store (PKCS12, JKS; for PEM, of an encrypted private key)."},
	{name: "ssl.key.password", vt: passwordType(), doc: "Password of the private key in the key store, when it differs from the store's."},
	{name: "ssl.keystore.certificate.chain", vt: passwordType(), doc: "The certificate chain in PEM, inline (with ssl.keystore.type=PEM and ssl.keystore.key)."},
	{name: "ssl.keystore.key", vt: passwordType(), doc: "The private key in PEM (PKCS#8), inline (with ssl.keystore.type=PEM)."},
	{name: "ssl.truststore.type", vt: stringType("JKS", "PKCS12", "PEM"), dflt: str("JKS"), doc: "Format of the trust store: JKS, PKCS12 or PEM."},
	{name: "ssl.truststore.location", vt: stringType(), doc: "Path of the trust store: the certificate authorities a peer's certificate must chain to."},
	{name: "ssl.truststore.password", vt: passwordType(), doc: "Password of the trust store (checked for PKCS12 and JKS)."},
	{name: "ssl.truststore.certificates", vt: passwordType(), doc: "Trusted certificates in PEM, inline (with ssl.truststore.type=PEM)."},
	{name: "ssl.client.auth", vt: stringType("none", "requested", "required"), dflt: str("none"), doc: "Whether an SSL listener asks clients for a certificate: none, requested (verified when sent) or required (mutual TLS)."},
	{name: "ssl.protocol", vt: stringType("TLSv1.2", "TLSv1.3", "TLS"), dflt: str("TLSv1.3"), doc: "The TLS protocol of the broker's own outgoing connections; their highest version."},
	{name: "ssl.enabled.protocols", vt: listType(true, "TLSv1.2", "TLSv1.3"), dflt: str("TLSv1.2,TLSv1.3"), doc: "TLS versions accepted."},
	{name: "ssl.cipher.suites", vt: listType(false), dflt: str(""), doc: "TLS 1.2 cipher suites allowed, by IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...); empty: Go's secure defaults. TLS 1.3 suites are not configurable."},
	{name: "ssl.principal.mapping.rules", vt: stringType(), dflt: str("DEFAULT"), doc: "Rules mapping a client certificate's distinguished name to a principal name, as Kafka's RULE:pattern/replacement/[LU], ..., DEFAULT."},
	{name: "ssl.allow.dn.changes", vt: vtBool, dflt: str("false"), doc: "Whether a dynamic update of a listener's key store (listener.name.<listener>.ssl.keystore.*) may change the certificate's subject distinguished name; false: the new certificate must keep it."},
	{name: "ssl.allow.san.changes", vt: vtBool, dflt: str("false"), doc: "Whether a dynamic update of a listener's key store may change the certificate's subject alternative names; false: the new certificate must keep them."},
	{name: "ssl.endpoint.identification.algorithm", vt: stringType("https", ""), dflt: str("https"), doc: "https: the broker's outgoing TLS connections check that the peer's certificate names the host dialled; empty: they do not."},
	{name: "sasl.enabled.mechanisms", vt: listType(false), dflt: str("GSSAPI"), doc: "SASL mechanisms served on SASL listeners: GSSAPI (Kerberos), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER."},
	{name: "sasl.kerberos.service.name", vt: stringType(), doc: "The Kerberos service name of the brokers (the first part of their principal, e.g. kafka); required when GSSAPI is enabled or is the inter-broker mechanism, unless the GSSAPI JAAS line sets serviceName."},
	{name: "sasl.kerberos.principal.to.local.rules", vt: listType(false), dflt: str("DEFAULT"), doc: "Rules mapping a client's Kerberos principal to its short name, the principal's name (User:<short name>), as Kafka's RULE:[n:format](match)s/pattern/replacement/[g][/L|/U], ..., DEFAULT (the first component of a principal of the default realm)."},
	{name: "sasl.mechanism.inter.broker.protocol", vt: stringType(), dflt: str("GSSAPI"), doc: "SASL mechanism brokers use towards each other on a SASL inter-broker listener."},
	{name: "sasl.mechanism.controller.protocol", vt: stringType(), dflt: str("GSSAPI"), doc: "SASL mechanism used towards the controllers on a SASL controller listener."},
	{name: "sasl.server.max.receive.size", vt: vtPositiveInt, dflt: num(524288), doc: "Largest SASL frame accepted before a connection is authenticated."},
	{name: "delegation.token.secret.key", vt: passwordType(), field: func(b *Broker) any { return &b.DelegationTokenSecretKey }, doc: "Secret key that signs delegation tokens (their HMAC); the same on every broker and controller. Unset: delegation tokens are disabled (DELEGATION_TOKEN_AUTH_DISABLED)."},
	{name: "delegation.token.master.key", vt: passwordType(), doc: "Kafka's former name of delegation.token.secret.key, read when that is unset."},
	{name: "delegation.token.max.lifetime.ms", vt: vtPositiveLong, dflt: num(604800000), field: func(b *Broker) any { return &b.DelegationTokenMaxLifetimeMs }, doc: "Longest life of a delegation token, however often it is renewed."},
	{name: "delegation.token.expiry.time.ms", vt: vtPositiveLong, dflt: num(86400000), field: func(b *Broker) any { return &b.DelegationTokenExpiryTimeMs }, doc: "How long a delegation token lives from its creation or a renewal without a period of its own."},
	{name: "delegation.token.expiry.check.interval.ms", vt: vtPositiveLong, dflt: num(3600000), field: func(b *Broker) any { return &b.DelegationTokenExpiryCheckIntervalMs }, doc: "Milliseconds between the active controller's removals of expired delegation tokens."},
	{name: "connections.max.reauth.ms", vt: vtNonNegLong, dflt: num(0), doc: "Longest session of a SASL connection before it must re-authenticate (KIP-368); 0: sessions never expire."},
	{name: "sasl.oauthbearer.jwks.endpoint.url", vt: stringType(), doc: "OAUTHBEARER with " + OAuthBearerValidatorCallbackHandler + ": where the identity provider's JWKS (its signing keys) is read, a file:// path or an https:// URL."},
	{name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", vt: vtPositiveLong, dflt: num(3600000), doc: "Milliseconds between re-reads of the JWKS; a token naming an unknown key id also brings an https JWKS forward."},
	{name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", vt: vtNonNegLong, dflt: num(100), doc: "First wait between attempts to read the JWKS; it doubles up to sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms."},
	{name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", vt: vtNonNegLong, dflt: num(10000), doc: "Longest wait between attempts to read the JWKS, and how long one read keeps retrying."},
	{name: "sasl.oauthbearer.expected.audience", vt: listType(false), doc: "Audiences a token's aud claim must name one of (comma-separated); unset: a token with an aud claim is refused, as Kafka does."},
	{name: "sasl.oauthbearer.expected.issuer", vt: stringType(), doc: "The iss claim a token must carry; unset: not checked."},
	{name: "sasl.oauthbearer.sub.claim.name", vt: stringType(), dflt: str("sub"), doc: "The claim holding the principal name of a signed token."},
	{name: "sasl.oauthbearer.scope.claim.name", vt: stringType(), dflt: str("scope"), doc: "The claim holding the scope of a signed token."},
	{name: "sasl.login.callback.handler.class", vt: stringType(OAuthBearerLoginCallbackHandler, oauthBearerLoginCallbackHandler31), doc: "OAUTHBEARER for the broker's own connections (sasl.mechanism.inter.broker.protocol, sasl.mechanism.controller.protocol): unset, unsecured tokens from the JAAS line's unsecuredLogin* options; " + OAuthBearerLoginCallbackHandler + ", tokens from the identity provider at sasl.oauthbearer.token.endpoint.url (a client_credentials grant with the JAAS line's clientId, clientSecret and scope), fetched at start-up and again after 80% of a token's lifetime."},
	{name: "sasl.oauthbearer.token.endpoint.url", vt: stringType(), doc: "With " + OAuthBearerLoginCallbackHandler + ": the identity provider's token endpoint (https://), or a file:// path holding a token, read again at each refresh."},
	{name: "sasl.login.connect.timeout.ms", vt: intType(0, noMax), doc: "Milliseconds a token request may take to connect; unset: 10 s."},
	{name: "sasl.login.read.timeout.ms", vt: intType(0, noMax), doc: "Milliseconds a token request may wait for its answer; unset: 10 s."},
	{name: "sasl.login.retry.backoff.ms", vt: vtNonNegLong, dflt: num(100), doc: "First wait between attempts to get a token; it doubles up to sasl.login.retry.backoff.max.ms."},
	{name: "sasl.login.retry.backoff.max.ms", vt: vtNonNegLong, dflt: num(10000), doc: "Longest wait between attempts to get a token, and how long one login keeps retrying; answers such as 401 are not retried."},
	{name: "sasl.oauthbearer.clock.skew.seconds", vt: intType(0, noMax), dflt: num(30), doc: "Seconds of clock difference with the identity provider allowed when checking exp, iat and nbf."},
	{name: "connection.failed.authentication.delay.ms", vt: vtNonNegInt, dflt: num(100), doc: "Milliseconds the answer to a failed authentication is held before the connection is closed, slowing password guessing."},

	// Authorization.
	{name: "authorizer.class.name", vt: stringType("", StandardAuthorizer), dflt: str(""), field: func(b *Broker) any { return &b.AuthorizerClassName }, doc: "The authorizer: empty for none (every request is allowed), or " + StandardAuthorizer + " for Kafka's ACLs kept in the metadata log."},
	{name: "super.users", vt: principalListType(), dflt: str(""), field: func(b *Broker) any { return &b.SuperUsers }, doc: "Principals (Type:Name, separated by semicolons) allowed every operation on every resource whatever the ACLs say."},
	{name: "allow.everyone.if.no.acl.found", vt: vtBool, dflt: str("false"), field: func(b *Broker) any { return &b.AllowEveryoneIfNoACLFound }, doc: "Whether a resource that no ACL names is open to every principal (true) or only to super users (false)."},
}

// notServed are Kafka broker keys Gregor knows but cannot honour yet: start-up stops naming
// them (with why) rather than accepting and ignoring them.
var notServed = map[string]string{}

// brokerDefs indexes brokerDefList by name; defaultValues holds the
// normalized default of every key that has one.
var (
	brokerDefs    = map[string]*brokerDef{}
	defaultValues = map[string]string{}
)

// brokerSynonymGroups are broker keys that set the same thing, highest
// priority first (Kafka's DynamicBrokerConfig.brokerConfigSynonyms, plus
// log.dirs/log.dir). The first key of a group reports the effective value.
var brokerSynonymGroups = [][]string{
	{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	{"log.roll.ms", "log.roll.hours"},
	{"log.roll.jitter.ms", "log.roll.jitter.hours"},
	{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
	{"log.dirs", "log.dir"},
}

func init() {
	for _, d := range brokerDefList {
		if brokerDefs[d.name] != nil {
			panic("config: duplicate broker key " + d.name)
		}
		brokerDefs[d.name] = d
		if d.dflt != nil {
			_, norm, reason := d.vt.parse(*d.dflt)
			if reason != "" {
				panic("config: bad default for " + d.name + ": " + reason)
			}
			defaultValues[d.name] = norm
		}
	}
	for _, td := range topicDefList {
		if len(td.synonyms) == 0 {
			continue // a topic-only key (leader.replication.throttled.replicas)
		}
		d := brokerDefs[td.synonyms[0]]
		if d == nil {
			panic("config: topic key " + td.name + " has unknown broker synonym " + td.synonyms[0])
		}
		d.dynamic = true
	}
}

// brokerSynonyms returns the synonym group of key (just key if it has none).
func brokerSynonyms(key string) []string {
	for _, g := range brokerSynonymGroups {
		if contains(g, key) {
			return g
		}
	}
	return []string{key}
}

// BrokerConfigNames returns every broker key, sorted.
func BrokerConfigNames() []string {
	names := make([]string, 0, len(brokerDefList))
	for _, d := range brokerDefList {
		names = append(names, d.name)
	}
	sort.Strings(names)
	return names
}

// Default returns the default configuration.
func Default() *Broker {
	b, err := Parse(nil)
	if err != nil {
		// The defaults are validated by init and by the tests.
		panic(err)
	}
	return b
}

// Parse validates props (server.properties keys and values) and returns the
// configuration. An unknown key or an invalid value is an *Error naming the
// key (keys are checked in sorted order, unknown keys first); values are
// trimmed of surrounding blanks first.
func Parse(props map[string]string) (*Broker, error) {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, _, listenerKey := splitListenerKey(k); brokerDefs[k] == nil && !listenerKey {
			if why, ok := notServed[k]; ok {
				return nil, &Error{Key: k, Reason: "Kafka's key, not served by Gregor yet: " + why, Err: ErrUnknownConfig}
			}
			return nil, unknown(k, "broker configuration")
		}
	}
	static := make(map[string]string, len(props))
	for _, k := range keys {
		norm, known, err := normalizeListenerKey(k, props[k])
		if !known {
			norm, err = normalizeBroker(k, props[k])
		}
		if err != nil {
			return nil, err
		}
		static[k] = norm
	}
	b, err := build(layers{static: static})
	if err != nil {
		return nil, err
	}
	b.live = &live{}
	b.live.cur.Store(b)
	return b, nil
}

// normalizeBroker validates one broker value on its own and returns its
// normalized text.
func normalizeBroker(key, value string) (string, error) {
	d := brokerDefs[key]
	if d == nil {
		return "", unknown(key, "broker configuration")
	}
	_, norm, reason := d.vt.parse(strings.TrimSpace(value))
	if reason != "" {
		return "", invalid(key, value, reason)
	}
	return norm, nil
}

// Load reads the server.properties file at path ("" for none: all defaults),
// applies sets ("key=value" overrides, e.g. from --set flags) over it, and
// parses the result. A set without "=" or with an empty key is an error.
func Load(path string, sets []string) (*Broker, error) {
	props := map[string]string{}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		props, err = ReadProperties(f)
		cerr := f.Close()
		if err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, path)
		}
		if cerr != nil {
			return nil, fmt.Errorf("config: %w", cerr)
		}
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("config: --set %q is not key=value: %w", s, ErrInvalidConfig)
		}
		props[k] = v
	}
	return Parse(props)
}

// build makes a snapshot from configured values (already normalized one by
// one) and checks the rules that involve several keys.
func build(lay layers) (*Broker, error) {
	b := &Broker{
		lay:    lay,
		values: make(map[string]string, len(brokerDefList)),
		null:   map[string]bool{},
	}
	typed := make(map[string]any, len(brokerDefList))
	for _, d := range brokerDefList {
		raw, ok := lay.lookup(d.name)
		if !ok {
			if d.dflt == nil {
				b.values[d.name] = ""
				b.null[d.name] = true
				continue
			}
			raw = *d.dflt
		}
		v, norm, reason := d.vt.parse(strings.TrimSpace(raw))
		if reason != "" {
			return nil, invalid(d.name, raw, reason)
		}
		typed[d.name] = v
		b.values[d.name] = norm
		if d.field != nil {
			assign(d.field(b), v)
		}
	}
	if err := b.derive(typed); err != nil {
		return nil, err
	}
	return b, nil
}

// setEffective records the effective value of a derived key.
func (b *Broker) setEffective(key, value string) {
	b.values[key] = value
	delete(b.null, key)
}

// derive computes the fields that depend on several keys and checks the
// cross-key rules of Kafka's KafkaConfig.validateValues.
func (b *Broker) derive(typed map[string]any) error {
	const minute, hour = 60 * 1000, 60 * 60 * 1000

	// Retention: ms, else minutes, else hours. Negative means unlimited; 0 is invalid.
	key := "log.retention.hours"
	ms := int64(typed[key].(int32)) * hour
	if v, ok := typed["log.retention.ms"]; ok {
		key, ms = "log.retention.ms", v.(int64)
	} else if v, ok := typed["log.retention.minutes"]; ok {
		key, ms = "log.retention.minutes", int64(v.(int32))*minute
	}
	switch {
	case ms < 0:
		ms = -1
	case ms == 0:
		return invalid(key, b.values[key], "retention must be unlimited (-1) or at least 1 ms")
	}
	b.LogRetentionMs = ms
	b.setEffective("log.retention.ms", strconv.FormatInt(ms, 10))

	b.LogRollMs = int64(typed["log.roll.hours"].(int32)) * hour
	if v, ok := typed["log.roll.ms"]; ok {
		b.LogRollMs = v.(int64)
	}
	b.setEffective("log.roll.ms", strconv.FormatInt(b.LogRollMs, 10))

	b.LogRollJitterMs = int64(typed["log.roll.jitter.hours"].(int32)) * hour
	if v, ok := typed["log.roll.jitter.ms"]; ok {
		b.LogRollJitterMs = v.(int64)
	}
	b.setEffective("log.roll.jitter.ms", strconv.FormatInt(b.LogRollJitterMs, 10))

	b.LogFlushIntervalMs = b.LogFlushSchedulerIntervalMs
	if v, ok := typed["log.flush.interval.ms"]; ok {
		b.LogFlushIntervalMs = v.(int64)
	}
	b.setEffective("log.flush.interval.ms", strconv.FormatInt(b.LogFlushIntervalMs, 10))

	dirs := typed["log.dir"]
	if v, ok := typed["log.dirs"]; ok {
		dirs = v
	}
	assign(&b.LogDirs, dirs)
	b.setEffective("log.dirs", strings.Join(b.LogDirs, ","))

	if err := b.deriveListeners(typed); err != nil {
		return err
	}
	if err := b.checkQuorum(); err != nil {
		return err
	}

	if b.QueuedMaxRequestBytes > 0 && b.QueuedMaxRequestBytes < int64(b.SocketRequestMaxBytes) {
		return invalid("queued.max.request.bytes", b.values["queued.max.request.bytes"],
			"queued.max.request.bytes must be at least socket.request.max.bytes ("+b.values["socket.request.max.bytes"]+")")
	}
	if b.MaxConnectionsPerIP == 0 && len(b.MaxConnectionsPerIPOverrides) == 0 {
		return invalid("max.connections.per.ip", b.values["max.connections.per.ip"],
			"max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.")
	}
	if b.ReplicaFetchWaitMaxMs > b.ReplicaSocketTimeoutMs {
		return invalid("replica.fetch.wait.max.ms", b.values["replica.fetch.wait.max.ms"],
			b.values["replica.fetch.wait.max.ms"]+" must not exceed replica.socket.timeout.ms ("+b.values["replica.socket.timeout.ms"]+")")
	}
	if int64(b.ReplicaFetchWaitMaxMs) > b.ReplicaLagTimeMaxMs {
		return invalid("replica.fetch.wait.max.ms", b.values["replica.fetch.wait.max.ms"],
			b.values["replica.fetch.wait.max.ms"]+" must not exceed replica.lag.time.max.ms ("+b.values["replica.lag.time.max.ms"]+")")
	}
	if b.LogCleanerEnable && b.LogCleanerThreads > 0 && b.LogCleanerDedupeBufferSize/int64(b.LogCleanerThreads) <= 1<<20 {
		return invalid("log.cleaner.dedupe.buffer.size", b.values["log.cleaner.dedupe.buffer.size"],
			"log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread ("+b.values["log.cleaner.threads"]+" threads)")
	}
	if b.LogCleanerEnable && b.LogCleanerIOBufferLoadFactor <= 0 {
		return invalid("log.cleaner.io.buffer.load.factor", b.values["log.cleaner.io.buffer.load.factor"],
			"the key -> offset map of a cleaner thread could hold no key")
	}
	if err := b.checkGroupConsumerBounds(); err != nil {
		return err
	}
	if b.LogCleanerMinCompactionLagMs > b.LogCleanerMaxCompactionLagMs {
		return invalid("log.cleaner.min.compaction.lag.ms", b.values["log.cleaner.min.compaction.lag.ms"],
			b.values["log.cleaner.min.compaction.lag.ms"]+" must not exceed log.cleaner.max.compaction.lag.ms ("+b.values["log.cleaner.max.compaction.lag.ms"]+")")
	}
	return nil
}

// checkGroupConsumerBounds applies Kafka's rules for the consumer-protocol group timeouts: each
// default within its min and max, and the heartbeat interval below the session timeout.
func (b *Broker) checkGroupConsumerBounds() error {
	for _, c := range []struct {
		key, minKey, maxKey string
		v, lo, hi           int32
	}{
		{"group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
			b.GroupConsumerSessionTimeoutMs, b.GroupConsumerMinSessionTimeoutMs, b.GroupConsumerMaxSessionTimeoutMs},
		{"group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
			b.GroupConsumerHeartbeatIntervalMs, b.GroupConsumerMinHeartbeatIntervalMs, b.GroupConsumerMaxHeartbeatIntervalMs},
		{"group.share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
			b.GroupShareSessionTimeoutMs, b.GroupShareMinSessionTimeoutMs, b.GroupShareMaxSessionTimeoutMs},
		{"group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
			b.GroupShareHeartbeatIntervalMs, b.GroupShareMinHeartbeatIntervalMs, b.GroupShareMaxHeartbeatIntervalMs},
		{"group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
			b.GroupShareRecordLockDurationMs, b.GroupShareMinRecordLockDurationMs, b.GroupShareMaxRecordLockDurationMs},
	} {
		switch {
		case c.lo > c.hi:
			return invalid(c.minKey, b.values[c.minKey], c.minKey+" must not exceed "+c.maxKey+" ("+b.values[c.maxKey]+")")
		case c.v < c.lo:
			return invalid(c.key, b.values[c.key], c.key+" must be at least "+c.minKey+" ("+b.values[c.minKey]+")")
		case c.v > c.hi:
			return invalid(c.key, b.values[c.key], c.key+" must not exceed "+c.maxKey+" ("+b.values[c.maxKey]+")")
		}
	}
	if b.GroupConsumerHeartbeatIntervalMs >= b.GroupConsumerSessionTimeoutMs {
		return invalid("group.consumer.heartbeat.interval.ms", b.values["group.consumer.heartbeat.interval.ms"],
			"group.consumer.heartbeat.interval.ms must be below group.consumer.session.timeout.ms ("+b.values["group.consumer.session.timeout.ms"]+")")
	}
	if b.GroupShareHeartbeatIntervalMs >= b.GroupShareSessionTimeoutMs {
		return invalid("group.share.heartbeat.interval.ms", b.values["group.share.heartbeat.interval.ms"],
			"group.share.heartbeat.interval.ms must be below group.share.session.timeout.ms ("+b.values["group.share.session.timeout.ms"]+")")
	}
	return nil
}

// deriveListeners fills in advertised listeners, security protocols and the
// inter-broker listener, and checks Kafka's listener rules.
func (b *Broker) deriveListeners(typed map[string]any) error {
	protos := map[string]string{}
	for k, v := range typed["listener.security.protocol.map"].(map[string]string) {
		protos[k] = v
	}
	if _, set := b.lay.lookup("listener.security.protocol.map"); !set {
		// As Kafka (KRaft): with the default map, controller listeners are PLAINTEXT.
		for _, n := range b.ControllerListenerNames {
			if _, ok := protos[n]; !ok {
				protos[n] = "PLAINTEXT"
			}
		}
	}
	b.ListenerSecurityProtocolMap = protos

	if v, ok := typed["advertised.listeners"]; ok {
		assign(&b.AdvertisedListeners, v)
	} else {
		b.AdvertisedListeners = []Listener{}
		for _, l := range b.Listeners {
			if !contains(b.ControllerListenerNames, l.Name) {
				b.AdvertisedListeners = append(b.AdvertisedListeners, l)
			}
		}
	}
	b.setEffective("advertised.listeners", formatListeners(b.AdvertisedListeners))

	names := map[string]bool{}
	for i := range b.Listeners {
		l := &b.Listeners[i]
		p, ok := protos[l.Name]
		if !ok {
			return invalid("listeners", b.values["listeners"], "no security protocol for listener "+l.Name+" in listener.security.protocol.map")
		}
		l.SecurityProtocol = p
		names[l.Name] = true
	}
	for i := range b.AdvertisedListeners {
		l := &b.AdvertisedListeners[i]
		if !names[l.Name] {
			return invalid("advertised.listeners", b.values["advertised.listeners"], "listener "+l.Name+" is not in listeners")
		}
		if l.Host == "0.0.0.0" || l.Host == "::" {
			return invalid("advertised.listeners", b.values["advertised.listeners"], "cannot advertise the non-routable address "+l.Host)
		}
		l.SecurityProtocol = protos[l.Name]
	}

	b.InterBrokerListenerName = "PLAINTEXT"
	if v, ok := typed["inter.broker.listener.name"]; ok {
		b.InterBrokerListenerName = strings.ToUpper(v.(string))
	}
	b.setEffective("inter.broker.listener.name", b.InterBrokerListenerName)
	if contains(b.ProcessRoles, "broker") {
		found := false
		for _, l := range b.AdvertisedListeners {
			found = found || l.Name == b.InterBrokerListenerName
		}
		if !found {
			return invalid("inter.broker.listener.name", b.InterBrokerListenerName,
				"listener "+b.InterBrokerListenerName+" is not among the advertised listeners")
		}
	}
	return nil
}

// Current returns the newest snapshot of this configuration (b itself until
// a dynamic change, or if b was not made by Parse, Load or Default).
func (b *Broker) Current() *Broker {
	if b.live == nil {
		return b
	}
	return b.live.cur.Load()
}

// Values returns every broker key with its effective value as text. Keys
// that Kafka reports as null (unset, no default) map to "". For the keys that
// head a synonym group (log.retention.ms, log.roll.ms, log.roll.jitter.ms,
// log.flush.interval.ms, log.dirs) and for advertised.listeners and
// inter.broker.listener.name the value is the effective one, whichever key
// supplied it.
func (b *Broker) Values() map[string]string {
	cur := b.Current()
	m := make(map[string]string, len(cur.values))
	for k, v := range cur.values {
		m[k] = v
	}
	return m
}

// Explicit returns the keys set in server.properties or by --set, with their
// normalized values (the STATIC_BROKER_CONFIG source of DescribeConfigs).
func (b *Broker) Explicit() map[string]string {
	return copyMap(b.Current().lay.static)
}

func copyMap(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
