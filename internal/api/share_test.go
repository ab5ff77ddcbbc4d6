package api_test

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Share groups (KIP-932) over TCP with raw requests: franz-go has no share consumer, so
// these tests speak ShareGroupHeartbeat, ShareFetch and ShareAcknowledge themselves, as
// Kafka's share consumer does.

// shareBroker shortens the record lock to one second and lowers the delivery limit to 3.
var shareBroker = append(slices.Clone(groupBroker),
	"group.share.record.lock.duration.ms=1000", "group.share.min.record.lock.duration.ms=1000",
	"group.share.delivery.count.limit=3",
)

// shareConsumer is one share group member speaking the protocol by hand.
type shareConsumer struct {
	t       *testing.T
	b       *kgo.Broker
	group   string
	id      string
	topicID [16]byte
	session int32 // epoch of the next ShareFetch / ShareAcknowledge
}

// shareRec is one acquired offset with its delivery count.
type shareRec struct {
	off        int64
	deliveries int16
}

// joinShare joins group as member id subscribed to topic and checks it is assigned the
// topic's partition 0.
func joinShare(t *testing.T, addr, group, topic, id string) *shareConsumer {
	t.Helper()
	cl := newClient(t, addr)
	s := &shareConsumer{t: t, b: cl.SeedBrokers()[0], group: group, id: id}
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.SubscribedTopicNames = 1, group, id, []string{topic}
	resp := shareRequest[*kmsg.ShareGroupHeartbeatResponse](t, s.b, req)
	if resp.ErrorCode != 0 || resp.MemberEpoch <= 0 || resp.Assignment == nil || len(resp.Assignment.TopicPartitions) != 1 ||
		!slices.Equal(resp.Assignment.TopicPartitions[0].Partitions, []int32{0}) {
		t.Fatalf("join %s: %+v", id, resp)
	}
	s.topicID = resp.Assignment.TopicPartitions[0].TopicID
	return s
}

func shareRequest[R kmsg.Response](t *testing.T, b *kgo.Broker, req kmsg.Request) R {
	t.Helper()
	resp, err := b.Request(ctxT(t), req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

// ack is one acknowledgement batch of one type.
func ack(first, last int64, typ int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	return kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{FirstOffset: first, LastOffset: last, AcknowledgeTypes: []int8{typ}}
}

const (
	ackAccept  = 1
	ackRelease = 2
	ackReject  = 3
)

// fetch sends one ShareFetch of partition 0 carrying acks, and returns the offsets acquired
// and the acknowledgement's error code. Every acquired offset must lie inside the batches
// returned.
func (s *shareConsumer) fetch(acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, maxRecords, waitMs int32) ([]shareRec, int16) {
	t := s.t
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version, req.GroupID, req.MemberID = 1, &s.group, &s.id
	req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = s.session, waitMs, 1, 1<<20, maxRecords
	req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: s.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
	resp := shareRequest[*kmsg.ShareFetchResponse](t, s.b, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("share fetch of %s: %v", s.id, kerr.ErrorForCode(resp.ErrorCode))
	}
	s.session++
	var out []shareRec
	ackCode := int16(0)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("share fetch of %s, partition %d: %v", s.id, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			}
			ackCode = rp.AcknowledgeErrorCode
			lo, hi := batchSpan(t, rp.Records)
			for _, a := range rp.AcquiredRecords {
				if a.FirstOffset < lo || a.LastOffset >= hi {
					t.Fatalf("acquired %d-%d outside the batches returned [%d, %d)", a.FirstOffset, a.LastOffset, lo, hi)
				}
				for off := a.FirstOffset; off <= a.LastOffset; off++ {
					out = append(out, shareRec{off, a.DeliveryCount})
				}
			}
		}
	}
	return out, ackCode
}

// acknowledge sends a ShareAcknowledge of partition 0 and returns its partition error code.
func (s *shareConsumer) acknowledge(batches ...kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) int16 {
	t := s.t
	t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch = 1, &s.group, &s.id, s.session
	p := kmsg.ShareAcknowledgeRequestTopicPartition{Partition: 0}
	for _, b := range batches {
		p.AcknowledgementBatches = append(p.AcknowledgementBatches, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{
			FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, AcknowledgeTypes: b.AcknowledgeTypes,
		})
	}
	req.Topics = []kmsg.ShareAcknowledgeRequestTopic{{TopicID: s.topicID, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{p}}}
	resp := shareRequest[*kmsg.ShareAcknowledgeResponse](t, s.b, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("share acknowledge of %s: %v", s.id, kerr.ErrorForCode(resp.ErrorCode))
	}
	s.session++
	return resp.Topics[0].Partitions[0].ErrorCode
}

