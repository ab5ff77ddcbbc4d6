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
// one stream thread (the goroutine in Run). The streams assignor (assignor.go, protocol
// "stream") assigns tasks, each whole (every source partition of a task to one member):
// sticky to the member that ran the task, then to one keeping a warm standby copy of its
// state, spread evenly over the members in total and per sub-topology; each stateful task
// gets NumStandbyReplicas standbys on other members. Subscription and assignment carry user
// data with a version byte (userdata.go): application.server, previous and standby tasks,
// every instance's tasks, and KIP-671's shutdown request. When a task is assigned its
// stores are restored from their changelogs before it processes a record (a task that was
// a standby here starts from the standby's copy and restores only the tail); when revoked,
// what was processed is committed and the task closed, its in-memory stores kept as a warm
// copy (at-least-once) in case the task is assigned back; its persistent stores keep their
// state on disk with a checkpoint.
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
//	<state.dir>/<application.id>/<task id>/<store>.timestamped  its values carry timestamps
//
// WithStoreType(InMemory) on an operator, or Config.DefaultDSLStore, keeps a store in the
// heap instead; the test driver keeps every store in memory. Key-value stores (Count,
// Reduce, Aggregate, Table, Materialized, the foreign-key join's subscriptions,
// AddKeyValueStore) hold the serialized key and value; those of aggregations (time-windowed
// ones too), tables and materialized derived tables are timestamped, as Kafka's timestamped stores: each
// value is kept with its timestamp (8 bytes before it), which an aggregation's result
// takes as the latest of its inputs' and a table-table join's result as the later of both
// sides'; their changelog records carry it as the record timestamp, the value's bytes
// unchanged, and restore reads it back (a persistent one without its .timestamped marker,
// written before, is restored from its changelog's start); the store of a tumbling or hopping
// windowed aggregation is cut into time segments (segment | key | window start), so a fetch
// by key and time range is a seek per segment and expiry drops whole segments. The stores
// of sliding windows, sessions and stream-stream joins' windows keep one entry per window
// (key | start | end), each key's windows together by start; their expiry reads the whole
// store, at most once per gap, time difference or half retention of stream time. The
// stores of suppression buffers, outer joins' waiting records and global tables are in
// memory.
//
// As in Kafka Streams the stores write no log of their own (the changelog is their log):
// a checkpoint (Kafka's OffsetCheckpoint format) is written after the stores are flushed,
// at a commit once more than 10,000 changelog records have gone in since the last one
// (at-least-once), and whenever a task closes cleanly. Under exactly_once_v2 it is written
// only when a task closes holding committed state only (a clean stop, or a rebalance or an
// abort while its stores took no write since the last committed transaction) and removed
// when the task opens, so after a crash the stores (which may hold effects of an aborted
// transaction) have none. When a task opens, a store whose checkpoint lies within its
// changelog restores only the records after it; a store without one, or whose checkpoint
// is outside the log, is wiped and restored from the start. Config.StateRestoreListener
// hears every restore's start, batches and end; the log says what each restore read.
// App.CleanUp deletes the local state.
//
// # Standbys, interactive queries, errors
//
// A standby task (standby.go) is a warm copy of a task's stores kept by reading its
// changelog partitions (read_committed) on a reader goroutine of its own; nothing processes
// in it. Store reads the local instances of a key-value store (Get, Range, All),
// WindowStoreOf those of a tumbling, hopping or sliding window store (Kafka's
// ReadOnlyWindowStore: Get, Fetch, FetchRange, All, FetchAll and their backward forms) and
// SessionStoreOf those of a session store (ReadOnlySessionStore: Fetch, FetchRange,
// FindSessions, FetchSession), each refusing with ErrInvalidStateStore while they restore
// or when none is here; StaleStores includes standby copies. MetadataForKey hashes the serialized key with murmur2 over the store's
// task count, as the sinks partition, and names the instance whose ApplicationServer runs
// that task, from the assignment. The ProductionExceptionHandler decides about a record the
// producer could not send (fail, or continue and count); the UncaughtExceptionHandler about
// an error that ended the stream thread: replace it (a new client and member, the failed
// work redone from the last commit), shut this instance down (the default) or the whole
// application (through the assignment).
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
// counted), over sliding windows (SlidingWindowedBy, the same aggregations; Kafka's
// KStreamSlidingWindowAggregate) and over sessions (SessionWindowedBy, CountSessionWindowed,
// ReduceSessionWindowed, AggregateSessionWindowed with a merger; merged-away sessions
// deleted downstream); windowed keys written as Kafka's serdes write them (WindowedSerde:
// key and start; SessionWindowedSerde: key, end and start); Suppress, UntilWindowCloses
// (only final results) and UntilTimeLimit with a BufferConfig (emit early or fail when
// full), its buffer changelogged and restored; joins (below); KTable Filter, FilterNot,
// MapValuesTable and ToStream, and Materialized for a derived table's store; the Processor
// API (Process, ProcessorContext with Forward, ForwardTo, stores and punctuators on stream
// time and wall-clock time); persistent (pebble) and in-memory key-value and time-window
// stores with changelogs (WithStoreType, Config.DefaultDSLStore), state.dir with locked
// task directories, checkpoints and a restore of only the changelog past them, CleanUp; and
// persistent and in-memory stores of sliding windows, sessions and stream-stream joins'
// windows (sorted per key, changelogged and restored: WindowStore, SessionStore); Describe; the test driver; the runtime,
// at-least-once and exactly_once_v2, with instances of one application.id sharing its
// tasks through a sticky, state-aware assignor; standby replicas (num.standby.replicas);
// timestamped results (an aggregation's carries the latest timestamp of its inputs, a
// table-table join's the later of both sides'); interactive queries of key-value, window
// and session stores (Store, WindowStoreOf,
// SessionStoreOf, MetadataForKey, AllMetadata, application.server); the
// deserialization exception handler (LogAndFail, LogAndContinue), the production exception
// handler and the uncaught-error handler (replace the thread, shut down the client or the
// application); a state restore listener (start, batches, end).
//
// Where Kafka Streams' windows are ambiguous, windows here are final once closed: a closed
// session is never merged into a new one, and UntilWindowCloses emits a sliding window or a
// session (whose ends are inclusive) one millisecond after Kafka's suppression would, when
// its aggregation can no longer change it. Sliding windows may start before the epoch
// (Kafka folds such records into [0, time difference]).
//
// Not yet: persistent stores of suppression buffers, outer joins' waiting records and
// global tables; standby copies on disk (a standby keeps its copy in memory); the state cleaner
// (state.cleanup.delay.ms: directories of tasks no longer assigned stay until CleanUp);
// Suppress's spill to disk; a record cache (every table update is forwarded and every
// persistent store access reaches pebble); more than one
// stream thread per App; the cooperative (incremental) rebalance protocol and warmup
// replicas with probing rebalances (KIP-441): rebalances are eager, so every task is closed
// and made again (a task that stays restores only the changelog's tail, except under
// exactly_once_v2 when its stores took a write in the transaction the rebalance aborted:
// then it restores from the start); the production exception handler under exactly_once_v2 (a failed send
// fails the transaction) and for serialization errors; KTable groupBy; timestamps of
// foreign-key join results (each has the timestamp of the update that caused it, not the
// later of both sides'); a null foreign key (the extractor always returns one);
// custom processors for global stores; task idling (KIP-695, max.task.idle.ms): a task
// orders by timestamp the records one poll brought, and does not wait for a source
// partition whose records have not been fetched yet.
//
// # Joins
//
// Every join of Kafka Streams, each a package function (Go methods take no type
// parameters), named as Kafka names its nodes, stores and internal topics:
//
//   - stream-table, Join and LeftJoin: each stream record looks its key up in the table.
//   - stream-stream, JoinStreams, LeftJoinStreams and OuterJoinStreams over JoinWindows
//     (JoinTimeDifferenceAndGrace, WithBefore, WithAfter): both streams are kept in window
//     stores (KSTREAM-JOINTHIS-NNNNNNNNNN-store and KSTREAM-JOINOTHER-...-store, with
//     compact,delete changelogs) for the window's size plus its grace; as in Kafka 3.x a
//     record of an outer side that joined nothing waits in KSTREAM-OUTERSHARED-...-store
//     and gets its null-joined result only once stream time has passed its window's end
//     plus the grace period.
//   - table-table, JoinTables, LeftJoinTables and OuterJoinTables: an update of either
//     table joins the other's current value; a deletion forwards the result's deletion.
//   - stream-globaltable, JoinGlobal and LeftJoinGlobal with a key selector: GlobalTable is
//     read whole by every instance, restored from its topic (no changelog) before any task
//     runs and kept up to date by a global thread.
//   - foreign-key, JoinForeignKey and LeftJoinForeignKey (KIP-213): through
//     <application.id>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-NNNNNNNNNN-topic
//     (partitioned as the right table) and -SUBSCRIPTION-RESPONSE-NNNNNNNNNN-topic
//     (partitioned as the left), with a hash of the left value dropping stale responses.
//
// A left or outer join's record with a null key gets its result at once (KIP-962). The
// inputs of a join other than the global and foreign-key ones must be co-partitioned:
// Run fails at start when their topics have different partition counts, and a stream whose
// key changed is repartitioned first.
package streams
