package group

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and offsets.retention.minutes.
//
// A commit is validated against the group's generation and members (Kafka's rules: a
// commit with generation -1 and no member id is a "simple" commit, accepted only while the
// group has no members; otherwise the member must exist and the generation match), then its
// records are written and only when the append succeeds are the offsets applied and the
// commit acknowledged. A refused commit changes nothing.

// CommitOffsets handles OffsetCommit v0-v9 for the partitions the caller found to exist
// (the api layer answers UNKNOWN_TOPIC_OR_PARTITION for the others). The reply is a
// *kmsg.OffsetCommitResponse mirroring the request's topics and partitions.
func (s *Shard) CommitOffsets(now int64, w Waiter, req *kmsg.OffsetCommitRequest) Ready {
	s.begin(now)
	s.commitOffsets(w, req)
	return s.end()
}

func commitResponse(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := kmsg.NewPtrOffsetCommitResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// setCommitErrors sets err on every partition whose code is still 0 (all when only is nil,
// else those in only).
func setCommitErrors(resp *kmsg.OffsetCommitResponse, err *kerr.Error, only map[TopicPartition]bool) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode == 0 && (only == nil || only[TopicPartition{t.Topic, p.Partition}]) {
				p.ErrorCode = err.Code
			}
		}
	}
}

func (s *Shard) commitOffsets(w Waiter, req *kmsg.OffsetCommitRequest) {
	resp := commitResponse(req)
	g := s.groups[req.Group]
	if g == nil {
		switch {
		case req.Generation >= 0 && req.Version >= 9:
			setCommitErrors(resp, kerr.GroupIDNotFound, nil)
		case req.Generation >= 0:
			setCommitErrors(resp, kerr.IllegalGeneration, nil)
		}
		if req.Generation >= 0 {
			s.reply(w, resp)
			return
		}
		// A simple group: offsets only, no group management.
		g = newGroup(req.Group, s.now)
		g.protocolType = ""
		s.groups[g.ID] = g
	} else if err := g.validateCommit(req); err != nil {
		setCommitErrors(resp, err, nil)
		s.reply(w, resp)
		return
	}
	if m := g.members[req.MemberID]; m != nil && (g.state == Stable || g.state == PreparingRebalance) {
		s.scheduleHeartbeat(g, m, int64(m.SessionTimeoutMs)) // a commit shows the member is alive
	}
	var recs []Record
	offsets := map[TopicPartition]*Offset{}
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			md := ""
			if rp.Metadata != nil {
				md = *rp.Metadata
			}
			if len(md) > s.cfg.MaxMetadataBytes {
				resp.Topics[i].Partitions[j].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			o := &Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md, CommitTimestamp: s.now, ExpireTimestamp: -1}
			if rp.Timestamp != -1 {
				o.CommitTimestamp = rp.Timestamp // v1's explicit commit timestamp
			}
			if req.RetentionTimeMillis != -1 {
				o.ExpireTimestamp = s.now + req.RetentionTimeMillis // v2-v4's retention time
			}
			if o.LeaderEpoch < 0 {
				o.LeaderEpoch = -1
			}
			tp := TopicPartition{rt.Topic, rp.Partition}
			o.order = uint64(len(recs)) // the record's index, made absolute below
			offsets[tp] = o
			recs = append(recs, Record{Key: offsetKey(g.ID, tp), Value: offsetValue(o)})
		}
	}
	if len(recs) == 0 {
		s.reply(w, resp)
		return
	}
	for tp := range offsets {
		g.pendingCommits[tp]++
	}
	first := s.write(recs, func(err error) {
		for tp := range offsets {
			if g.pendingCommits[tp]--; g.pendingCommits[tp] <= 0 {
				delete(g.pendingCommits, tp)
			}
		}
		switch {
		case err != nil:
			only := map[TopicPartition]bool{}
			for tp := range offsets {
				only[tp] = true
			}
			setCommitErrors(resp, offsetWriteError(err), only)
		case s.groups[g.ID] == g && g.state != Dead:
			for tp, o := range offsets {
				// A transactional commit whose record came later may have been committed
				// (CompleteTxn) while this one waited for the ISR: the later record wins.
				if cur := g.offsets[tp]; cur == nil || cur.order < o.order {
					g.offsets[tp] = o
				}
			}
		}
		s.reply(w, resp)
	})
	for _, o := range offsets {
		o.order += first
	}
}