// batchSpan is the offsets [first, end) the record batches in b cover.
func batchSpan(t *testing.T, b []byte) (int64, int64) {
	t.Helper()
	lo, hi := int64(-1), int64(-1)
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		if lo < 0 {
			lo = rb.FirstOffset
		}
		hi = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
		b = b[12+int(rb.Length):]
	}
	return lo, hi
}

// shareTopic creates a one-partition topic, joins n members and has each open its share
// session (the share-partition starts at the high watermark, share.auto.offset.reset=latest),
// then produces records values "0".."records-1".
func shareTopic(t *testing.T, addr, topic, group string, n, records int) []*shareConsumer {
	t.Helper()
	createTopic(t, addr, topic, 1, nil)
	var cs []*shareConsumer
	for i := range n {
		c := joinShare(t, addr, group, topic, fmt.Sprintf("%s-member-%d", group, i))
		if got, _ := c.fetch(nil, 10, 0); len(got) != 0 {
			t.Fatalf("records acquired before any were produced: %v", got)
		}
		cs = append(cs, c)
	}
	p := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, kgo.StringRecord(fmt.Sprint(i)))
	}
	produceSync(t, p, rs...)
	return cs
}

// Five members on one partition each receive distinct records and together every record
// exactly once when all accept; a consumer group reading the same topic meanwhile sees every
// record too, unaffected.
func TestShareFiveConsumersEveryRecordOnce(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	const records = 300
	cs := shareTopic(t, b.Addr(), "queue", "workers", 5, records)

	owner := map[int64]string{}
	pending := make([][]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, len(cs))
	deadline := time.Now().Add(30 * time.Second)
	for len(owner) < records {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records delivered", len(owner), records)
		}
		for i, c := range cs {
			got, code := c.fetch(pending[i], 7, 0)
			if code != 0 {
				t.Fatalf("accept by %s: %v", c.id, kerr.ErrorForCode(code))
			}
			pending[i] = nil
			for _, r := range got {
				if prev, ok := owner[r.off]; ok {
					t.Fatalf("offset %d delivered to %s and to %s", r.off, prev, c.id)
				}
				if r.deliveries != 1 {
					t.Fatalf("offset %d delivered %d times", r.off, r.deliveries)
				}
				owner[r.off] = c.id
				pending[i] = append(pending[i], ack(r.off, r.off, ackAccept))
			}
		}
	}
	for i, c := range cs {
		if len(pending[i]) > 0 {
			if code := c.acknowledge(pending[i]...); code != 0 {
				t.Fatalf("final accept by %s: %v", c.id, kerr.ErrorForCode(code))
			}
		}
	}
	per := map[string]int{}
	for off := range int64(records) {
		if _, ok := owner[off]; !ok {
			t.Fatalf("offset %d never delivered", off)
		}
		per[owner[off]]++
	}
	if len(per) != 5 {
		t.Fatalf("records went to %d members, want all 5: %v", len(per), per)
	}
	// Everything accepted: nothing is delivered again, even after the locks' duration.
	if got, _ := cs[0].fetch(nil, 500, 1500); len(got) != 0 {
		t.Fatalf("accepted records delivered again: %v", got)
	}

	offs := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	offs.Version, offs.Groups = 1, []kmsg.DescribeShareGroupOffsetsRequestGroup{{GroupID: "workers"}}
	or := shareRequest[*kmsg.DescribeShareGroupOffsetsResponse](t, cs[0].b, offs)
	if g := or.Groups[0]; g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "queue" ||
		len(g.Topics[0].Partitions) != 1 || g.Topics[0].Partitions[0].StartOffset != records || g.Topics[0].Partitions[0].Lag != 0 {
		t.Fatalf("share group offsets: %+v", or.Groups)
	}

	d := describeShare(t, b.Addr(), "workers")
	if d.ErrorCode != 0 || d.GroupState != "Stable" || len(d.Members) != 5 || d.Assignor != "simple" {
		t.Fatalf("describe: %+v", d)
	}

	// A consumer group on the same topic reads every record from the start.
	got := consumeN(t, b.Addr(), "queue", records, kgo.ConsumerGroup("classic-readers"))
	if len(got) != records {
		t.Fatalf("consumer group read %d records, want %d", len(got), records)
	}
}

func describeShare(t *testing.T, addr, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.Version, req.GroupIDs = 1, []string{group}
	return shareRequest[*kmsg.ShareGroupDescribeResponse](t, newClient(t, addr).SeedBrokers()[0], req).Groups[0]
}

