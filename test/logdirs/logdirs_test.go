//go:build linux

// Package logdirs fails one of a real broker's two log dirs (a small tmpfs the test mounts and
// fills) and checks that it goes offline alone (KIP-858): its partitions get leaders on the
// other brokers and keep taking acks=all writes, the broker keeps serving the partitions of
// its healthy dir, DescribeLogDirs reports the failed dir with KAFKA_STORAGE_ERROR, and no
// acknowledged record is lost.
package logdirs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

const (
	topic      = "jbod"
	partitions = 6
)

func TestFailedLogDirGoesOfflineAlone(t *testing.T) {
	var failing string // node 1's second log dir, on a tmpfs of its own
	c := testutil.StartCluster(t, testutil.ClusterOptions{
		Nodes: 3,
		BeforeStart: func(n *testutil.Node) {
			if n.ID != 1 {
				return
			}
			failing = n.Dir + "-b"
			testutil.MountTmpfsAt(t, failing, 16)
			t.Cleanup(n.Kill) // before the unmount: the process holds files there
			f, err := os.OpenFile(n.ConfigFile, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The first dir also holds the metadata log; the second only partitions.
			_, err = fmt.Fprintf(f, "\nlog.dirs=%s,%s\n", n.Dir, failing)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		},
	})
	n1 := c.Node(1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(64))
	adm := kadm.NewClient(cl)
	// The brokers register once they serve: the topic is created once all three are in.
	c.WaitFor(t, time.Minute, func() bool {
		resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
		if err != nil || errors.Is(resp.Err, kerr.InvalidReplicationFactor) {
			return false
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) { // a retry of a create that went through
			t.Fatalf("create: %v", resp.Err)
		}
		return true
	}, "the topic to be created on three brokers")

	acked := map[int32][]string{} // the acknowledged values of each partition
	produce := func(p int32, value string) error {
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}).FirstErr()
		if err == nil {
			acked[p] = append(acked[p], value)
		}
		return err
	}
	for p := range int32(partitions) {
		for i := range 5 {
			if err := produce(p, fmt.Sprintf("before-%d-%d", p, i)); err != nil {
				t.Fatalf("produce to %d: %v", p, err)
			}
		}
	}

	// Where broker 1 keeps each partition.
	dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil || dirs.Error() != nil {
		t.Fatalf("describe log dirs: %v %v", err, dirs.Error())
	}
	var inFailing, inHealthy []int32
	for p := range int32(partitions) {
		if _, ok := dirs.Lookup(failing, topic, p); ok {
			inFailing = append(inFailing, p)
		} else if _, ok := dirs.Lookup(n1.Dir, topic, p); ok {
			inHealthy = append(inHealthy, p)
		}
	}
	if len(inFailing) == 0 || len(inHealthy) == 0 || len(inFailing)+len(inHealthy) != partitions {
		t.Fatalf("broker 1's partitions: %v in %s, %v in %s; want both dirs used", inFailing, failing, inHealthy, n1.Dir)
	}
	ledBy1 := leadersOf(ctx, t, adm, 1)
	t.Logf("in the failing dir %v, in the healthy one %v; broker 1 leads %v", inFailing, inHealthy, ledBy1)

	// Fill the dir; the next writes to its partitions fail on broker 1 (as leader or follower).
	if _, size, err := testutil.FillDisk(failing); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("filled %s with %d MiB", failing, size>>20)
	}
	big := string(make([]byte, 256<<10))
	c.WaitFor(t, time.Minute, func() bool {
		for _, p := range inFailing {
			// An answer either way: a failure is not acknowledged, so not counted.
			if err := produce(p, fmt.Sprintf("during-%d-%s", p, big)); err != nil {
				t.Logf("produce to %d while its dir fails: %v", p, err)
			}
		}
		d, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
		return err == nil && errors.Is(d[failing].Err, kerr.KafkaStorageError)
	}, "DescribeLogDirs to report the failed dir with KAFKA_STORAGE_ERROR")
	d, _ := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err := d[n1.Dir].Err; err != nil {
		t.Errorf("the healthy dir is reported with %v", err)
	}

	// The failed dir's partitions get other leaders, without broker 1 in their ISRs; broker
	// 1 keeps leading in its healthy dir what it led.
	c.WaitFor(t, time.Minute, func() bool {
		md, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range inFailing {
			pd := md[topic].Partitions[p]
			if pd.Leader == 1 || pd.Leader < 0 || slices.Contains(pd.ISR, 1) {
				return false
			}
		}
		return true
	}, "the failed dir's partitions to move away from broker 1")
	for _, p := range inHealthy {
		if slices.Contains(ledBy1, p) && !slices.Contains(leadersOf(ctx, t, adm, 1), p) {
			t.Errorf("broker 1 no longer leads partition %d of its healthy dir", p)
		}
	}
	if !n1.Running() {
		t.Fatal("broker 1 stopped on one failed log dir of two")
	}

	// Broker 1 answers for a partition of its failed dir with KAFKA_STORAGE_ERROR.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = inFailing[0]
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl.Broker(1)); err != nil {
		t.Errorf("produce to broker 1: %v", err)
	} else if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != kerr.KafkaStorageError.Code {
		t.Errorf("broker 1 answers a produce to partition %d of its failed dir with %v, want KAFKA_STORAGE_ERROR", inFailing[0], kerr.ErrorForCode(ec))
	}

	// Every partition takes acks=all writes again.
	for p := range int32(partitions) {
		for i := range 5 {
			if err := produce(p, fmt.Sprintf("after-%d-%d", p, i)); err != nil {
				t.Errorf("produce to %d after the dir failed: %v", p, err)
			}
		}
	}

	// No acknowledged record is lost.
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range int32(partitions) {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	cons := c.Client(t, kgo.ConsumePartitions(offsets), kgo.FetchMaxBytes(8<<20))
	got := map[int32][]string{}
	want := 0
	for _, vs := range acked {
		want += len(vs)
	}
	total := 0
	for total < want && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			total++
		})
	}
	for p, vs := range acked {
		for _, v := range vs {
			if !slices.Contains(got[p], v) {
				t.Errorf("partition %d lost an acknowledged record (%d bytes, %.20q)", p, len(v), v)
			}
		}
	}
}

// leadersOf lists the partitions broker id leads.
func leadersOf(ctx context.Context, t *testing.T, adm *kadm.Client, id int32) []int32 {
	t.Helper()
	md, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	for p, pd := range md[topic].Partitions {
		if pd.Leader == id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