// validateOffsetCommit applies Kafka's rules for who may commit (ClassicGroup's
// validateOffsetCommit). A transactional commit (TxnOffsetCommit) is checked only on what it
// names: before v3 it names no member and no generation, and it is taken whatever the
// group's state.
func (g *Group) validateOffsetCommit(memberID string, instanceID *string, generation int32, txn bool) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if generation < 0 && g.state == Empty {
		return nil // a simple commit (admin tools, consumers without group management)
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if err := g.validateMember(memberID, instanceID); err != nil {
			return err
		}
		if generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if !txn && g.state != Empty {
		return kerr.UnknownMemberID // only members commit to a group that has members
	}
	if !txn && g.state == CompletingRebalance {
		// A valid member that has not yet got its assignment: let it retry after syncing.
		return kerr.RebalanceInProgress
	}
	return nil
}

// FetchOffsets answers OffsetFetch for one group: the requested partitions (every committed
// one when req.Topics is nil), with offset -1 for those never committed. Transactional
// commits count only once their transaction commits. With requireStable, partitions with a
// commit still being written or a transactional commit awaiting its transaction's end answer
// UNSTABLE_OFFSET_COMMIT.
func (s *Shard) FetchOffsets(req *kmsg.OffsetFetchRequestGroup, requireStable bool) kmsg.OffsetFetchResponseGroup {
	resp := kmsg.NewOffsetFetchResponseGroup()
	resp.Group = req.Group
	g := s.groups[req.Group]
	if g != nil && g.state == Dead {
		g = nil
	}
	if g != nil {
		if err := g.validateFetch(req); err != nil {
			resp.ErrorCode = err.Code
			return resp
		}
	}
	part := func(tp TopicPartition) kmsg.OffsetFetchResponseGroupTopicPartition {
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		p.Partition = tp.Partition
		p.Offset = -1
		p.Metadata = strPtr("")
		if g == nil {
			return p
		}
		if requireStable && (g.pendingCommits[tp] > 0 || s.hasPendingTxn(g.ID, tp)) {
			p.ErrorCode = kerr.UnstableOffsetCommit.Code
			return p
		}
		if o := g.offsets[tp]; o != nil {
			p.Offset, p.LeaderEpoch, p.Metadata = o.Offset, o.LeaderEpoch, strPtr(o.Metadata)
		}
		return p
	}
	if req.Topics != nil {
		for _, rt := range req.Topics {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = rt.Topic
			for _, p := range rt.Partitions {
				t.Partitions = append(t.Partitions, part(TopicPartition{rt.Topic, p}))
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	if g == nil {
		return resp
	}
	for _, tp := range g.sortedOffsets() {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = tp.Topic
			resp.Topics = append(resp.Topics, t)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, part(tp))
	}
	return resp
}

// DeleteOffsets handles OffsetDelete v0 for the partitions the caller found to exist: an
// empty group's offsets are deleted; a group with consumers keeps the offsets of topics
// they subscribe to (GROUP_SUBSCRIBED_TO_TOPIC); a non-consumer group with members refuses
// (NON_EMPTY_GROUP). The reply is a *kmsg.OffsetDeleteResponse.
func (s *Shard) DeleteOffsets(now int64, w Waiter, req *kmsg.OffsetDeleteRequest) Ready {
	s.begin(now)
	s.deleteOffsets(w, req)
	return s.end()
}

func (s *Shard) deleteOffsets(w Waiter, req *kmsg.OffsetDeleteRequest) {
	resp := kmsg.NewPtrOffsetDeleteResponse()
	g := s.groups[req.Group]
	switch {
	case req.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case g == nil || g.state == Dead:
		resp.ErrorCode = kerr.GroupIDNotFound.Code
	case g.state != Empty && g.protocolType != consumerProtocolType:
		resp.ErrorCode = kerr.NonEmptyGroup.Code
	}
	if resp.ErrorCode != 0 {
		s.reply(w, resp)
		return
	}
	var recs []Record
	var remove []TopicPartition
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetDeleteResponseTopic()
		t.Topic = rt.Topic
		subscribed := g.state != Empty && g.isSubscribedTo(rt.Topic)
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetDeleteResponseTopicPartition()
			p.Partition = rp.Partition
			tp := TopicPartition{rt.Topic, rp.Partition}
			switch {
			case subscribed:
				p.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case g.offsets[tp] != nil || s.hasPendingTxn(g.ID, tp):
				// A pending transactional commit goes too (Kafka writes the tombstone for
				// either): the tombstone follows its record in the log, as replaying it
				// drops it, so it is dropped now.
				s.dropPendingTxn(g.ID, tp)
				remove = append(remove, tp)
				recs = append(recs, Record{Key: offsetKey(g.ID, tp)})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(recs) == 0 {
		s.reply(w, resp)
		return
	}
	var first uint64
	first = s.write(recs, func(err error) {
		if err != nil {
			resp.ErrorCode = offsetWriteError(err).Code
		} else if s.groups[g.ID] == g {
			for i, tp := range remove {
				// Not an offset a later record committed meanwhile (a transaction's).
				if o := g.offsets[tp]; o != nil && o.order < first+uint64(i) {
					delete(g.offsets, tp)
				}
			}
		}
		s.reply(w, resp)
	})
}

// expireOffsets applies offsets.retention.minutes (Kafka's removeExpiredOffsets): the
// offsets of a group with no members expire once the retention has passed since it became
// empty; a Stable consumer group's offsets of topics it no longer subscribes to expire by
// commit time; a simple group's by commit time; commits with an explicit expire timestamp
// (OffsetCommit v1-v4) at that time. An empty group left with no offsets is deleted.
func (s *Shard) expireOffsets() {
	var recs []Record
	var dead []*Group
	for _, g := range s.sortedGroups() {
		var base func(*Offset) int64
		skipSubscribed := false
		switch {
		case g.state == Empty && g.protocolType != "":
			base = func(o *Offset) int64 {
				if g.stateTime >= 0 {
					return g.stateTime
				}
				return o.CommitTimestamp
			}
		case g.state == Stable && g.protocolType == consumerProtocolType && g.subscribedKnown:
			base = func(o *Offset) int64 { return o.CommitTimestamp }
			skipSubscribed = true
		case g.protocolType == "":
			base = func(o *Offset) int64 { return o.CommitTimestamp }
		}
		if base != nil {
			for _, tp := range g.sortedOffsets() {
				o := g.offsets[tp]
				// Not while a commit is being written, nor while a transaction's commit of
				// the partition awaits its marker (Kafka's cleanupExpiredOffsets).
				if g.pendingCommits[tp] > 0 || s.hasPendingTxn(g.ID, tp) || skipSubscribed && g.isSubscribedTo(tp.Topic) {
					continue
				}
				expired := s.now-base(o) >= s.cfg.OffsetsRetentionMs
				if o.ExpireTimestamp >= 0 {
					expired = s.now >= o.ExpireTimestamp
				}
				if expired {
					delete(g.offsets, tp)
					recs = append(recs, Record{Key: offsetKey(g.ID, tp)})
				}
			}
		}
		if g.state == Empty && !g.hasOffsets() && !s.hasOpenTxns(g.ID) {
			dead = append(dead, g)
		}
	}
	for _, g := range dead {
		g.transition(Dead, s.now)
		delete(s.groups, g.ID)
		recs = append(recs, g.tombstones()...)
	}
	if len(recs) > 0 {
		n := len(recs)
		// The state already dropped them; a failed write only means they come back after a
		// restart until the next expiry check.
		s.write(recs, func(err error) {
			if err != nil {
				s.warn(fmt.Errorf("writing %d expired offset and group tombstones: %w", n, err))
			}
		})
	}
}

// sortedOffsets returns the partitions with committed offsets, by topic then partition.
func (g *Group) sortedOffsets() []TopicPartition {
	tps := make([]TopicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return tps
}