// A member that stops acknowledging: once its locks expire (one second here) its records go
// to another member with the delivery count raised, and its late acknowledgement is refused.
func TestShareLockExpiryRedelivers(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	cs := shareTopic(t, b.Addr(), "slow", "g-expiry", 2, 10)
	dead, live := cs[0], cs[1]
	got, _ := dead.fetch(nil, 100, 0)
	if len(got) != 10 {
		t.Fatalf("first member acquired %v, want all 10", got)
	}
	if again, _ := live.fetch(nil, 100, 0); len(again) != 0 {
		t.Fatalf("held records delivered to a second member: %v", again)
	}
	var redelivered []shareRec
	deadline := time.Now().Add(20 * time.Second)
	for len(redelivered) < 10 && time.Now().Before(deadline) {
		more, _ := live.fetch(nil, 100, 500)
		redelivered = append(redelivered, more...)
	}
	if len(redelivered) != 10 {
		t.Fatalf("redelivered %v, want the 10 expired records", redelivered)
	}
	for i, r := range redelivered {
		if r.off != int64(i) || r.deliveries != 2 {
			t.Fatalf("redelivered %v, want offsets 0-9 with delivery count 2", redelivered)
		}
	}
	if code := dead.acknowledge(ack(0, 9, ackAccept)); code != kerr.InvalidRecordState.Code {
		t.Fatalf("late accept: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	if code := live.acknowledge(ack(0, 9, ackAccept)); code != 0 {
		t.Fatalf("accept by the new holder: %v", kerr.ErrorForCode(code))
	}
}

// RELEASE redelivers at once, REJECT archives, and a record released until it reaches
// group.share.delivery.count.limit (3 here) is archived and never delivered again.
func TestShareReleaseRejectDeliveryLimit(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	cs := shareTopic(t, b.Addr(), "poison", "g-poison", 3, 3)
	a, bm, c := cs[0], cs[1], cs[2]
	if got, _ := a.fetch(nil, 100, 0); len(got) != 3 {
		t.Fatalf("acquired %v, want offsets 0-2", got)
	}
	if code := a.acknowledge(ack(0, 0, ackRelease), ack(1, 1, ackReject), ack(2, 2, ackAccept)); code != 0 {
		t.Fatalf("acknowledge: %v", kerr.ErrorForCode(code))
	}
	// Only the released record comes back, at once, second delivery.
	got, _ := bm.fetch(nil, 100, 0)
	if !slices.Equal(got, []shareRec{{0, 2}}) {
		t.Fatalf("after release: %v, want offset 0 delivered a second time", got)
	}
	if got, _ := c.fetch(nil, 100, 0); len(got) != 0 {
		t.Fatalf("held record delivered twice: %v", got)
	}
	var code int16
	// Released again by piggy-backing on a fetch: the acknowledgement is applied first, so
	// the same fetch acquires it again, third and last delivery.
	got, code = bm.fetch([]kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ack(0, 0, ackRelease)}, 100, 0)
	if code != 0 || !slices.Equal(got, []shareRec{{0, 3}}) {
		t.Fatalf("after a release on fetch: %v (%v), want offset 0 a third time", got, kerr.ErrorForCode(code))
	}
	if code := bm.acknowledge(ack(0, 0, ackRelease)); code != 0 {
		t.Fatalf("third release: %v", kerr.ErrorForCode(code))
	}
	// Past the limit: archived. Nothing comes back until a new record is produced, and then
	// only that one.
	if got, _ := c.fetch(nil, 100, 300); len(got) != 0 {
		t.Fatalf("record past the delivery limit delivered again: %v", got)
	}
	p := newClient(t, b.Addr(), kgo.DefaultProduceTopic("poison"))
	produceSync(t, p, kgo.StringRecord("after"))
	var after []shareRec
	deadline := time.Now().Add(10 * time.Second)
	for len(after) == 0 && time.Now().Before(deadline) {
		after, _ = a.fetch(nil, 100, 500)
	}
	if !slices.Equal(after, []shareRec{{3, 1}}) {
		t.Fatalf("after the archived records: %v, want only offset 3", after)
	}
}

// heartbeat sends one ShareGroupHeartbeat of member id at epoch and returns the answer.
func shareHeartbeat(t *testing.T, addr, group, id string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = 1, group, id, epoch, topics
	return shareRequest[*kmsg.ShareGroupHeartbeatResponse](t, newClient(t, addr).SeedBrokers()[0], req)
}

