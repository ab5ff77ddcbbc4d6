package group

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, KIP-447): TxnOffsetCommit and the transaction
// markers that decide them, as Kafka's OffsetMetadataManager keeps them.
//
// A TxnOffsetCommit is checked against the group (KIP-447: from v3 it may name the member,
// its generation and its instance id, which are then checked as an OffsetCommit's are, but
// the group's state is not), and its OffsetCommit records are written to the partition in
// one transactional batch of the request's producer id and epoch. From that moment they are
// pending for that producer: OffsetFetch does not see them (with require_stable it answers
// UNSTABLE_OFFSET_COMMIT for their partitions), offsets expiry leaves the partition alone and
// an empty group that has them is not deleted. The transaction coordinator ends the
// transaction by writing a marker to the partition, and the broker reports it with
// CompleteTxn: a COMMIT makes the producer's pending offsets committed, for every group of
// the partition, unless a plain commit of the same partition came later in the log (the
// later record wins, as Kafka compares record offsets); an ABORT drops them. Loading replays
// the same way: a transactional batch's offsets are pending until the marker after them, and
// one whose marker is not in the log stays pending.
//
// A tombstone of a partition (OffsetDelete, DeleteGroups) drops the pending offsets written
// before it; DeleteGroups writes one for each partition that only has pending offsets, so that
// replaying does the same.
//
// The pending offsets are taken at the moment their write is made (the log holds them from
// then on, before a marker can follow), not when it is replicated: a marker written while
// the batch waits for the ISR finds them. A write that fails takes its offsets back out.

// CommitTxnOffsets handles TxnOffsetCommit v0-v5 for the partitions the caller found to
// exist (the api layer answers UNKNOWN_TOPIC_OR_PARTITION for the others). For v5
// (transaction version 2) the caller has first had the transaction coordinator add the
// group's partition to the transaction, the AddOffsetsToTxn such a client does not send;
// the write is the same. The reply, once
// the batch is appended and replicated, is a *kmsg.TxnOffsetCommitResponse mirroring the
// request's topics and partitions.
func (s *Shard) CommitTxnOffsets(now int64, w Waiter, req *kmsg.TxnOffsetCommitRequest) Ready {
	s.begin(now)
	s.commitTxnOffsets(w, req)
	return s.end()
}

// CompleteTxn applies a marker of producerID written to the partition: commit makes the
// producer's pending offsets committed, abort drops them. A producer with nothing pending
// here is ignored (the transaction had no offsets in this partition).
func (s *Shard) CompleteTxn(now int64, producerID int64, commit bool) Ready {
	s.begin(now)
	s.completeTxn(producerID, commit)
	return s.end()
}

// ReplayTransactional applies one record of a transactional batch of producerID read back
// while loading: an offset commit becomes pending for the producer, anything else is
// replayed as Replay does.
func (s *Shard) ReplayTransactional(producerID int64, key, value []byte) error {
	return s.replay(key, value, producerID)
}

// ReplayMarker applies a COMMIT or ABORT marker of producerID read back while loading.
func (s *Shard) ReplayMarker(producerID int64, commit bool) {
	s.order++ // the marker is a record of the log too
	s.completeTxn(producerID, commit)
}

func txnCommitResponse(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// setTxnCommitErrors sets err on every partition whose code is still 0 (all when only is
// nil, else those in only).
func setTxnCommitErrors(resp *kmsg.TxnOffsetCommitResponse, err *kerr.Error, only map[TopicPartition]bool) {
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

func (s *Shard) commitTxnOffsets(w Waiter, req *kmsg.TxnOffsetCommitRequest) {
	resp := txnCommitResponse(req)
	if req.Group == "" {
		setTxnCommitErrors(resp, kerr.InvalidGroupID, nil)
		s.reply(w, resp)
		return
	}
	g := s.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			setTxnCommitErrors(resp, kerr.IllegalGeneration, nil)
			s.reply(w, resp)
			return
		}
		// A simple group: offsets only, no group management.
		g = newGroup(req.Group, s.now)
		g.protocolType = ""
		s.groups[g.ID] = g
	} else if err := g.validateTxnCommit(req); err != nil {
		setTxnCommitErrors(resp, err, nil)
		s.reply(w, resp)
		return
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
	p := &Producer{ID: req.ProducerID, Epoch: req.ProducerEpoch}
	first := s.writeTxn(recs, p, func(err error) {
		if err != nil {
			// Not in the log (or not for sure): the commits never count, as Kafka's
			// coordinator reverts its state to before a failed write.
			only := map[TopicPartition]bool{}
			for tp, o := range offsets {
				s.removePendingTxn(p.ID, g.ID, tp, o)
				only[tp] = true
			}
			setTxnCommitErrors(resp, txnWriteError(err), only)
		}
		s.reply(w, resp)
	})
	for tp, o := range offsets {
		o.order += first
		s.addPendingTxn(p.ID, g.ID, tp, o)
	}
}

// validateTxnCommit applies Kafka's rules for who may commit offsets in a transaction: a
// classic group's as for OffsetCommit, without its state checks; a consumer group takes a
// commit naming no member (TxnOffsetCommit before v3), else the member must exist and
// commit in its current epoch (ILLEGAL_GENERATION, as Kafka answers a transactional commit
// with a stale epoch).
func (g *Group) validateTxnCommit(req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	if g.cons == nil {
		return g.validateOffsetCommit(req.MemberID, req.InstanceID, req.Generation, true)
	}
	switch {
	case g.state == Dead:
		return kerr.CoordinatorNotAvailable
	case req.Generation < 0 && len(g.cons.members) == 0:
		return nil
	case req.Generation == -1 && req.MemberID == "" && req.InstanceID == nil:
		return nil
	}
	m := g.cons.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID
	case req.Generation != m.MemberEpoch:
		return kerr.IllegalGeneration
	}
	return nil
}

