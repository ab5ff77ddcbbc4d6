// Package streams is Gregor Streams: a stream-processing library for Go shaped after Kafka
// Streams. It is a Kafka client (franz-go and the standard library, no broker package), so
// it runs against any Kafka-compatible cluster.
//
//	b := streams.NewBuilder()
//	lines := streams.Stream(b, "text-lines", serde.String, serde.String)
//	words := streams.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
//	counts := streams.Count(streams.GroupBy(words, func(_, w string) string { return w }, serde.String), streams.Named("counts"))
//	streams.To(streams.ToStream(counts), "word-counts", serde.String, serde.Int64Text)
//	app, err := streams.New(b, streams.Config{ApplicationID: "wordcount", Brokers: brokers})
//	...
//	err = app.Run(ctx) // until ctx is done
//
// # Shape
//
// Go methods take no type parameters, so operators that change the key or value type are
// package functions (Map, MapValues, FlatMap, FlatMapValues, SelectKey, GroupBy, Count,
// Aggregate, ...) and only type-preserving ones are methods (Filter, FilterNot, Peek,
// Foreach, Merge, Split).
//
// Underneath the typed DSL is one untyped core. A Builder holds nodes (Source, Processor,
// Sink) and stores; build cuts the graph into sub-topologies (nodes joined by edges or by a
// shared store; a repartition topic cuts it). A task (task.go) runs one sub-topology for one
// partition: it deserializes a source record, passes it down the nodes depth first, writes
// sink records and store changes through one emit function, keeps the stream time and fires
// punctuators. It has no goroutine and no clock of its own, so the same task runs under the
// test driver (driver.go, deterministic, package streamstest) and under the runtime
// (runtime.go, assign.go).
//
// The runtime is one consumer-group member per App, the group being application.id, with
// one stream thread (the goroutine in Run). Range assignment gives a member the same
// partition numbers of every source topic, so the task (sub-topology, partition) is whole on
// one member. When a task is assigned its stores are restored from their changelogs before
// it processes a record; when revoked, what was processed is committed and the task closed.
//
// Naming follows Kafka Streams: nodes KSTREAM-SOURCE-0000000000 and so on, internal topics
// <application.id>-<name>-repartition and <application.id>-<store>-changelog (compacted),
// Describe as TopologyDescription prints it.
//
// # State
//
// Stateful operators keep their state in stores, each backed by a compacted changelog
// topic. A store is persistent by default, as Kafka Streams' RocksDB stores: a pebble
// database per store and task under Config.StateDir (state.dir, <temp dir>/gregor-streams
// when unset), laid out as
//
//	<state.dir>/<application.id>/<task id>/.lock          flock held while an App runs it
//	<state.dir>/<application.id>/<task id>/.checkpoint    changelog offsets the stores hold
//	<state.dir>/<application.id>/<task id>/<store>/       the store's pebble files
//
// WithStoreType(InMemory) on an operator, or Config.DefaultDSLStore, keeps a store in the
// heap instead; the test driver keeps every store in memory. Key-value stores (Count,
// Reduce, Aggregate, Table, AddKeyValueStore) hold the serialized key and value; the
// windowed aggregation's store is cut into time segments (segment | key | window start),
// so a fetch by key and time range is a seek per segment and expiry drops whole segments.
//
// As in Kafka Streams the stores write no log of their own (the changelog is their log):
// a checkpoint (Kafka's OffsetCheckpoint format) is written after the stores are flushed,
// at a commit once more than 10,000 changelog records have gone in since the last one
// (at-least-once), and whenever a task closes cleanly. Under exactly_once_v2 it is written
// only when a task closes holding committed state only (a clean stop, or a rebalance or
// abort while its stores took no write since the last committed transaction) and removed
// when the task opens, so after a crash the stores (which may hold effects of an aborted
// transaction) have none. When a task opens, a store
// whose checkpoint lies within its changelog restores only the records after it; a store
// without one, or whose checkpoint is outside the log, is wiped and restored from the
// start. Config.RestoreListener (a StateRestoreListener) hears every restore's start,
// batches and end; the log says what each restore read. App.CleanUp deletes the local
// state.
//
// # Guarantees
//
// At-least-once (the default): every commit interval the producer is flushed (every output,
// repartition and changelog record acknowledged), then the offsets of the processed input
// are committed. After a crash the input since the last commit is processed again.
//
// exactly_once_v2 (KIP-447, eos.go): the stream thread's one transactional producer (its
// transactional.id is application.id plus a random suffix; fencing is by the group
// generation) sends the output, repartition and changelog records and the consumed offsets
// in one transaction per commit interval (100 ms by default). Consumers read with
// read_committed. An aborted transaction (a rebalance during it) drops every task and
// restores its stores from the committed changelogs, and the input is read again from the
// committed offsets.
//
// # What exists, and what does not yet
//
// Exists: serdes (package serde); streams and tables from topics, with the record's
// timestamp or a timestamp extractor's (StreamWith); Filter, FilterNot, Map,
// MapValues, FlatMap, FlatMapValues, SelectKey, Split/Branch, Merge, Peek, Foreach, To (with
// a partitioner), Repartition; GroupByKey and GroupBy with Count, Reduce and Aggregate into a
// KTable; windowed aggregation over tumbling and hopping time windows with a grace period
// (WindowedBy, CountWindowed, ReduceWindowed, AggregateWindowed; late records dropped and
// counted); stream-table joins (Join, LeftJoin); ToStream; the Processor API (Process, ProcessorContext with Forward, ForwardTo,
// stores and punctuators on stream time and wall-clock time); persistent (pebble) and
// in-memory key-value and window stores with changelogs, state.dir with locked task
// directories, checkpoints and a restore of only the changelog past them, restore progress
// (StateRestoreListener) and CleanUp; Describe; the test driver; the runtime, at-least-once and
// exactly_once_v2, with instances of one application.id sharing its tasks; the
// deserialization exception handler (LogAndFail, LogAndContinue).
//
// Not yet: sliding and session windows, suppress-until-window-closes; the other joins
// (stream-stream, table-table, global tables, foreign-key); a record cache (every table
// update is forwarded and every store access reaches pebble); the state cleaner
// (state.cleanup.delay.ms: directories of tasks no longer assigned stay until CleanUp);
// committing the open transaction when a rebalance starts under exactly_once_v2 (a task
// that wrote in it is wiped and restored whole); standby replicas and a sticky,
// state-aware assignor; more than one stream thread per App; interactive queries and
// application.server; the production exception handler (a failed produce stops Run) and
// the uncaught-error handler; co-partitioning checks; KTable operators other than
// ToStream.
package streams
