package fetchsession

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Shards is the number of cache shards, as in Kafka (KAFKA-9401): each holds slots/Shards
// sessions and its own range of session ids, new sessions go to the shards in turn, and only
// sessions of the same shard compete for its slots.
const Shards = 8

// EvictionMs is Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a session unused for longer
// may be evicted by any new one, and a session younger than this is never evicted for being
// small or unprivileged. Kafka has no setting for it.
const EvictionMs = 120_000

// idRange is the number of session ids of one shard: shard k gives out ids in
// [max(1, k*idRange), (k+1)*idRange).
const idRange = (1<<31 - 1) / Shards

// Cache holds a broker's fetch sessions (Kafka's FetchSessionCache of FetchSessionCacheShards).
// Safe for concurrent use.
type Cache struct {
	shards [Shards]shard
	next   atomic.Uint32 // the shard of the next new session
}

// NewCache returns a cache of slots sessions in all (max.incremental.fetch.session.cache.slots)
// that evicts after evictionMs (EvictionMs outside tests).
func NewCache(slots int, evictionMs int64) *Cache {
	c := &Cache{}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.num, sh.maxEntries, sh.evictionMs = i, slots/Shards, evictionMs
		sh.mu.sessions = map[int32]*Session{}
	}
	return c
}

// shard is one shard of the cache.
type shard struct {
	num        int
	maxEntries int
	evictionMs int64
	mu         struct {
		sync.Mutex
		sessions   map[int32]*Session
		partitions int // over all sessions, as last touched
	}
}

// shardOf is the shard that gives out id, nil for an id no shard gives out.
func (c *Cache) shardOf(id int32) *shard {
	if id <= 0 || id/idRange >= Shards {
		return nil
	}
	return &c.shards[id/idRange]
}

// Remove closes session id, as a full fetch naming it does; false when there was none.
func (c *Cache) Remove(id int32) bool {
	sh := c.shardOf(id)
	if sh == nil {
		return false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.mu.sessions[id]
	if s == nil {
		return false
	}
	sh.removeLocked(s)
	return true
}

// Len is the number of sessions and of their partitions (as last used) in the cache.
func (c *Cache) Len() (sessions, partitions int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sessions += len(sh.mu.sessions)
		partitions += sh.mu.partitions
		sh.mu.Unlock()
	}
	return sessions, partitions
}

// Create opens a session for a full fetch (epoch 0) of the given partitions if the next
// shard has room or can make it by eviction (Kafka's maybeCreateSession); it returns
// InvalidSessionID otherwise. parts gives the partitions in the answer's order with what
// was answered for each.
func (c *Cache) Create(nowMs int64, privileged, usesTopicIDs bool, parts []Created) int32 {
	sh := &c.shards[(c.next.Add(1)-1)%Shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.mu.sessions) >= sh.maxEntries && !sh.tryEvictLocked(privileged, len(parts), nowMs) {
		return InvalidSessionID
	}
	s := &Session{ID: sh.newIDLocked(), Privileged: privileged, UsesTopicIDs: usesTopicIDs, CreationMs: nowMs}
	l := newList(len(parts))
	for i := range parts {
		p := &parts[i]
		if _, dup := l.index[p.Key]; dup {
			continue // a request naming a partition twice: Kafka's map keeps one
		}
		l.pushBack(Partition{Key: p.Key, Name: p.Name, Params: p.Params, HighWatermark: p.HighWatermark, LocalLogStartOffset: p.LogStartOffset})
	}
	s.mu.parts = l
	s.mu.epoch = NextEpoch(InitialEpoch)
	sh.mu.sessions[s.ID] = s
	s.inCache = true
	sh.touchLocked(s, nowMs)
	return s.ID
}

// Created is a partition of a new session: as added, with the answer's high watermark and
// log start offset.
type Created struct {
	Added
	HighWatermark  int64
	LogStartOffset int64
}

