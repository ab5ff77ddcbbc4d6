package api_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A group coordinator write that fails rolls the in-memory group back to what is stored, as
// Kafka's coordinator runtime reverts its state to the last written offset: a member whose
// join could not be written to __consumer_offsets (NOT_ENOUGH_REPLICAS: min.insync.replicas
// above the replicas) is not in the group afterwards, and the group epoch is the stored one.
func TestGroupWriteFailureRollsBack(t *testing.T) {
	b := testutil.StartBroker(t, kip848Broker...)
	createTopic(t, b.Addr(), "rb", 2, nil)
	cl := newClient(t, b.Addr())
	c := dialGroupConn(t, b.Addr())
	hb := func(member string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = "rollback", member, 0
		req.RebalanceTimeoutMillis = 5000
		req.SubscribedTopicNames = []string{"rb"}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return c.do(req, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	if r := hb("a"); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("a joins: %v at epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	minISR := func(v string) {
		t.Helper()
		if code := incrementalAlter(t, cl, "__consumer_offsets", [2]string{"min.insync.replicas", v}); code != 0 {
			t.Fatalf("min.insync.replicas=%s on __consumer_offsets: %v", v, kerr.ErrorForCode(code))
		}
	}
	minISR("2") // one replica: every acks=all append is refused NOT_ENOUGH_REPLICAS
	if r := hb("b"); r.ErrorCode == 0 {
		t.Fatalf("b joined although its join could not be written (epoch %d)", r.MemberEpoch)
	}
	minISR("1")

	// What is stored: a alone, at group epoch 1.
	var g kmsg.ConsumerGroupDescribeResponseGroup
	for deadline := time.Now().Add(10 * time.Second); ; {
		if g = describe848(t, b.Addr(), "rollback"); g.ErrorCode == 0 || time.Now().After(deadline) {
			break
		}
	}
	var members []string
	for _, m := range g.Members {
		members = append(members, m.MemberID)
	}
	if g.ErrorCode != 0 || strings.Join(members, ",") != "a" || g.Epoch != 1 {
		t.Fatalf("group after the failed write: %v, members %v, epoch %d; want a alone at epoch 1", kerr.ErrorForCode(g.ErrorCode), members, g.Epoch)
	}
	// The group carries on from there.
	var r *kmsg.ConsumerGroupHeartbeatResponse
	for deadline := time.Now().Add(10 * time.Second); ; {
		if r = hb("b"); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code || time.Now().After(deadline) {
			break
		}
	}
	if r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("b joins after the failure: %v at epoch %d, want epoch 2", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	members = members[:0]
	for _, m := range describe848(t, b.Addr(), "rollback").Members {
		members = append(members, m.MemberID)
	}
	slices.Sort(members)
	if strings.Join(members, ",") != "a,b" {
		t.Fatalf("members %v, want a,b", members)
	}
}
