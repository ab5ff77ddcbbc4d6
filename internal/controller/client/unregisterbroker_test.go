package client

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// UnregisterBroker removes an active broker's registration (Kafka allows it; the broker need
// not be fenced) after giving up its leadership and ISR membership, in one committed change.
// The broker's next heartbeat is refused with BROKER_ID_NOT_REGISTERED; unregistering it
// again, or an id never registered, is BROKER_ID_NOT_REGISTERED.
func TestUnregisterBroker(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.waitActive()
	cl := c.client()
	for id := range int32(3) {
		registerUnfenced(t, cl, id)
	}
	rt := createTopic(t, cl, "decom", 1, 3)
	if rt.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(rt.ErrorCode))
	}
	var part *state.PartitionRecord
	_, next := readUntil(t, cl.MetadataLog(), 1, func(recs []state.Record) bool {
		for _, r := range recs {
			if p, ok := r.(*state.PartitionRecord); ok && p.TopicID == state.UUID(rt.TopicID) {
				part = p
			}
		}
		return part != nil
	})
	leader := part.Leader

	unregister := func(id int32) *kmsg.UnregisterBrokerResponse {
		t.Helper()
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		r, err := cl.Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*kmsg.UnregisterBrokerResponse)
	}
	if resp := unregister(leader); resp.ErrorCode != 0 {
		t.Fatalf("unregister active broker %d: %v %s", leader, kerr.ErrorForCode(resp.ErrorCode), derefString(resp.ErrorMessage))
	}
	var change *state.PartitionChangeRecord
	readUntil(t, cl.MetadataLog(), next, func(recs []state.Record) bool {
		for i, r := range recs {
			switch r := r.(type) {
			case *state.PartitionChangeRecord:
				change = r
			case *state.UnregisterBrokerRecord:
				if r.NodeID != leader {
					t.Fatalf("unregistered broker %d, want %d", r.NodeID, leader)
				}
				if change == nil {
					t.Fatalf("the registration went before the leadership: %v", recs[:i+1])
				}
				return true
			}
		}
		return false
	})
	if change.Fields&state.ChangeLeader == 0 || change.Leader == leader || change.Leader < 0 ||
		change.Fields&state.ChangeISR == 0 || slices.Contains(change.ISR, leader) || !slices.Contains(change.ISR, change.Leader) {
		t.Fatalf("partition change %+v: want a new leader from the ISR, without broker %d", change, leader)
	}

	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID, hb.BrokerEpoch = leader, 0
	r, err := cl.Request(testCtx(t), hb)
	if err != nil {
		t.Fatal(err)
	}
	if code := r.(*kmsg.BrokerHeartbeatResponse).ErrorCode; code != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("heartbeat of the unregistered broker: %v, want BROKER_ID_NOT_REGISTERED", kerr.ErrorForCode(code))
	}
	for _, id := range []int32{leader, 42} {
		resp := unregister(id)
		if resp.ErrorCode != kerr.BrokerIDNotRegistered.Code || resp.ErrorMessage == nil {
			t.Errorf("unregister broker %d: %v (message %q), want BROKER_ID_NOT_REGISTERED with a message",
				id, kerr.ErrorForCode(resp.ErrorCode), derefString(resp.ErrorMessage))
		}
	}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
