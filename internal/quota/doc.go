// Package quota holds the broker's rate bounds as deterministic cores: no clock and no
// goroutine of their own. The caller passes the time of each call.
//
// # Replication throttling
//
// Bucket is a token bucket: the leader's and follower's replication throttles
// (leader.replication.throttled.rate, follower.replication.throttled.rate). The caller guards
// a Bucket with its own lock.
//
// # Client quotas (KIP-13, KIP-55, KIP-124, KIP-219)
//
// Quotas are set per Entity (a user, a client id, a user and a client id, or an IP; each part
// a name or the default entity) by AlterClientQuotas, kept in the metadata log
// (ClientQuotaRecord) and read by every broker from its metadata image as a Table. Each
// broker enforces them on its own traffic, as Kafka's brokers do:
//
//   - producer_byte_rate bounds the bytes of Produce requests a second (whole requests, as
//     Kafka counts request.sizeInBytes);
//   - consumer_byte_rate bounds the bytes of Fetch responses a second (consumers only:
//     followers' fetches are replication, bounded by the replication throttle instead); a
//     consumer over it is answered with no partitions and its throttle time, and the bytes
//     it was not sent are taken off its rate again (Kafka's getThrottledResponse and
//     unrecordQuotaSensor);
//   - request_percentage bounds the time spent handling a client's requests, in percent of
//     one thread (200 = two threads' worth of time a second).
//
// An ip entity's connection_creation_rate (KIP-612) bounds the connections accepted from one
// address a second; the server enforces it at accept (internal/server's ConnQuotas), with the
// quota of the entity naming the address, else of the default ip entity (Table.ResolveIP).
//
// Which quota applies to a request is Kafka's DefaultQuotaCallback precedence (Table.Resolve),
// first match wins:
//
//  1. user=<user>, client-id=<client-id>
//  2. user=<user>, client-id=<default>
//  3. user=<user>
//  4. user=<default>, client-id=<client-id>
//  5. user=<default>, client-id=<default>
//  6. user=<default>
//  7. client-id=<client-id>
//  8. client-id=<default>
//
// The matching entry also decides whose rate is measured (Kafka's metric tags): at 1, 2, 4
// and 5 each (user, client id) pair has its own rate, at 3 and 6 all clients of the user share
// one, at 7 and 8 all users of the client id share one. A client with no quota is not
// measured.
//
// A rate is Kafka's sampled Rate (rate.go): quota.window.num samples of
// quota.window.size.seconds each; a value recorded and found over the bound is answered with
// a throttle time, Kafka's QuotaUtils.throttleTime: (observed - bound) / bound * window, where
// window is the time the rate was measured over. Byte-rate throttles are not capped; a
// request_percentage throttle is capped at one window (ClientRequestQuotaManager).
//
// KIP-219: the broker answers at once, with the throttle time in the response's
// throttle_time_ms, then reads nothing more from the connection until the throttle time has
// passed (the server mutes the connection; server.Reply.Throttle). A client that honours the
// field waits by itself; one that does not is held back all the same.
//
// # Locking
//
// Manager.mu guards the rates of one Manager (one quota key); no other lock is taken while
// it is held, and nothing blocks under it. A Table is immutable once built (it is part of a
// published metadata image), so readers need no lock. Rate has no lock: its Manager's.
package quota
