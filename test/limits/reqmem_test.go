// Package limits runs real brokers against clients that try to exhaust them: their memory
// (read from /proc), their disk, and their connections (Kafka's connection limits and
// quotas, connlimits_test.go).
package limits

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/batch"
	"github.com/gregor-project/gregor/internal/testutil"
)

// memStatus reads a kB field (VmRSS, VmHWM) of process pid's /proc status, in bytes.
func memStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/status %s: %v", pid, field, err)
		}
		return n << 10
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

const (
	bigConns    = 50
	bigRecords  = 20      // records per request
	bigValue    = 1 << 20 // bytes per record value: a request is ~20 MiB
	queuedBytes = 32 << 20
	maxRequest  = 24 << 20
	// rssSlack is what the broker may use beyond its request buffers while it appends them:
	// the Go heap's growth, goroutine stacks, the append path's scratch.
	rssSlack = 48 << 20
)

// produceFrame is one Produce v9 (acks=all) frame of n uncompressed records of size bytes to
// partition 0 of topic; record i's value starts with i and goes on with the low byte of each
// position.
func produceFrame(t *testing.T, topic string, n, size int, timeoutMs int32) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	h := batch.Header{PartitionLeaderEpoch: -1, BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		LastOffsetDelta: int32(n - 1)}
	var recs []batch.Record
	for i := 0; i < n; i++ {
		v := make([]byte, size)
		binary.BigEndian.PutUint64(v, uint64(i))
		for j := 8; j < len(v); j++ {
			v[j] = byte(j)
		}
		recs = append(recs, batch.Record{OffsetDelta: int32(i), Value: v})
	}
	raw, err := batch.Build(h, recs, batch.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("big")).AppendRequest(nil, req, 1)
}

// produceOver sends frame on a new connection and returns the partition's answer.
func produceOver(addr string, frame []byte) (kmsg.ProduceResponseTopicPartition, error) {
	var none kmsg.ProduceResponseTopicPartition
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return none, err
	}
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
		return none, err
	}
	if _, err := nc.Write(frame); err != nil {
		return none, err
	}
	var sz [4]byte
	if _, err := io.ReadFull(nc, sz[:]); err != nil {
		return none, err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		return none, err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	if err := resp.ReadFrom(body[5:]); err != nil { // correlation id, empty tagged fields
		return none, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return none, fmt.Errorf("answer for %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0], nil
}

// With queued.max.request.bytes set, 50 clients each sending a 20 MiB produce request at once
// cost the broker about the limit in memory, not 50 requests' worth (1 GiB): a connection
// whose request finds the pool empty waits before reading its body, and its sender waits on
// TCP. Every request is still answered and every record stored.
func TestQueuedMaxRequestBytesBoundsMemory(t *testing.T) {
	p := testutil.StartProcess(t, t.TempDir(), testutil.FreePort(t),
		fmt.Sprintf("queued.max.request.bytes=%d", queuedBytes),
		fmt.Sprintf("socket.request.max.bytes=%d", maxRequest),
		fmt.Sprintf("message.max.bytes=%d", maxRequest))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr), kgo.ConsumeTopics("big"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(maxRequest), kgo.FetchMaxPartitionBytes(maxRequest))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	frame := produceFrame(t, "big", bigRecords, bigValue, 60000)
	base := memStatus(t, p.Pid(), "VmRSS")

	var wg sync.WaitGroup
	errs := make(chan error, bigConns)
	bases := make(chan int64, bigConns)
	for i := 0; i < bigConns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := produceOver(p.Addr, frame)
			switch {
			case err != nil:
				errs <- err
			case r.ErrorCode != 0:
				errs <- kerr.ErrorForCode(r.ErrorCode)
			default:
				bases <- r.BaseOffset
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(bases)
	for err := range errs {
		t.Errorf("produce: %v", err)
	}
	peak := memStatus(t, p.Pid(), "VmHWM")
	bound := base + queuedBytes + maxRequest + rssSlack
	t.Logf("%d requests of %d MiB: broker VmRSS %d MiB before, VmHWM %d MiB after; bound %d MiB (queued.max.request.bytes %d MiB + one request %d MiB + %d MiB)",
		bigConns, len(frame)>>20, base>>20, peak>>20, bound>>20, queuedBytes>>20, maxRequest>>20, rssSlack>>20)
	if peak > bound {
		t.Errorf("broker peak RSS %d MiB, over the %d MiB bound", peak>>20, bound>>20)
	}

	// Every acknowledged request's records are stored, whole, at the offsets it was given.
	acked := map[int64]bool{}
	for b := range bases {
		if acked[b] {
			t.Fatalf("base offset %d given twice", b)
		}
		acked[b] = true
	}
	want := len(acked) * bigRecords
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, want)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			i := r.Offset % bigRecords
			if !acked[r.Offset-i] || len(r.Value) != bigValue || binary.BigEndian.Uint64(r.Value) != uint64(i) || r.Value[bigValue-1] != byte((bigValue-1)&0xff) {
				t.Fatalf("record at offset %d (%d bytes) is not record %d of an acknowledged request", r.Offset, len(r.Value), i)
			}
		})
	}
	t.Logf("read back all %d records of the %d acknowledged requests", got, len(acked))
}
