// Package storage is a broker's disk: partition logs in Kafka's own on-disk layout, their
// indexes and checkpoints, recovery after an unclean stop, retention, and log compaction.
// It knows record batches only as bytes with a header (internal/batch); partitions, leaders
// and the high watermark's meaning are the replica layer's, above it.
//
// # Layout
//
// A log dir holds what Kafka's LogManager keeps there (Manager, manager.go):
//
//	<dir>/meta.properties                        cluster.id, node.id, version (metaprops.go)
//	<dir>/.kafka_cleanshutdown                   present only while stopped after a clean Close
//	<dir>/recovery-point-offset-checkpoint       per partition: offsets below were fsynced
//	<dir>/log-start-offset-checkpoint            per partition: the log start offset
//	<dir>/cleaner-offset-checkpoint              per compacted partition: the first dirty offset
//	<dir>/<topic>-<partition>/                   one Log
//	<dir>/<topic>-<partition>.<id>-delete/       a partition being deleted
//
// and a partition directory Kafka's segment files:
//
//	<base>.log         record batches as on the wire, base offsets increasing (segment.go)
//	<base>.index       sparse offset -> position, 8-byte entries (offsetindex.go)
//	<base>.timeindex   sparse timestamp -> offset, 12-byte entries (timeindex.go)
//	<base>.txnindex    aborted transactions whose ABORT marker is in the segment (txnindex.go)
//	leader-epoch-checkpoint   epoch -> start offset (leaderepoch.go)
//
// The checkpoint formats are Kafka's (checkpoint.go), so a directory moves between Kafka and
// Gregor in either direction.
//
// # Files
//
//   - log.go: Log, one partition's segments, its settings (Config, named after the topic
//     configs) and its invariants and lock order; append.go, read.go, truncate.go,
//     flush.go, retention.go and timestamps.go are its operations; recovery.go opens it
//     (Kafka's LogLoader: re-reads the segments past the recovery point, truncates a torn
//     tail, rebuilds indexes).
//   - segment.go, index.go, offsetindex.go, timeindex.go, txnindex.go: one segment and its
//     index files; filecache.go bounds the open .log descriptors of the whole broker;
//     mmap_*.go and alloc_*.go map and preallocate the active indexes.
//   - cleaner.go, cleanerswap.go, cleanertxn.go, offsetmap.go, dirtiness.go, logcleaner.go:
//     compaction, after Kafka's Cleaner, LogCleanerManager and LogCleaner.
//   - manager.go, metaprops.go, checkpoint.go: a log dir and the logs in it; logdir.go one
//     dir of several (JBOD), future.go moves between them, offlinedir.go a dir that fails.
//   - fs.go, faultfs.go: the file system every byte goes through (FS), and the
//     fault-injecting one tests put under it (failed, torn or unsynced writes).
//   - errors.go: the sentinel errors, each with the Kafka error code internal/api answers
//     for it.
//
// # Invariants
//
// Log states its own (log.go); those the package keeps across files:
//
//   - Every file operation goes through FS; nothing here opens a path with package os
//     directly, so a FaultFS sees every write, fsync, rename and removal.
//   - Bytes below a log's recovery point are fsynced, and the recovery point only moves
//     after the fsync returned; a failed write, fsync or truncate takes the log offline
//     (ErrLogOffline) rather than letting readers see what the disk may not hold.
//   - Readers see only whole, committed batches; record bytes are handed out as file ranges
//     (Slice) to be sent with sendfile, never copied through the Go heap.
//   - Indexes are derived data: a missing or corrupt index is rebuilt from its .log.
//   - Nothing here starts a goroutine that outlives its call except the log cleaner's
//     threads (LogCleaner.Start, until its context ends; the broker starts one per log dir).
package storage
