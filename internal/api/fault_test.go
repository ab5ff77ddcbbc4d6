package api_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/testutil"
)

// Disk faults under a running broker with two log dirs: a failed write or fsync of a
// partition's .log fails the produce with KAFKA_STORAGE_ERROR and takes that partition's log
// dir offline (KIP-858) — later produces, fetches and offset look-ups of its partitions fail,
// Metadata lists this replica offline (the controller has left the partition without a leader:
// it had no other replica), DescribeLogDirs reports the dir with KAFKA_STORAGE_ERROR — while
// the partitions of the other dir keep working; after a restart on a healthy disk everything
// acknowledged before the fault reads back byte for byte.

func TestFailedLogWriteTakesPartitionOffline(t *testing.T) {
	testDiskFault(t, nil, func(ffs *storage.FaultFS) { ffs.FailNextWrite("*.log") })
}

func TestTornLogWriteTakesPartitionOffline(t *testing.T) {
	testDiskFault(t, nil, func(ffs *storage.FaultFS) { ffs.TornWrite("*.log", 30) })
}

func TestFailedFsyncTakesPartitionOffline(t *testing.T) {
	testDiskFault(t, map[string]*string{"flush.messages": sp("1")},
		func(ffs *storage.FaultFS) { ffs.FailNextSync("*.log") })
}

// acked is what the broker acknowledged for one partition: the records and, as fetched
// before the fault, the raw batch bytes.
type acked struct {
	records []*kgo.Record
	raw     []byte
}