// Membership: a stale epoch is fenced, an unknown member refused; a member whose session
// times out is removed and the records it held go to the others at once (the lock duration
// here is Kafka's 30 s); ListGroups shows the group as type "share"; DeleteGroups refuses it
// while it has members and deletes it once the last one left.
func TestShareGroupMembership(t *testing.T) {
	b := testutil.StartBroker(t, append(slices.Clone(groupBroker),
		"group.share.session.timeout.ms=2000", "group.share.min.session.timeout.ms=2000",
		"group.share.heartbeat.interval.ms=100", "group.share.min.heartbeat.interval.ms=100")...)
	cs := shareTopic(t, b.Addr(), "members", "g-members", 2, 5)
	stay, gone := cs[0], cs[1]
	if got, _ := gone.fetch(nil, 100, 0); len(got) != 5 {
		t.Fatalf("acquired %v, want offsets 0-4", got)
	}
	hb := shareHeartbeat(t, b.Addr(), "g-members", stay.id, 0, []string{"members"})
	epoch := hb.MemberEpoch
	if hb.HeartbeatIntervalMillis != 100 {
		t.Fatalf("heartbeat interval %d, want 100", hb.HeartbeatIntervalMillis)
	}
	if r := shareHeartbeat(t, b.Addr(), "g-members", stay.id, epoch+5, nil); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(t, b.Addr(), "g-members", "nobody", 3, nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Only stay heartbeats; gone's session ends and its records are released.
	deadline := time.Now().Add(20 * time.Second)
	var got []shareRec
	for len(got) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the expired member's records never came back")
		}
		r := shareHeartbeat(t, b.Addr(), "g-members", stay.id, epoch, nil)
		if r.ErrorCode != 0 {
			t.Fatalf("heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		epoch = r.MemberEpoch
		got, _ = stay.fetch(nil, 100, 100)
	}
	if len(got) != 5 || got[0] != (shareRec{0, 2}) {
		t.Fatalf("after the session expiry: %v, want offsets 0-4 a second time", got)
	}
	if d := describeShare(t, b.Addr(), "g-members"); len(d.Members) != 1 || d.Members[0].MemberID != stay.id {
		t.Fatalf("describe after expiry: %+v", d)
	}

	// A classic group's id is not a share group's.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "members", Partition: 0, At: 1})
	if _, err := kadm.NewClient(newClient(t, b.Addr())).CommitOffsets(ctxT(t), "classic-g", offs); err != nil {
		t.Fatal(err)
	}
	if r := shareHeartbeat(t, b.Addr(), "classic-g", "x", 0, []string{"members"}); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share heartbeat on a classic group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if d := describeShare(t, b.Addr(), "classic-g"); d.ErrorCode != kerr.GroupIDNotFound.Code || d.ErrorMessage == nil ||
		!strings.Contains(*d.ErrorMessage, "is not a share group") {
		t.Fatalf("share describe of a classic group: %+v", d)
	}

	list := kmsg.NewPtrListGroupsRequest()
	list.TypesFilter = []string{"share"}
	lr := shareRequest[*kmsg.ListGroupsResponse](t, newClient(t, b.Addr()).SeedBrokers()[0], list)
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "g-members" || lr.Groups[0].GroupType != "share" || lr.Groups[0].GroupState != "Stable" {
		t.Fatalf("list share groups: %+v", lr.Groups)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g-members"}
	if r := shareRequest[*kmsg.DeleteGroupsResponse](t, newClient(t, b.Addr()).SeedBrokers()[0], del); r.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a group with members: %+v", r.Groups)
	}
	if r := shareHeartbeat(t, b.Addr(), "g-members", stay.id, -1, nil); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if r := shareRequest[*kmsg.DeleteGroupsResponse](t, newClient(t, b.Addr()).SeedBrokers()[0], del); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete of the empty group: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
	}
	if d := describeShare(t, b.Addr(), "g-members"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of the deleted group: %v", kerr.ErrorForCode(d.ErrorCode))
	}
}

