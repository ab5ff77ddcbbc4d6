// Package coordinator is what Gregor's coordinators share (Kafka's coordinator-common and its
// CoordinatorRuntime): the group coordinator (internal/group, over __consumer_offsets), the
// transaction coordinator (internal/txn, over __transaction_state), and the share coordinator
// (internal/share StateCoordinator, over __share_group_state, whose per-partition state is a
// map of share-partition states written one record at a time). Each of them is a core per
// partition of its topic and an edge around the cores; this package holds the parts of the edge that do not depend on
// what the core is, and the deadline queue the cores keep.
//
// # What it owns
//
//   - Runtime[S] (runtime.go), generic over the coordinator's per-partition shard type S: the
//     topic's partition count (learnt on Start, or on first use by creating the topic), the
//     map from partition to the shard of this broker's current term of leadership, the
//     leader epochs that order Elect and Resign, Start and Close, and the goroutines that load
//     shards. A key (group id, transactional id) is routed to its shard with Runtime.Shard:
//     NOT_COORDINATOR if its partition is not led here, COORDINATOR_NOT_AVAILABLE if the
//     topic cannot be created or the Runtime is closed. The coordinator supplies how to make
//     a shard for a Term (Config.NewShard), how to load it (Config.Load: replay the partition
//     into a new core and publish it) and how to retire it (Config.Unload: answer what waits
//     on it).
//   - Term: one term of leadership of a partition, the partition, its leader epoch and a
//     context cancelled when the term ends. A shard is made for one term and never reused.
//   - Replay (replay.go): the read loop over a partition's log from its start to its end as
//     it stood when loading began, past the high watermark, as Kafka loads: a leader never
//     truncates its own log, so what it holds becomes committed in its term, and dropping it
//     would lose what the previous leader acknowledged. Each coordinator decides what a batch
//     means to its core.
//   - Append and AwaitCommit (append.go): a shard's writes, one uncompressed batch (optionally
//     transactional for a producer, BaseSequence -1) appended as the partition's leader in
//     the shard's epoch with acks=all, and the bounded wait for the ISR to have it. Each
//     coordinator names the failures with the Kafka errors its core maps.
//   - Timer (timer.go): a shard's one wall-clock timer, armed for its core's next deadline.
//   - Deadlines[K] (deadlines.go): the cores' deadline queue, keyed by what each deadline is
//     for. It has no clock: the core pops what is due at the time its Tick carries.
//
// What stays in each coordinator: its core (state machine, records, replies), its request
// handling, the shard's lock and what it guards (core, timer, pending appends), the committer
// that reports append outcomes to the core in log order, the naming of append failures,
// and how a shard is loaded and unloaded.
//
// # Locks
//
// Runtime.mu guards the partition count, the shard map, the epochs and closed; createMu
// serialises creating the topic (it is taken before mu, never under it). A shard's own lock
// is the coordinator's, and the two are never held together: the Runtime calls
// Config.NewShard under mu (so it must not block or take the shard's lock), and Config.Load
// and Config.Unload without it. Timer is guarded by its shard's lock; its fire function runs
// on its own goroutine and takes that lock.
//
// Every goroutine Close waits for is added to one WaitGroup under a lock Close takes before
// it waits: the loading goroutine of Elect under mu, and those of Runtime.Go (the
// transaction coordinator's marker sends) under the lock of a shard not yet unloaded, which
// Unload takes. So nothing is added after Close began to wait.
//
// # Epochs
//
// The coordinator of a key is the leader of its partition (Kafka's onElection and
// onResignation). The broker reports each change of leadership it applies from the metadata
// log:
//
//   - Elect(p, epoch): this broker leads partition p in leader epoch epoch. The Runtime makes
//     a new shard for p (a new Term) and loads it in the background; meanwhile its keys
//     answer COORDINATOR_LOAD_IN_PROGRESS (the coordinator's shard answers that until its
//     core is published).
//   - Resign(p, epoch): another broker leads p from epoch on (or p is gone: epoch -1). The
//     shard is unloaded (its term's context is cancelled, then Config.Unload answers what
//     waits on it with NOT_COORDINATOR) and every later request of its keys is answered
//     NOT_COORDINATOR.
//
// Epochs order the reports (they may come late from a slow metadata loop): an Elect is
// ignored unless its epoch is newer than every epoch Elect and Resign saw for the partition,
// so a repeated Elect is harmless and an Elect that follows a Resign of a newer epoch does
// nothing. A Resign is ignored when its epoch is older than the shard's, a stale report of
// an earlier term. An Elect in a newer epoch while a shard is loaded replaces it (the log may
// have changed while another broker led the partition, so the shard is loaded again). A
// Resign with epoch -1 forgets the partition's epochs, as a recreated topic starts over.
//
// Fencing does not rest on the reports arriving in time: a shard appends in the leader epoch
// it was elected in (Append), and the partition refuses an append in an epoch other than its
// own (replica.ErrFencedLeaderEpoch). A shard whose partition has moved on to a newer term,
// its Resign still on the way, writes nothing; its requests are answered NOT_COORDINATOR.
//
// Without Config.Manual the broker is a single node, which leads every partition open in
// Replicas: once the Runtime learns the partition count (Start, or the first request, which
// creates the topic) it elects them all in SingleNodeEpoch, which the partitions never
// refuse. So a known count means the single node's shards exist.
package coordinator