// Incremental starts an incremental fetch of session id at epoch (Kafka's
// FetchManager.newContext for a fetch that is not full): ErrSessionNotFound,
// ErrInvalidEpoch when epoch is not the session's next, ErrTopicIDMismatch when the request
// names topics by id and the session does not or the reverse. Otherwise the fetch's
// partitions are added or updated, the forgotten ones removed and the epoch moves on; if no
// partition is left the session is closed and ok is false: the fetch is then answered
// sessionless with the partitions it named.
func (c *Cache) Incremental(nowMs int64, id, epoch int32, usesTopicIDs bool, fetch []Added, forget []Key) (v View, ok bool, err error) {
	sh := c.shardOf(id)
	if sh == nil {
		return View{}, false, ErrSessionNotFound
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s := sh.mu.sessions[id]
	if s == nil {
		return View{}, false, ErrSessionNotFound
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.epoch != epoch:
		return View{}, false, ErrInvalidEpoch
	case s.UsesTopicIDs != usesTopicIDs:
		return View{}, false, ErrTopicIDMismatch
	}
	s.updateLocked(fetch, forget)
	if s.mu.parts.n == 0 {
		sh.removeLockedHeld(s)
		return View{}, false, nil
	}
	sh.touchLockedHeld(s, nowMs)
	s.mu.epoch = NextEpoch(s.mu.epoch)
	return View{s: s, epoch: s.mu.epoch}, true, nil
}

// newIDLocked draws an unused random id of the shard's range.
func (sh *shard) newIDLocked() int32 {
	lo, hi := max(1, int32(sh.num)*idRange), int32(sh.num+1)*idRange
	for {
		id := lo + rand.Int32N(hi-lo)
		if _, used := sh.mu.sessions[id]; !used {
			return id
		}
	}
}

// tryEvictLocked makes room for a new session of size partitions (Kafka's tryEvict): the
// least recently used session goes if unused for longer than evictionMs; otherwise the least
// valuable evictable session goes if the new one is worth more. Value orders by
// (privileged, size, id): a privileged (follower) session outranks any consumer's, then more
// partitions outrank fewer. A session is evictable by any new session only once it is older
// than evictionMs, and by a privileged one also when it is unprivileged, as of its last use.
//
// The cache is scanned instead of kept in ordered trees: eviction runs only when a shard is
// full and a new session is asked for, while every incremental fetch touches its session.
func (sh *shard) tryEvictLocked(privileged bool, size int, nowMs int64) bool {
	var lru, least *Session
	for _, s := range sh.mu.sessions {
		if lru == nil || s.lastUsedMs < lru.lastUsedMs || (s.lastUsedMs == lru.lastUsedMs && s.ID < lru.ID) {
			lru = s
		}
		if (privileged && s.evictableByPriv) || (!privileged && s.evictableByAll) {
			if least == nil || lessValuable(s, least) {
				least = s
			}
		}
	}
	switch {
	case lru == nil:
		return false
	case nowMs-lru.lastUsedMs > sh.evictionMs:
		sh.removeLocked(lru)
		return true
	case least == nil:
		return false
	case !outranks(privileged, size, least):
		return false
	}
	sh.removeLocked(least)
	return true
}

// lessValuable orders sessions by (privileged, size as last used, id).
func lessValuable(a, b *Session) bool {
	if a.Privileged != b.Privileged {
		return !a.Privileged
	}
	if a.cachedSize != b.cachedSize {
		return a.cachedSize < b.cachedSize
	}
	return a.ID < b.ID
}

// outranks reports whether a new session (id 0, so a tie goes to the existing one) is worth
// more than s.
func outranks(privileged bool, size int, s *Session) bool {
	if privileged != s.Privileged {
		return privileged
	}
	return size > s.cachedSize
}

// removeLocked drops s from the shard.
func (sh *shard) removeLocked(s *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh.removeLockedHeld(s)
}

// removeLockedHeld is removeLocked with s's lock held too.
func (sh *shard) removeLockedHeld(s *Session) {
	if !s.inCache {
		return
	}
	delete(sh.mu.sessions, s.ID)
	sh.mu.partitions -= s.cachedSize
	s.inCache = false
}

// touchLocked records a use of s at nowMs (Kafka's touch).
func (sh *shard) touchLocked(s *Session, nowMs int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh.touchLockedHeld(s, nowMs)
}

// touchLockedHeld is touchLocked with s's lock held too.
func (sh *shard) touchLockedHeld(s *Session, nowMs int64) {
	s.lastUsedMs = nowMs
	sh.mu.partitions += s.mu.parts.n - s.cachedSize
	s.cachedSize = s.mu.parts.n
	old := nowMs-s.CreationMs > sh.evictionMs
	s.evictableByPriv = !s.Privileged || old
	s.evictableByAll = old
}
