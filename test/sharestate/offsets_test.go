package sharestate

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
	"github.com/gregor-project/gregor/test/replication"
)

// Three brokers: AlterShareGroupOffsets, DeleteShareGroupOffsets and
// DescribeShareGroupOffsets, sent to the share group's coordinator, act on a share-partition
// whose partition another broker leads (through the share coordinator, as Kafka's group
// coordinator does through its persister), and that leader's next share session sees the
// result.
func TestShareGroupOffsetsOfPartitionsLedElsewhere(t *testing.T) {
	const spread = "spread"
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 3, Sets: []string{
		fmt.Sprintf("share.coordinator.state.topic.num.partitions=%d", statePartNs),
		"group.initial.rebalance.delay.ms=0",
	}})
	c.WaitBrokersReady(t, time.Minute)
	cl := c.Client(t)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, spread); err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int32{}
	for p := range int32(3) {
		leaders[p] = replication.WaitPartition(t, c, spread, p, time.Minute, replication.PartitionState.FullISR, "a leader").Leader
	}
	md, err := adm.Metadata(ctx, spread)
	if err != nil {
		t.Fatal(err)
	}
	topicID := [16]byte(md.Topics[spread].ID)

	// A group whose coordinator leads none of the partitions picked below.
	group, coord, part := "", int32(-1), int32(-1)
	for i := 0; group == ""; i++ {
		if i == 50 {
			t.Fatalf("no group's coordinator differs from a partition leader: leaders %v", leaders)
		}
		g := fmt.Sprintf("resettable-%d", i)
		node := int32(-1)
		c.WaitFor(t, 30*time.Second, func() bool { // the offsets topic may be being created
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKeys = []string{g}
			fr, err := fc.RequestWith(ctx, cl)
			if err != nil || len(fr.Coordinators) != 1 || fr.Coordinators[0].ErrorCode != 0 {
				return false
			}
			node = fr.Coordinators[0].NodeID
			return true
		}, "the coordinator of "+g)
		for p := range int32(3) {
			if leaders[p] != node {
				group, coord, part = g, node, p
				break
			}
		}
	}
	leader := leaders[part]
	t.Logf("group %s: coordinator %d; partition %d led by %d", group, coord, part, leader)

	heartbeat := func(member string, epoch int32) {
		t.Helper()
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.Version, hb.GroupID, hb.MemberID, hb.MemberEpoch = 1, group, member, epoch
		if epoch == 0 {
			hb.SubscribedTopicNames = []string{spread}
		}
		r, err := request[*kmsg.ShareGroupHeartbeatResponse](t, c, coord, hb)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("heartbeat of %s (epoch %d): %v %v", member, epoch, err, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	// fetch sends one ShareFetch of the partition to its leader in session epoch, with
	// acks, and returns the offsets acquired (retrying while the state is not available).
	fetch := func(member string, epoch int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) []int64 {
		t.Helper()
		for tries := 0; ; tries++ {
			req := kmsg.NewPtrShareFetchRequest()
			g, id := group, member
			req.Version, req.GroupID, req.MemberID = 1, &g, &id
			req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = epoch, 300, 1, 1<<20, 100
			req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: part, AcknowledgementBatches: acks}}}}
			r, err := request[*kmsg.ShareFetchResponse](t, c, leader, req)
			if err != nil || r.ErrorCode != 0 {
				t.Fatalf("share fetch of %s: %v %+v", member, err, r)
			}
			var offs []int64
			var perr int16
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					perr = rp.ErrorCode
					if rp.AcknowledgeErrorCode != 0 {
						t.Fatalf("acknowledgement by %s: %v", member, kerr.ErrorForCode(rp.AcknowledgeErrorCode))
					}
					for _, a := range rp.AcquiredRecords {
						for o := a.FirstOffset; o <= a.LastOffset; o++ {
							offs = append(offs, o)
						}
					}
				}
			}
			switch {
			case perr == 0:
				return offs
			case perr != kerr.NotLeaderForPartition.Code || tries == 100 || epoch != 0:
				t.Fatalf("share fetch of %s: %v", member, kerr.ErrorForCode(perr))
			}
		}
	}
	describe := func(named bool) map[int32]int64 {
		t.Helper()
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.DescribeShareGroupOffsetsRequestGroup{GroupID: group}
		if named {
			rg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: spread, Partitions: []int32{0, 1, 2}}}
		}
		req.Version, req.Groups = 1, []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
		r, err := request[*kmsg.DescribeShareGroupOffsetsResponse](t, c, coord, req)
		if err != nil || len(r.Groups) != 1 || r.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe offsets: %v %+v", err, r)
		}
		out := map[int32]int64{}
		for _, rt := range r.Groups[0].Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("describe offsets of partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
				out[rp.Partition] = rp.StartOffset
			}
		}
		return out
	}
	produce := func(n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: spread, Partition: part, Value: []byte(fmt.Sprint(i))})
		}
		p := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := p.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// collect fetches in member's session from epoch on until n offsets are acquired; it
	// returns them and the session's next epoch.
	collect := func(member string, epoch int32, n int) ([]int64, int32) {
		t.Helper()
		var got []int64
		for start := epoch; len(got) < n; epoch++ {
			if epoch-start == 30 {
				t.Fatalf("%s acquired %v, want %d records", member, got, n)
			}
			got = append(got, fetch(member, epoch, nil)...)
		}
		return got, epoch
	}

	// member-1 starts the share-partition (at 0), ten records arrive, it accepts 0-4 and
	// leaves holding 5-9, which its session's close releases.
	heartbeat("member-1", 0)
	if got := fetch("member-1", 0, nil); len(got) != 0 {
		t.Fatalf("acquired %v before any record was produced", got)
	}
	produce(10)
	if got, _ := collect("member-1", 1, 10); !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("member-1 acquired %v, want 0-9", got)
	}
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{ackAccept}}}
	fetch("member-1", -1, accept)
	heartbeat("member-1", -1)

	// Described by the coordinator from the share coordinator's summary, named or not.
	if d := describe(true); d[part] != 5 {
		t.Fatalf("described start offsets %v, want partition %d at 5", d, part)
	}
	if d := describe(false); len(d) != 1 || d[part] != 5 {
		t.Fatalf("described start offsets (no topics named) %v, want only partition %d at 5", d, part)
	}

	// Altered to 8 through the coordinator; the leader's next session delivers 8-9 only.
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = group
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: spread, Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: part, StartOffset: 8}}}}
	ar, err := request[*kmsg.AlterShareGroupOffsetsResponse](t, c, coord, alter)
	if err != nil || ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("alter share group offsets: %v %+v", err, ar)
	}
	if d := describe(true); d[part] != 8 {
		t.Fatalf("described start offsets after the alter %v, want partition %d at 8", d, part)
	}
	heartbeat("member-2", 0)
	got, next := collect("member-2", 0, 2)
	if !slices.Equal(got, []int64{8, 9}) {
		t.Fatalf("after the alter member-2 acquired %v, want 8-9", got)
	}
	if more := fetch("member-2", next, nil); len(more) != 0 {
		t.Fatalf("after the alter member-2 acquired %v besides 8-9", more)
	}
	fetch("member-2", -1, nil)
	heartbeat("member-2", -1)

	// Deleted through the coordinator: no state is left, and with share.auto.offset.reset
	// set to earliest the leader's next session starts the share-partition over at 0.
	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = group
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: spread}}
	dr, err := request[*kmsg.DeleteShareGroupOffsetsResponse](t, c, coord, del)
	if err != nil || dr.ErrorCode != 0 || dr.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete share group offsets: %v %+v", err, dr)
	}
	if d := describe(true); d[part] != -1 {
		t.Fatalf("described start offsets after the delete %v, want partition %d without state (-1)", d, part)
	}
	ic := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("earliest")}}
	ic.Resources = append(ic.Resources, res)
	if r, err := ic.RequestWith(ctx, cl); err != nil || r.Resources[0].ErrorCode != 0 {
		t.Fatalf("set share.auto.offset.reset: %v %+v", err, r)
	}
	// Every broker applies the config from its metadata image: wait until the leader's shows it.
	c.WaitFor(t, 30*time.Second, func() bool {
		d := kmsg.NewPtrDescribeConfigsRequest()
		dres := kmsg.NewDescribeConfigsRequestResource()
		dres.ResourceType, dres.ResourceName, dres.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{"share.auto.offset.reset"}
		d.Resources = append(d.Resources, dres)
		r, err := request[*kmsg.DescribeConfigsResponse](t, c, leader, d)
		return err == nil && len(r.Resources) == 1 && len(r.Resources[0].Configs) == 1 && *r.Resources[0].Configs[0].Value == "earliest"
	}, "the leader to see share.auto.offset.reset=earliest")
	heartbeat("member-3", 0)
	if got, _ := collect("member-3", 0, 10); !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("after the delete member-3 acquired %v, want 0-9 again", got)
	}
}
