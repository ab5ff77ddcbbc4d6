package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// `gregor share-group list|describe|delete` against a share group whose one member joined,
// accepted the first three of five records and left.
func TestShareGroupCommandsE2E(t *testing.T) {
	broker := testutil.StartBroker(t, "group.initial.rebalance.delay.ms=0").Addr()
	mustRunCLI(t, "", "topic", "create", "sq", "-b", broker, "--partitions", "1", "--replication-factor", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.DefaultProduceTopic("sq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	group, member := "sg", "sg-member"
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.Version, hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = 1, group, member, []string{"sq"}
	hr, err := hb.RequestWith(ctx, cl)
	if err != nil || hr.ErrorCode != 0 || hr.Assignment == nil {
		t.Fatalf("join: %v %+v", err, hr)
	}
	topicID := hr.Assignment.TopicPartitions[0].TopicID
	fetch := func(epoch int32, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, max int32) *kmsg.ShareFetchResponse {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID, req.ShareSessionEpoch, req.MaxRecords, req.MaxBytes = 1, &group, &member, epoch, max, 1<<20
		req.Topics = []kmsg.ShareFetchRequestTopic{{TopicID: topicID, Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0, AcknowledgementBatches: acks}}}}
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil || resp.(*kmsg.ShareFetchResponse).ErrorCode != 0 {
			t.Fatalf("share fetch: %v %+v", err, resp)
		}
		return resp.(*kmsg.ShareFetchResponse)
	}
	fetch(0, nil, 10) // starts the share-partition at the high watermark, 0
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fetch(1, nil, 3); len(got.Topics) != 1 || len(got.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatalf("fetch: %+v", got)
	}
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{1}}}
	if got := fetch(-1, accept, 0); got.Topics[0].Partitions[0].AcknowledgeErrorCode != 0 {
		t.Fatalf("accept: %+v", got)
	}

	if out := mustRunCLI(t, "", "share-group", "list", "-b", broker); !strings.Contains(out, "sg") || !strings.Contains(out, "Stable") {
		t.Fatalf("share-group list:\n%s", out)
	}
	var desc struct {
		State      string
		Members    []shareMemberRow
		Partitions []sharePartitionRow
	}
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "share-group", "describe", "sg", "-b", broker, "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	if desc.State != "Stable" || len(desc.Members) != 1 || desc.Members[0].MemberID != member ||
		len(desc.Partitions) != 1 || desc.Partitions[0].StartOffset != 3 || desc.Partitions[0].Lag != 2 {
		t.Fatalf("share-group describe: %+v", desc)
	}
	if _, err := runCLI(t, "", "share-group", "delete", "sg", "-b", broker); err == nil {
		t.Fatal("share-group delete of a group with a member succeeded")
	}
	if _, err := runCLI(t, "", "share-group", "reset-offsets", "sg", "--topic", "sq", "--to-earliest", "-b", broker); err == nil {
		t.Fatal("share-group reset-offsets of a group with a member succeeded")
	}
	hb.MemberEpoch = -1
	if hr, err := hb.RequestWith(ctx, cl); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, hr)
	}
	// Empty now: start over at the log start; every record is to be delivered again.
	mustRunCLI(t, "", "share-group", "reset-offsets", "sg", "--topic", "sq", "--to-earliest", "-b", broker)
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "share-group", "describe", "sg", "-b", broker, "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	if desc.State != "Empty" || len(desc.Partitions) != 1 || desc.Partitions[0].StartOffset != 0 || desc.Partitions[0].Lag != 5 {
		t.Fatalf("share-group describe after reset-offsets: %+v", desc)
	}
	// DeleteShareGroupOffsets forgets the share-partition.
	if _, err := kadm.NewClient(cl).DeleteShareGroupOffsets(ctx, group, "sq"); err != nil {
		t.Fatal(err)
	}
	desc.Partitions = nil
	if err := json.Unmarshal([]byte(mustRunCLI(t, "", "share-group", "describe", "sg", "-b", broker, "-o", "json")), &desc); err != nil {
		t.Fatal(err)
	}
	if len(desc.Partitions) != 0 {
		t.Fatalf("share-group describe after the offsets were deleted: %+v", desc)
	}
	mustRunCLI(t, "", "share-group", "delete", "sg", "-b", broker)
	if out := mustRunCLI(t, "", "share-group", "list", "-b", broker); strings.Contains(out, "sg") {
		t.Fatalf("share-group list after delete:\n%s", out)
	}
}
