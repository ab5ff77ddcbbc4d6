package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/fetchsession"
)

// fetchSessions is the broker's fetch session cache, made on first use from
// max.incremental.fetch.session.cache.slots (read-only, as in Kafka).
func (h *Handler) fetchSessions() *fetchsession.Cache {
	h.sessionsOnce.Do(func() {
		h.sessions = fetchsession.NewCache(int(h.Cfg.Current().MaxIncrementalFetchSessionCacheSlots), fetchsession.EvictionMs)
	})
	return h.sessions
}

// FetchSessions is the number of fetch sessions the broker holds and of their partitions
// (Kafka's NumIncrementalFetchSessions and NumIncrementalFetchPartitionsCached).
func (h *Handler) FetchSessions() (sessions, partitions int) { return h.fetchSessions().Len() }

// Fetch sessions (KIP-227), as Kafka's FetchManager.newContext chooses a FetchContext:
//
//	session id, epoch    context        answer
//	any, -1              sessionless    the partitions named; a session named is closed
//	any, 0               full           the partitions named; a session named is closed and a
//	                                    new one opened if the cache has room (its id answered,
//	                                    else 0)
//	N, E > 0             incremental    the session's partitions that have something new,
//	                                    after the named ones are added or updated and the
//	                                    forgotten ones removed; E must be the session's next
//	                                    epoch (INVALID_FETCH_SESSION_EPOCH), N must exist
//	                                    (FETCH_SESSION_ID_NOT_FOUND), and a session by topic
//	                                    id (v13+) is fetched only at v13+ and the reverse
//	                                    (FETCH_SESSION_TOPIC_ID_ERROR)
//
// An incremental fetch reads every partition of its session, in the session's order, so
// min_bytes, max_bytes and the long poll count them all, and then keeps in its answer only
// those with records, a new high watermark or log start offset, a preferred read replica,
// a diverging epoch or an error. Fetches before v7 carry no session fields and are
// sessionless. A session error answers the error, session id 0 and no partitions.

// sessionKind is the kind of a fetch's context.
type sessionKind uint8

const (
	sessionless sessionKind = iota
	sessionFull
	sessionIncremental
)

// openSession decides the fetch's context and sets f.want, the partitions to read: the
// request's, or for an incremental fetch its session's.
func (f *fetch) openSession() error {
	req := f.req
	f.kind, f.want = sessionless, req.Topics
	if req.Version < 7 {
		return nil
	}
	cache := f.h.fetchSessions()
	if req.SessionEpoch == fetchsession.InitialEpoch || req.SessionEpoch == fetchsession.FinalEpoch {
		if req.SessionID != fetchsession.InvalidSessionID {
			cache.Remove(req.SessionID)
		}
		if req.SessionEpoch == fetchsession.InitialEpoch {
			f.kind = sessionFull
		}
		return nil
	}
	byID := req.Version >= 13
	f.added = f.added[:0]
	for _, rt := range req.Topics {
		k, name := fetchsession.Key{}, rt.Topic
		if byID {
			k.TopicID, name = rt.TopicID, ""
			if t := f.im.TopicByID(rt.TopicID); t != nil {
				name = t.Name
			}
		} else {
			k.Topic = rt.Topic
		}
		for _, rp := range rt.Partitions {
			k.Partition = rp.Partition
			f.added = append(f.added, fetchsession.Added{Key: k, Name: name, Params: f.params(&rp)})
		}
	}
	f.forget = f.forget[:0]
	for _, ft := range req.ForgottenTopics {
		k := fetchsession.Key{Topic: ft.Topic}
		if byID {
			k = fetchsession.Key{TopicID: ft.TopicID}
		}
		for _, p := range ft.Partitions {
			k.Partition = p
			f.forget = append(f.forget, k)
		}
	}
	v, ok, err := cache.Incremental(f.h.nowMs(), req.SessionID, req.SessionEpoch, byID, f.added, f.forget)
	if err != nil || !ok {
		return err // !ok: the session emptied and closed; answered sessionless
	}
	f.kind, f.view = sessionIncremental, v
	f.sessionWant(byID)
	return nil
}

