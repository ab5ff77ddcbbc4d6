package console

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/embed"
)

// The reassignments page shows a reassignment in progress with its replicas, the replica
// being added and its progress, and drops it once it completes. The reassignment is kept in
// progress without timing: it adds broker 3 to a partition on [1, 2] while broker 3 is
// stopped (the controller accepts a registered broker that is down, as Kafka's does), and
// completes once broker 3 is restarted and has caught up.
func TestReassignmentsPageShowsOneInProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := embed.StartCluster(ctx, 3, embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic = "moving"

	// One partition on brokers 1 and 2, with a record, fully replicated.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2}
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{ra}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	res, err := req.RequestWith(ctx, cl)
	if err == nil && len(res.Topics) == 1 {
		err = kerr.ErrorForCode(res.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating %s on [1 2]: %v", topic, err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitPartition(ctx, t, adm, topic, "replicas [1 2] with ISR [1 2]", func(p kadm.PartitionDetail) bool {
		return slices.Equal(p.Replicas, []int32{1, 2}) && len(p.ISR) == 2
	})

	base := serveConsole(t, c.Addr(1))
	web := &http.Client{Timeout: 20 * time.Second}
	if _, body := get(t, web, base+"/reassignments"); !strings.Contains(body, "No reassignment in progress.") {
		t.Fatalf("a reassignment shown before any:\n%s", body)
	}

	if err := c.Stop(3); err != nil {
		t.Fatal(err)
	}
	ares, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{topic: {0: {1, 2, 3}}})
	if err == nil {
		err = ares.Error()
	}
	if err != nil {
		t.Fatalf("reassigning %s-0 to [1 2 3] with broker 3 stopped: %v", topic, err)
	}

	// In progress: replicas 1, 2, 3; adding 3; removing none; 0 of 1 adding replicas in sync.
	row := `<tr><td>moving</td><td>0</td><td>1, 2, 3</td><td>3</td><td></td>` + "\n" +
		`<td><progress max="100" value="0"></progress> 0/1 in sync</td></tr>`
	_, body := get(t, web, base+"/reassignments")
	if !strings.Contains(body, row) {
		t.Fatalf("the reassignment of %s-0 is not shown in progress (want %q):\n%s", topic, row, body)
	}

	// Broker 3 comes back, catches up and joins the ISR: the reassignment completes and
	// the page no longer lists it.
	if err := c.Restart(3); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body = get(t, web, base+"/reassignments")
		if strings.Contains(body, "No reassignment in progress.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reassignment is still shown 30 s after broker 3 restarted:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond) // polling for the reassignment to complete
	}
	waitPartition(ctx, t, adm, topic, "replicas [1 2 3] with broker 3 in the ISR", func(p kadm.PartitionDetail) bool {
		return slices.Equal(p.Replicas, []int32{1, 2, 3}) && slices.Contains(p.ISR, 3)
	})
}

// waitPartition waits up to 30 s for partition 0 of topic to be as ok says.
func waitPartition(ctx context.Context, t *testing.T, adm *kadm.Client, topic, what string, ok func(kadm.PartitionDetail) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last kadm.PartitionDetail
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if p, found := md.Topics[topic].Partitions[0]; found {
				last = p
				if ok(p) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s-0 not %s after 30 s: replicas %v, ISR %v (%v)", topic, what, last.Replicas, last.ISR, err)
		}
		time.Sleep(100 * time.Millisecond) // polling for the cluster to converge
	}
}