// txnWriteError maps an append failure of a transactional offset commit as Kafka's
// coordinator runtime does (CoordinatorOperationExceptionHelper): as offsetWriteError, but a
// batch too large is UNKNOWN_SERVER_ERROR; the producer's own errors (INVALID_PRODUCER_EPOCH,
// INVALID_TXN_STATE, ...) pass through.
func txnWriteError(err error) *kerr.Error {
	if ke := offsetWriteError(err); ke != kerr.InvalidCommitOffsetSize {
		return ke
	}
	return kerr.UnknownServerError
}

// addPendingTxn makes o the pending commit of producerID for the group's partition.
func (s *Shard) addPendingTxn(producerID int64, group string, tp TopicPartition, o *Offset) {
	byGroup := s.txns[producerID]
	if byGroup == nil {
		byGroup = map[string]map[TopicPartition]*Offset{}
		s.txns[producerID] = byGroup
	}
	tps := byGroup[group]
	if tps == nil {
		tps = map[TopicPartition]*Offset{}
		byGroup[group] = tps
	}
	tps[tp] = o
	open := s.openTxns[group]
	if open == nil {
		open = map[int64]struct{}{}
		s.openTxns[group] = open
	}
	open[producerID] = struct{}{}
}

// removePendingTxn takes o back out if it is still the producer's pending commit of the
// partition (its write failed). The producer stays open in the group: its marker ends it.
func (s *Shard) removePendingTxn(producerID int64, group string, tp TopicPartition, o *Offset) {
	if tps := s.txns[producerID][group]; tps[tp] == o {
		delete(tps, tp)
	}
}

// hasPendingTxn reports whether some transaction has a pending commit of the group's
// partition (Kafka's hasPendingTransactionalOffsets).
func (s *Shard) hasPendingTxn(group string, tp TopicPartition) bool {
	for pid := range s.openTxns[group] {
		if _, ok := s.txns[pid][group][tp]; ok {
			return true
		}
	}
	return false
}

// hasOpenTxns reports whether a transaction that committed offsets of the group has not
// ended yet: the group is not deleted by offsets expiry meanwhile.
func (s *Shard) hasOpenTxns(group string) bool { return len(s.openTxns[group]) > 0 }

// dropPendingTxn drops every pending commit of the group's partition (a tombstone of it
// follows them). Their transactions stay open until their markers, as in Kafka.
func (s *Shard) dropPendingTxn(group string, tp TopicPartition) {
	for pid := range s.openTxns[group] {
		delete(s.txns[pid][group], tp)
	}
}

// pendingTxnPartitions lists the partitions of the group with a pending commit, sorted.
func (s *Shard) pendingTxnPartitions(group string) []TopicPartition {
	seen := map[TopicPartition]bool{}
	var out []TopicPartition
	for pid := range s.openTxns[group] {
		for tp := range s.txns[pid][group] {
			if !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
		}
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// dropGroupTxns forgets the group's part of every open transaction (the group is deleted).
func (s *Shard) dropGroupTxns(group string) {
	for pid := range s.openTxns[group] {
		delete(s.txns[pid], group)
		if len(s.txns[pid]) == 0 {
			delete(s.txns, pid)
		}
	}
	delete(s.openTxns, group)
}

// completeTxn ends producerID's transaction on this partition (Kafka's
// replayEndTransactionMarker).
func (s *Shard) completeTxn(producerID int64, commit bool) {
	byGroup := s.txns[producerID]
	if byGroup == nil {
		return
	}
	delete(s.txns, producerID)
	for group := range byGroup {
		if open := s.openTxns[group]; open != nil {
			delete(open, producerID)
			if len(open) == 0 {
				delete(s.openTxns, group)
			}
		}
	}
	if !commit {
		return
	}
	for group, tps := range byGroup {
		if len(tps) == 0 {
			continue
		}
		g := s.groups[group]
		if g == nil {
			// Its group record was deleted after the commits without tombstones for them
			// (not something this coordinator writes): the offsets make a simple group, as
			// a replayed offset does.
			g = newGroup(group, s.now)
			g.protocolType = ""
			s.groups[group] = g
		}
		for tp, o := range tps {
			if cur := g.offsets[tp]; cur == nil || cur.order < o.order {
				g.offsets[tp] = o
			}
		}
	}
}
