// Package fetchsession keeps a broker's incremental fetch sessions (KIP-227), as Kafka's
// FetchSession.scala does. A client that opens a session (session id 0, epoch 0) is given an
// id; its next fetches (that id, epochs 1, 2, ...) name only the partitions whose fetch
// position or other parameters changed, and are answered with only the partitions that have
// something new. The broker remembers, per session partition, the request parameters last
// sent and the high watermark and log start offset last answered.
//
// The package is a deterministic core: it takes the time as milliseconds and is driven by
// internal/api (fetchsession.go there), which reads the partitions and writes the answers.
// Sessions live in memory only and are bound to nothing but their id, as in Kafka: any
// connection that knows a session's id and next epoch may use it.
package fetchsession

import (
	"errors"
	"sync"
)

// The session id and epoch values of FetchMetadata.
const (
	InvalidSessionID = 0  // no session
	InitialEpoch     = 0  // a full fetch asking for a new session
	FinalEpoch       = -1 // a full fetch with no session (or closing the one named)
)

// NextEpoch is the epoch that follows e: FinalEpoch stays final, and MaxInt32 wraps to 1.
func NextEpoch(e int32) int32 {
	switch {
	case e < 0:
		return FinalEpoch
	case e == 1<<31-1:
		return 1
	}
	return e + 1
}

// Sentinel errors; internal/api translates them to FETCH_SESSION_ID_NOT_FOUND,
// INVALID_FETCH_SESSION_EPOCH and FETCH_SESSION_TOPIC_ID_ERROR.
var (
	ErrSessionNotFound = errors.New("fetchsession: no such fetch session")
	ErrInvalidEpoch    = errors.New("fetchsession: unexpected fetch session epoch")
	ErrTopicIDMismatch = errors.New("fetchsession: request version and session disagree on topic ids")
)

// Key identifies a partition in a session: by topic id in a session of Fetch v13+, by topic
// name before (Kafka's CachedPartition equality). The unused half is zero.
type Key struct {
	TopicID   [16]byte
	Topic     string
	Partition int32
}

// Params are the fetch parameters a client sent for a partition; an incremental fetch reuses
// them for every session partition it does not name.
type Params struct {
	FetchOffset        int64
	LogStartOffset     int64 // the fetcher's (a follower's) log start offset
	MaxBytes           int32
	CurrentLeaderEpoch int32
	LastFetchedEpoch   int32
}

// Answer is what a partition's part of a fetch answer held, as far as the session cares.
type Answer struct {
	HighWatermark  int64
	LogStartOffset int64
	HasRecords     bool
	ErrorCode      int16
	Preferred      bool // a preferred read replica was named (KIP-392)
	Diverging      bool // a diverging epoch was named (KIP-320)
	// Respond is set by View.Respond: the answer includes the partition.
	Respond bool
}

// Partition is one cached partition of a session.
type Partition struct {
	Key
	// Name is the topic's name: for a session by topic id, the name the id resolved to when
	// the partition was added (or first resolved later), "" while unknown; it then stays, as
	// Kafka's CachedPartition keeps its resolved name.
	Name   string
	Params Params
	// HighWatermark and LocalLogStartOffset were last answered (-1: never, or the last
	// answer was an error, so the partition is answered again once the error goes).
	HighWatermark       int64
	LocalLogStartOffset int64
	next, prev          int32 // the session's order: slot indices, -1 at the ends
}

// mustRespond reports whether an incremental answer must include the partition (Kafka's
// CachedPartition.maybeUpdateResponseData): records, a high watermark or log start offset
// other than last answered, a preferred read replica, an error or a diverging epoch. It
// records the answer.
func (p *Partition) mustRespond(a *Answer) bool {
	must := a.HasRecords || a.Preferred || a.Diverging
	if p.HighWatermark != a.HighWatermark {
		must = true
		p.HighWatermark = a.HighWatermark
	}
	if p.LocalLogStartOffset != a.LogStartOffset {
		must = true
		p.LocalLogStartOffset = a.LogStartOffset
	}
	if a.ErrorCode != 0 {
		must = true
		p.HighWatermark = -1
	}
	return must
}

// Session is one fetch session.
//
// Lock rule (Kafka's): a session's own mutex guards its epoch and partitions; the fields
// below it marked "shard" are guarded by the mutex of the cache shard holding the session.
// The shard's mutex is taken before a session's and never while a session's is held.
type Session struct {
	ID           int32
	Privileged   bool // opened by a follower (replica id >= 0)
	UsesTopicIDs bool // opened by Fetch v13+
	CreationMs   int64

	// shard: the last time the session was created or used, the size it had then, and
	// whether it may then be evicted by any new session or by a privileged one only.
	lastUsedMs      int64
	cachedSize      int
	inCache         bool
	evictableByAll  bool
	evictableByPriv bool

	mu struct {
		sync.Mutex
		epoch int32
		parts list
	}
}

// updateLocked adds or updates the fetch's partitions and removes the forgotten ones (Kafka's
// FetchSession.update).
func (s *Session) updateLocked(fetch []Added, forget []Key) {
	for i := range fetch {
		a := &fetch[i]
		if slot, ok := s.mu.parts.index[a.Key]; ok {
			s.mu.parts.slots[slot].Params = a.Params
			continue
		}
		s.mu.parts.pushBack(Partition{Key: a.Key, Name: a.Name, Params: a.Params, HighWatermark: -1, LocalLogStartOffset: -1})
	}
	for _, k := range forget {
		s.mu.parts.remove(k)
	}
}

// Added is a partition named by a fetch: its key, resolved topic name and parameters.
type Added struct {
	Key
	Name   string
	Params Params
}

// View is an incremental fetch's hold on its session, from Cache.Incremental to Respond.
type View struct {
	s     *Session
	epoch int32 // the epoch the session moved to for this fetch
}

// Session is the session viewed.
func (v View) Session() *Session { return v.s }

// Each calls fn for every partition of the session in the session's order with the slot it
// holds; fn may set p.Name (a topic id resolved for the first time). It runs under the
// session's lock, so fn must not call back into the session or cache.
func (v View) Each(fn func(slot int32, p *Partition)) {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	l := &v.s.mu.parts
	for i := l.head; i >= 0; i = l.slots[i].next {
		fn(i, &l.slots[i])
	}
}

// Current reports whether the session's epoch is still the one this fetch moved it to: no
// other fetch of the session came in since. A throttled answer, which records nothing,
// checks it as Respond does.
func (v View) Current() bool {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	return v.s.mu.epoch == v.epoch
}

// Respond decides which of the read partitions the answer includes (Kafka's
// IncrementalFetchContext.updateAndGenerateResponseData): answers[i] is what was read for
// slots[i] (from Each), and Respond sets its Respond field when the answer must include it.
// A partition that had records moves to the end of the session's order, so the partitions
// after it get their turn under max_bytes next time. If another fetch of the session came in
// since this one started (its epoch moved on, as with a duplicate request), nothing is
// recorded and ErrInvalidEpoch is returned: the answer then carries that error and no
// partitions.
func (v View) Respond(slots []int32, answers []Answer) error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.s.mu.epoch != v.epoch {
		return ErrInvalidEpoch
	}
	l := &v.s.mu.parts
	for i, slot := range slots {
		a := &answers[i]
		a.Respond = l.slots[slot].mustRespond(a)
		if a.Respond && a.HasRecords {
			l.moveToBack(slot)
		}
	}
	return nil
}
