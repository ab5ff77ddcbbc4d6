// Package config is a node's configuration in Kafka's terms: server.properties keys with
// Kafka's names, types, defaults, validation and synonyms, the topic configs with their
// broker synonyms, and the dynamic (runtime) layers that AlterConfigs and
// IncrementalAlterConfigs change. What DescribeConfigs reports is computed here, so a Kafka
// tool sees the names, values, sources and types Kafka would report.
//
// # Files
//
//   - properties.go: ReadProperties, the Java .properties format (java.util.Properties.load).
//   - schema.go: the value types (int, long, list, password, ...) each key is parsed by, and
//     the DescribeConfigs type and source constants.
//   - broker.go: Broker, the table of broker keys (brokerDefList: name, type, default,
//     documentation, the field it sets), Parse and Load; notServed lists Kafka keys Gregor
//     cannot honour, which stop start-up naming the key and why.
//   - topic.go: Topic, the table of topic keys and their broker synonyms, and how a topic's
//     effective configuration is resolved (override, then broker synonym, then default).
//   - group.go: group configs (config resource type GROUP, Kafka's GroupConfig): the keys a
//     consumer or share group may override, their validation against the broker's
//     group.* min/max bounds (ValidateGroupConfigs), their effective values (GroupValue)
//     and DescribeConfigs entries (DescribeGroup, source GROUP_CONFIG), and
//     share.auto.offset.reset's parsing (ISO-8601 durations as Java's Duration.parse).
//   - dynamic.go: the dynamic layers (per broker and cluster default) and which keys may
//     change at runtime; describe.go: DescribeConfigs entries with their sources and
//     synonyms.
//   - listener.go, security.go, connlimits.go, authorizer.go, quorum.go: the listeners and
//     their per-listener keys (listener.name.<listener>.<key>), TLS and SASL settings,
//     connection limits, the authorizer and super users, and KRaft's quorum rules.
//   - cluster_props.go: the properties of each node of a local multi-node cluster (the dev
//     subcommand and the test harness).
//
// # Invariants
//
//   - A key Gregor accepts does what Kafka's does. An unknown key, an invalid value, or a
//     Kafka key that is not served is an *Error naming the key; nothing is accepted and
//     then ignored.
//   - A *Broker is an immutable snapshot: its exported fields are never written after Parse
//     returns. Runtime changes build and validate a new snapshot and publish it atomically
//     (copy-on-write, see dynamic.go); Current returns the newest, and a change that fails
//     validation publishes nothing.
//   - The key tables are checked once when the package loads (the init functions of
//     broker.go and topic.go): a duplicate key or a default its own type refuses panics
//     there, so a bad table never reaches a running broker.
//   - Durations are milliseconds named after their Kafka key; -1 means unlimited where Kafka
//     says so, and math.MaxInt64 "never" for the flush settings.
package config
