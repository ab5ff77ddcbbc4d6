package group

// Reconciliation: moving one member toward its target assignment (Kafka's
// CurrentAssignmentBuilder). The member reports the partitions it owns with each heartbeat;
// the coordinator answers with what it may own now:
//
//	Stable at an old epoch ──▶ partitions to give up? ── yes ─▶ UnrevokedPartitions (same epoch,
//	                                   │                         assigned = kept only)
//	                                   no                               │ member stops reporting them
//	                                   ▼                                ▼
//	          target epoch; new partitions that nobody owns are added; the others wait:
//	          UnreleasedPartitions until their owners give them up, else Stable.
//
// A partition is only added to a member's assignment when no other member owns it (its
// previous owner has revoked it), so no partition is ever owned twice.

// ownsAny reports whether the member still reports owning any partition of pending; a
// heartbeat without its owned partitions (nil) is taken as still owning them.
func ownsAny(owned Assignment, pending Assignment) bool {
	if owned == nil {
		return true
	}
	for id, ps := range owned {
		if len(intersect(ps, pending[id])) > 0 {
			return true
		}
	}
	return false
}

// reconcile returns m moved as far toward target (of targetEpoch) as it can go now, or m
// itself if nothing changes. owned is what the member reported (nil: not reported);
// subscribed is the topics it subscribes to now; enforce removes unsubscribed topics at
// once even when the member is otherwise reconciled (its subscription just changed).
func (cg *consumerGroup) reconcile(m *ConsumerMember, targetEpoch int32, target Assignment, owned Assignment, subscribed map[TopicID]bool, enforce bool) *ConsumerMember {
	r := reconciler{cg: cg, m: m, targetEpoch: targetEpoch, target: target, owned: owned, subscribed: subscribed}
	switch m.State {
	case MemberStable:
		if m.MemberEpoch != targetEpoch {
			return r.next(m.MemberEpoch)
		}
		if enforce {
			return r.dropUnsubscribed()
		}
		return m
	case MemberUnrevokedPartitions:
		if ownsAny(owned, m.PendingRevocation) {
			if enforce {
				return r.dropUnsubscribed()
			}
			return m
		}
		return r.next(m.MemberEpoch)
	case MemberUnreleasedPartitions:
		return r.next(m.MemberEpoch)
	default:
		// A state this coordinator does not know (a newer one's record): start over from
		// the target, if the member owns nothing.
		if owned != nil && owned.count() == 0 {
			return r.next(targetEpoch)
		}
		return m
	}
}

type reconciler struct {
	cg          *consumerGroup
	m           *ConsumerMember
	targetEpoch int32
	target      Assignment
	owned       Assignment
	subscribed  map[TopicID]bool
}

// with returns a copy of m with a new assignment state; the previous epoch is the epoch
// before (as Kafka's updateMemberEpoch sets it).
func (r *reconciler) with(state MemberState, epoch int32, assigned, pending Assignment) *ConsumerMember {
	n := r.m.clone()
	n.State = state
	n.PreviousMemberEpoch = r.m.MemberEpoch
	n.MemberEpoch = epoch
	n.Assigned, n.PendingRevocation = assigned, pending
	return n
}

// dropUnsubscribed moves the partitions of topics the member no longer subscribes to into
// pending revocation, at the same epoch.
func (r *reconciler) dropUnsubscribed() *ConsumerMember {
	m := r.m
	var assigned, pending Assignment
	for id, ps := range m.Assigned {
		if r.subscribed[id] {
			continue
		}
		if assigned == nil {
			assigned, pending = Assignment{}, Assignment{}
			for k, v := range m.Assigned {
				assigned[k] = v
			}
			for k, v := range m.PendingRevocation {
				pending[k] = v
			}
		}
		delete(assigned, id)
		pending[id] = union(pending[id], ps)
	}
	if assigned == nil {
		return m
	}
	if len(pending) > 0 && ownsAny(r.owned, pending) {
		return r.with(MemberUnrevokedPartitions, m.MemberEpoch, assigned, pending)
	}
	return r.with(m.State, m.MemberEpoch, assigned, m.PendingRevocation)
}

// next computes the member's next step toward the target (Kafka's computeNextAssignment).
func (r *reconciler) next(epoch int32) *ConsumerMember {
	m := r.m
	assigned, revoke, add := Assignment{}, Assignment{}, Assignment{}
	unreleased := false
	ids := map[TopicID]bool{}
	for id := range r.target {
		ids[id] = true
	}
	for id := range m.Assigned {
		ids[id] = true
	}
	for id := range ids {
		tgt := r.target[id]
		if !r.subscribed[id] {
			tgt = nil
		}
		cur := m.Assigned[id]
		keep := intersect(cur, tgt)
		if len(keep) > 0 {
			assigned[id] = keep
		}
		if rv := subtract(cur, keep); len(rv) > 0 {
			revoke[id] = rv
		}
		var pendingAdd []int32
		for _, p := range subtract(tgt, keep) {
			// A partition another member still owns is not ours yet. One we own ourselves
			// (pending revocation under an older target) is free to take back.
			if r.cg.partitionEpoch(id, p) != -1 && !m.PendingRevocation.has(id, p) {
				unreleased = true
				continue
			}
			pendingAdd = append(pendingAdd, p)
		}
		if len(pendingAdd) > 0 {
			add[id] = pendingAdd
		}
	}
	switch {
	case len(revoke) > 0 && ownsAny(r.owned, revoke):
		return r.with(MemberUnrevokedPartitions, epoch, assigned, revoke)
	case len(add) > 0:
		for id, ps := range add {
			assigned[id] = union(assigned[id], ps)
		}
		state := MemberStable
		if unreleased {
			state = MemberUnreleasedPartitions
		}
		return r.with(state, r.targetEpoch, assigned, Assignment{})
	case unreleased:
		return r.with(MemberUnreleasedPartitions, r.targetEpoch, assigned, Assignment{})
	default:
		return r.with(MemberStable, r.targetEpoch, assigned, Assignment{})
	}
}