func testDiskFault(t *testing.T, configs map[string]*string, inject func(*storage.FaultFS)) {
	dir := t.TempDir()
	logDirs := "log.dirs=" + filepath.Join(dir, "a") + "," + filepath.Join(dir, "b")
	ffs := storage.NewFaultFS(storage.OS)
	b := testutil.StartBrokerIn(t, dir, ffs, logDirs)
	createTopic(t, b.Addr(), "disk", 2, configs)
	cl := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	nodeID := request[*kmsg.MetadataResponse](t, cl, metadataReq("disk")).Brokers[0].NodeID
	described, err := adm.DescribeBrokerLogDirs(ctxT(t), nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir0, ok0 := described.LookupPartition("disk", 0)
	dir1, ok1 := described.LookupPartition("disk", 1)
	if !ok0 || !ok1 || dir0.Dir == dir1.Dir {
		t.Fatalf("the two partitions are not in the two log dirs: %+v %+v", dir0, dir1)
	}

	before := map[int32]*acked{0: {}, 1: {}}
	for i := 0; i < 20; i++ {
		p := int32(i % 2)
		r := &kgo.Record{Topic: "disk", Partition: p, Key: []byte{byte(i)}, Value: []byte(fmt.Sprintf("acked-%d", i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}}
		produceSync(t, cl, r)
		before[p].records = append(before[p].records, r)
	}
	for p, a := range before {
		a.raw = fetchRaw(t, cl, b.Addr(), "disk", p)
		if len(a.raw) == 0 {
			t.Fatalf("partition %d: nothing fetched before the fault", p)
		}
	}

	// The fault: the next write (or fsync) of a .log fails, and it is partition 0's.
	inject(ffs)
	fired := ffs.Fired()
	// KAFKA_STORAGE_ERROR is retriable: franz-go retries, refreshes metadata, sees the
	// partition offline there and fails the record with the error once its retries are spent.
	// A short metadata min age makes those refreshes (5 s apart by default) quick.
	failing := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.RecordRetries(2), kgo.MetadataMinAge(50*time.Millisecond), kgo.RecordDeliveryTimeout(20*time.Second))
	err = failing.ProduceSync(ctxT(t), &kgo.Record{Topic: "disk", Partition: 0, Value: []byte("fails")}).FirstErr()
	// The broker answers KAFKA_STORAGE_ERROR; by the client's last retry the controller may
	// have left the partition without a leader.
	if !errors.Is(err, kerr.KafkaStorageError) && !errors.Is(err, kerr.LeaderNotAvailable) {
		t.Fatalf("produce on a failing disk: got %v, want KAFKA_STORAGE_ERROR", err)
	}
	if ffs.Fired() == fired {
		t.Fatal("the injected fault never fired")
	}
	ffs.Clear()

	// Partition 0 is offline: produce, fetch and ListOffsets fail with KAFKA_STORAGE_ERROR,
	// even though the disk works again (it may not hold what the broker believes it does).
	if r := produceRaw(t, cl, "disk", producerBatch(t, -1, -1, -1, 1)); r.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the offline partition: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	fp := request[*kmsg.FetchResponse](t, cl, fetchReq(t, b.Addr(), "disk", 0, 0, 0)).Topics[0].Partitions[0]
	if fp.ErrorCode != kerr.KafkaStorageError.Code || len(fp.RecordBatches) != 0 {
		t.Fatalf("fetch of the offline partition: %v with %d bytes", kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	for _, ts := range []int64{-1, -2} {
		if code := listOffsets(t, cl, "disk", 0, ts, -1); code != kerr.KafkaStorageError.Code {
			t.Fatalf("ListOffsets %d of the offline partition: %v", ts, kerr.ErrorForCode(code))
		}
	}
	// The controller, told of the failed dir, leaves partition 0 (no other replica) without a
	// leader; Metadata says so, as Kafka does: LEADER_NOT_AVAILABLE, the replica offline.
	var md *kmsg.MetadataResponse
	waitFor(t, 20*time.Second, "partition 0 to lose its leader", func() bool {
		md = request[*kmsg.MetadataResponse](t, cl, metadataReq("disk"))
		return md.Topics[0].Partitions[0].Leader == -1
	})
	for _, mp := range md.Topics[0].Partitions {
		offline := mp.Partition == 0
		if gotOffline := mp.ErrorCode == kerr.LeaderNotAvailable.Code && len(mp.OfflineReplicas) == 1; gotOffline != offline {
			t.Fatalf("metadata of partition %d: error %v, offline replicas %v (offline: %v)",
				mp.Partition, kerr.ErrorForCode(mp.ErrorCode), mp.OfflineReplicas, offline)
		}
		if !offline && (mp.ErrorCode != 0 || len(mp.OfflineReplicas) != 0) {
			t.Fatalf("metadata of healthy partition %d: %v offline %v", mp.Partition, kerr.ErrorForCode(mp.ErrorCode), mp.OfflineReplicas)
		}
	}

	// DescribeLogDirs reports the failed dir, and only it, with KAFKA_STORAGE_ERROR.
	described, err = adm.DescribeBrokerLogDirs(ctxT(t), nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(described[dir0.Dir].Err, kerr.KafkaStorageError) || described[dir1.Dir].Err != nil {
		t.Fatalf("DescribeLogDirs after the fault: %s: %v, %s: %v", dir0.Dir, described[dir0.Dir].Err, dir1.Dir, described[dir1.Dir].Err)
	}

	// Partition 1, in the other dir, keeps working, for produce and fetch alike.
	extra := &kgo.Record{Topic: "disk", Partition: 1, Value: []byte("after the fault")}
	produceSync(t, cl, extra)
	before[1].records = append(before[1].records, extra)
	got := consumePartition(t, b.Addr(), "disk", 1, len(before[1].records))
	checkRecords(t, 1, got, before[1].records)

	// Close: the broker reports that it could not shut down cleanly (no clean-shutdown
	// marker, so the next start recovers).
	if err := b.Close(); err == nil || !errors.Is(err, storage.ErrLogOffline) {
		t.Fatalf("closing with a failed log dir: %v, want ErrLogOffline", err)
	}

	// Restart on a healthy disk: every acknowledged record is there, byte for byte, and
	// both partitions take records again.
	b2 := testutil.StartBrokerIn(t, dir, nil, logDirs)
	cl2 := newClient(t, b2.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	for p, a := range before {
		raw := fetchRaw(t, cl2, b2.Addr(), "disk", p)
		if !bytes.HasPrefix(raw, a.raw) {
			t.Fatalf("partition %d: the acknowledged batches changed across the fault and restart", p)
		}
		got := consumePartition(t, b2.Addr(), "disk", p, len(a.records))
		checkRecords(t, p, got[:len(a.records)], a.records)
		// Only the produce that failed may have reached the disk before its fault.
		for _, r := range got[len(a.records):] {
			if p != 0 || string(r.Value) != "fails" {
				t.Fatalf("partition %d: unexpected record %q at %d after restart", p, r.Value, r.Offset)
			}
		}
	}
	for p := int32(0); p < 2; p++ {
		produceSync(t, cl2, &kgo.Record{Topic: "disk", Partition: p, Value: []byte("after restart")})
	}
}

func metadataReq(topic string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchRaw returns the raw batch bytes of a partition from offset 0, in one fetch.
func fetchRaw(t *testing.T, cl *kgo.Client, addr, topic string, part int32) []byte {
	t.Helper()
	fp := request[*kmsg.FetchResponse](t, cl, fetchReq(t, addr, topic, part, 0, 0)).Topics[0].Partitions[0]
	if fp.ErrorCode != 0 {
		t.Fatalf("fetch %s-%d: %v", topic, part, kerr.ErrorForCode(fp.ErrorCode))
	}
	return fp.RecordBatches
}

// consumePartition reads at least n records of one partition from its start.
func consumePartition(t *testing.T, addr, topic string, part int32, n int) []*kgo.Record {
	t.Helper()
	return consumeN(t, addr, topic, n, kgo.ConsumeTopics(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		topic: {part: kgo.NewOffset().AtStart()},
	}))
}

func checkRecords(t *testing.T, part int32, got, want []*kgo.Record) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("partition %d: %d records, want %d", part, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Offset != int64(i) || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
			len(g.Headers) != len(w.Headers) || !g.Timestamp.Equal(w.Timestamp) {
			t.Fatalf("partition %d record %d: offset %d key %x value %q, want key %x value %q",
				part, i, g.Offset, g.Key, g.Value, w.Key, w.Value)
		}
		for j := range w.Headers {
			if g.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(g.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("partition %d record %d: headers %v, want %v", part, i, g.Headers, w.Headers)
			}
		}
	}
}
