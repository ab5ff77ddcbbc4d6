//go:build linux

// Package fulldisk fills a real broker's log directory (a small tmpfs the test mounts) until
// producers get KAFKA_STORAGE_ERROR, frees space, restarts the broker and proves that it
// starts, serves, and still holds every acknowledged record: a full disk costs the partitions
// that hit it their availability until the restart, never the broker and never a record.
package fulldisk

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

const (
	topic      = "full"
	partitions = 3
	diskSize   = 16      // MiB
	fillerSize = 2 << 20 // bytes of each filler file: what freeing one gives back
	valueSize  = 200
)

// writeFiller writes a file of n real (non-sparse) bytes.
func writeFiller(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatalf("filler %s: %v", path, err)
	}
}

// where is the place of an acknowledged record.
type where struct {
	partition int32
	offset    int64
}

// producer remembers every record the broker acknowledged.
type producer struct {
	mu      sync.Mutex
	seq     uint64
	acked   map[uint64]where
	storage map[int32]bool // partitions that answered KAFKA_STORAGE_ERROR
	other   []error
}

// fill produces to every partition with acks=all until the disk is full: the broker halts
// (exit status 1), as Kafka's does once its only log dir has failed, or, should it go on,
// every partition answers KAFKA_STORAGE_ERROR.
func (pr *producer) fill(t *testing.T, ctx context.Context, p *testutil.Process) {
	t.Helper()
	addr := p.Addr
	// Small batches make many index entries; no retries, as a retry waits for fresh metadata.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond),
		kgo.ProducerBatchMaxBytes(2048), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pr.mu.Lock()
	pr.storage = map[int32]bool{}
	pr.mu.Unlock()
	for {
		pr.mu.Lock()
		done := len(pr.storage) == partitions
		pr.mu.Unlock()
		if exited, err := p.Exited(); exited {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("the broker exited with %v on a full disk; want exit status 1 (its log dir failed)", err)
			}
			return
		}
		if done {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the disk did not fill: storage errors from %d of %d partitions, %d other errors, the first: %v", len(pr.storage), partitions, len(pr.other), pr.other[:min(len(pr.other), 5)])
		}
		var wg sync.WaitGroup
		for i := 0; i < 150; i++ {
			pr.mu.Lock()
			pr.seq++
			id := pr.seq
			part := int32(id % partitions)
			full := pr.storage[part]
			pr.mu.Unlock()
			if full {
				continue
			}
			v := make([]byte, valueSize) // random, so compression cannot shrink it
			rand.Read(v[8:])
			binary.BigEndian.PutUint64(v, id)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Partition: part, Value: v}, func(r *kgo.Record, err error) {
				defer wg.Done()
				pr.mu.Lock()
				defer pr.mu.Unlock()
				switch {
				case err == nil:
					pr.acked[id] = where{r.Partition, r.Offset}
				case errors.Is(err, kerr.KafkaStorageError):
					pr.storage[part] = true
				default:
					if len(pr.other) < 100 { // a halted broker fails everything in flight
						pr.other = append(pr.other, err)
					}
				}
			})
		}
		wg.Wait()
	}
}

// indexSizes lists the lengths of the offset index files under dir.
func indexSizes(t *testing.T, dir string) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, topic+"-*", "*.index"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			out = append(out, fmt.Sprintf("%s/%s %d", filepath.Base(filepath.Dir(p)), filepath.Base(p), fi.Size()))
		}
	}
	return strings.Join(out, ", ")
}

// ping checks that the broker answers a metadata request.
func ping(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("broker started on a full disk does not answer: %v", err)
	}
}

// verify reads every partition from its start and checks that each acknowledged record is
// where it was acknowledged.
func (pr *producer) verify(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hw := map[int32]int64{}
	starts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("list offsets of partition %d: %v", o.Partition, o.Err)
		}
		hw[o.Partition] = o.Offset
		starts[o.Partition] = kgo.NewOffset().AtStart()
	})
	rd, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	got := map[where]uint64{}
	total := int64(0)
	for _, n := range hw {
		total += n
	}
	for int64(len(got)) < total {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), total)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[where{r.Partition, r.Offset}] = binary.BigEndian.Uint64(r.Value)
		})
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	lost := 0
	for id, w := range pr.acked {
		if got[w] != id {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records are not where they were acknowledged (%d records stored)", lost, len(pr.acked), total)
	}
	t.Logf("all %d acknowledged records read back (%d stored: %v)", len(pr.acked), total, hw)
}

// A broker whose only log directory fills up halts (exit status 1), as Kafka's does once all
// its log dirs have failed; restarted on the still-full disk it starts and answers; once space
// is freed it restarts (after kill -9 and after SIGTERM) and serves every acknowledged record
// again, never crash-looping. The indexes were the trap: their active files were preallocated,
// sparse and memory-mapped, and on a tmpfs touching a page of a hole allocates it (SIGBUS at
// every start once the disk was full).
func TestFullDiskRestartKeepsAcknowledgedRecords(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	testutil.MountTmpfsAt(t, disk, diskSize)
	fillers := []string{filepath.Join(disk, "filler-1"), filepath.Join(disk, "filler-2")}
	for _, f := range fillers {
		writeFiller(t, f, fillerSize)
	}
	dir := filepath.Join(disk, "data")
	port := testutil.FreePort(t)
	// An index entry for every batch (of a few KiB), and segments that do not roll before the
	// disk is full: the active indexes pass a page and are written through read-write
	// mappings when it fills.
	sets := []string{"log.segment.bytes=8388608", "log.index.interval.bytes=100", fmt.Sprintf("num.partitions=%d", partitions)}
	p := testutil.StartProcess(t, dir, port, sets...)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	adm, err := kgo.NewClient(kgo.SeedBrokers(p.Addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, partitions, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	adm.Close()

	pr := &producer{acked: map[uint64]where{}}
	for round, stop := range []struct {
		name string
		stop func() error
	}{
		{"kill -9", func() error { p.Kill(); return nil }},
		{"SIGTERM", func() error { return p.Stop() }},
	} {
		pr.fill(t, ctx, p)
		t.Logf("%s round: disk full after %d acknowledged records; index files: %s", stop.name, len(pr.acked), indexSizes(t, dir))
		if round == 0 {
			// Restarted (as a supervisor would) on the disk still full, it starts and
			// answers; its partitions come back once space is freed and it restarts again.
			p.Kill()
			p = testutil.StartProcess(t, dir, port, sets...)
			ping(t, ctx, p.Addr)
		}
		if err := os.Remove(fillers[round]); err != nil {
			t.Fatal(err)
		}
		if err := stop.stop(); err != nil {
			t.Logf("%s: broker exited with %v", stop.name, err)
		}
		p = testutil.StartProcess(t, dir, port, sets...)
		pr.verify(t, ctx, p.Addr)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("clean stop: %v", err)
	}
}