// params are the request parameters of rp as a session keeps them (fields absent at the
// request's version hold kmsg's defaults, Kafka's too).
func (f *fetch) params(rp *kmsg.FetchRequestTopicPartition) fetchsession.Params {
	return fetchsession.Params{
		FetchOffset:        rp.FetchOffset,
		LogStartOffset:     rp.LogStartOffset,
		MaxBytes:           rp.PartitionMaxBytes,
		CurrentLeaderEpoch: rp.CurrentLeaderEpoch,
		LastFetchedEpoch:   rp.LastFetchedEpoch,
	}
}

// sessionWant fills f.want with the session's partitions in its order, consecutive
// partitions of one topic in one topic entry (as Kafka groups its answer), and f.slots with
// their slots. A session by topic id names each topic by the name its id first resolved to
// ("" while unknown), which resolve checks against the id.
func (f *fetch) sessionWant(byID bool) {
	f.slots = f.slots[:0]
	topics := f.wantBuf[:0]
	var last fetchsession.Key
	f.view.Each(func(slot int32, p *fetchsession.Partition) {
		if byID && p.Name == "" {
			if t := f.im.TopicByID(p.TopicID); t != nil {
				p.Name = t.Name
			}
		}
		if len(topics) == 0 || p.TopicID != last.TopicID || p.Topic != last.Topic {
			n := len(topics)
			if n < cap(topics) {
				topics = topics[:n+1]
				topics[n].Partitions = topics[n].Partitions[:0]
			} else {
				topics = append(topics, kmsg.FetchRequestTopic{})
			}
			topics[n].Topic, topics[n].TopicID = p.Name, p.TopicID
			last = p.Key
		}
		rt := &topics[len(topics)-1]
		rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{
			Partition:          p.Partition,
			CurrentLeaderEpoch: p.Params.CurrentLeaderEpoch,
			FetchOffset:        p.Params.FetchOffset,
			LastFetchedEpoch:   p.Params.LastFetchedEpoch,
			LogStartOffset:     p.Params.LogStartOffset,
			PartitionMaxBytes:  p.Params.MaxBytes,
		})
		f.slots = append(f.slots, slot)
	})
	f.wantBuf, f.want = topics, topics
}

// sessionAnswer settles the session part of the answer once the partitions are read: the
// session id and error to answer, and whether some partitions are left out (fp.omit).
func (f *fetch) sessionAnswer() (id int32, errCode int16, pruned bool) {
	switch f.kind {
	case sessionFull:
		byID := f.req.Version >= 13
		f.created = f.created[:0]
		for ti, rt := range f.want {
			k := fetchsession.Key{Topic: rt.Topic}
			name := rt.Topic
			if byID {
				k, name = fetchsession.Key{TopicID: rt.TopicID}, ""
				if t := f.im.TopicByID(rt.TopicID); t != nil {
					name = t.Name
				}
			}
			for pi := range rt.Partitions {
				rp := &rt.Partitions[pi]
				fp := &f.topics[ti].parts[pi]
				k.Partition = rp.Partition
				hw := fp.hw
				if fp.errCode != 0 {
					// As Kafka caches an error answer's high watermark (-1): the partition is
					// answered again in the first incremental fetch after the error clears.
					hw = -1
				}
				f.created = append(f.created, fetchsession.Created{
					Added:         fetchsession.Added{Key: k, Name: name, Params: f.params(rp)},
					HighWatermark: hw, LogStartOffset: fp.logStart,
				})
			}
		}
		return f.h.fetchSessions().Create(f.h.nowMs(), f.replicaID >= 0, byID, f.created), 0, false
	case sessionIncremental:
		f.answers = f.answers[:0]
		for ti := range f.topics {
			for pi := range f.topics[ti].parts {
				fp := &f.topics[ti].parts[pi]
				f.answers = append(f.answers, fetchsession.Answer{
					HighWatermark:  fp.hw,
					LogStartOffset: fp.logStart,
					HasRecords:     fp.file.N > 0 || len(fp.records) > 0,
					ErrorCode:      fp.errCode,
					Preferred:      fp.preferred >= 0,
					Diverging:      fp.diverging,
				})
			}
		}
		s := f.view.Session()
		if err := f.view.Respond(f.slots, f.answers); err != nil {
			return s.ID, code(err), false
		}
		i := 0
		for ti := range f.topics {
			for pi := range f.topics[ti].parts {
				f.topics[ti].parts[pi].omit = !f.answers[i].Respond
				i++
			}
		}
		return s.ID, 0, true
	}
	return fetchsession.InvalidSessionID, 0, false
}