// Share sessions: acknowledgements on a new session (epoch 0) are INVALID_REQUEST, a wrong
// epoch INVALID_SHARE_SESSION_EPOCH, an unknown session SHARE_SESSION_NOT_FOUND, and a
// session closed with epoch -1 releases what its member held, at once.
func TestShareSessionEpochs(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	cs := shareTopic(t, b.Addr(), "sessions", "g-sessions", 2, 3)
	a, other := cs[0], cs[1]
	raw := func(s *shareConsumer, epoch int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch, req.MaxRecords, req.MaxBytes = 1, &s.group, &s.id, epoch, 100, 1<<20
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: s.topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
		return shareRequest[*kmsg.ShareFetchResponse](t, s.b, req)
	}
	if r := raw(a, 0, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ack(0, 0, ackAccept)}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acknowledgements on epoch 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := raw(a, a.session+3, nil); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	stranger := &shareConsumer{t: t, b: a.b, group: a.group, id: "stranger", topicID: a.topicID}
	if r := raw(stranger, 4, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("unknown session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got, _ := a.fetch(nil, 100, 0); len(got) != 3 {
		t.Fatalf("acquired %v, want offsets 0-2", got)
	}
	// Close the session accepting offset 0: offsets 1 and 2 go to the other member at once.
	if r := raw(a, -1, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{ack(0, 0, ackAccept)}); r.ErrorCode != 0 ||
		r.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 || len(r.Topics[0].Partitions[0].AcquiredRecords) != 0 {
		t.Fatalf("closing fetch: %+v", r)
	}
	if got, _ := other.fetch(nil, 100, 0); !slices.Equal(got, []shareRec{{1, 2}, {2, 2}}) {
		t.Fatalf("after the session closed: %v, want offsets 1-2 a second time", got)
	}
	if r := raw(a, 1, nil); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("closed session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A topic id the cluster does not have: UNKNOWN_TOPIC_ID, answered without waiting.
	lost := &shareConsumer{t: t, b: a.b, group: a.group, id: "lost", topicID: [16]byte{1, 2, 3}}
	r := raw(lost, 0, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", r)
	}
}

// DescribeGroups of a share group answers as Kafka does for a group that is not a classic
// group: Dead with no error before v6, GROUP_ID_NOT_FOUND from v6; an unknown group the same.
func TestShareDescribeGroupsIsNotClassic(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	shareTopic(t, b.Addr(), "dg", "g-dg", 1, 1)
	c := dialGroupConn(t, b.Addr())
	for _, id := range []string{"g-dg", "g-none"} {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{id}
		d := c.do(dg, 5).(*kmsg.DescribeGroupsResponse).Groups[0]
		if d.ErrorCode != 0 || d.State != "Dead" || len(d.Members) != 0 {
			t.Fatalf("%s v5: %+v", id, d)
		}
		d = c.do(dg, 6).(*kmsg.DescribeGroupsResponse).Groups[0]
		if d.ErrorCode != kerr.GroupIDNotFound.Code || d.State != "Dead" || d.ErrorMessage == nil {
			t.Fatalf("%s v6: %+v", id, d)
		}
		if want := "is not a classic group."; (id == "g-dg") != strings.HasSuffix(*d.ErrorMessage, want) {
			t.Fatalf("%s v6 message %q", id, *d.ErrorMessage)
		}
	}
}

// FindCoordinator v6 with the SHARE key type finds the leader of the __share_group_state
// partition a share-partition's key "group:topic-id:partition" hashes to; earlier versions
// and malformed keys are INVALID_REQUEST.
func TestShareFindCoordinatorShareKey(t *testing.T) {
	b := testutil.StartBroker(t, shareBroker...)
	cs := shareTopic(t, b.Addr(), "fc", "g-fc", 1, 1)
	key := "g-fc:" + base64.RawURLEncoding.EncodeToString(cs[0].topicID[:]) + ":0"
	c := dialGroupConn(t, b.Addr())
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 2, []string{key, "g-fc:not-an-id:0", "g-fc:0"}
	resp := c.do(fc, 6).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 3 {
		t.Fatalf("coordinators %+v", resp.Coordinators)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("__share_group_state")
	md.Topics = append(md.Topics, mt)
	mresp := c.do(md, 12).(*kmsg.MetadataResponse)
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of __share_group_state: %+v", mresp.Topics)
	}
	n := int32(len(mresp.Topics[0].Partitions))
	want := int32(-1)
	for _, p := range mresp.Topics[0].Partitions {
		if p.Partition == share.StatePartitionFor(key, n) {
			want = p.Leader
		}
	}
	if got := resp.Coordinators[0]; got.ErrorCode != 0 || got.NodeID != want || got.NodeID < 0 || got.Port <= 0 {
		t.Fatalf("share coordinator of %s: %+v, want node %d", key, got, want)
	}
	for _, bad := range resp.Coordinators[1:] {
		if bad.ErrorCode != kerr.InvalidRequest.Code || bad.NodeID != -1 {
			t.Fatalf("malformed key %s: %+v", bad.Key, bad)
		}
	}
	fc.CoordinatorKeys = []string{key}
	if got := c.do(fc, 5).(*kmsg.FindCoordinatorResponse).Coordinators[0]; got.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("SHARE key at v5: %+v", got)
	}
}
