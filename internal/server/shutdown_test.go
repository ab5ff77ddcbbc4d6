package server_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// A client that asked for a large fetch and stopped reading its socket does not hang the
// broker's shutdown: the answer's write is blocked on a full socket, which CloseRead does not
// undo.
func TestCloseWithStuckReader(t *testing.T) {
	b := testutil.StartBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := t.Context()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("x"), 512<<10)
	var rs []*kgo.Record
	for i := 0; i < 64; i++ { // 32 MiB: far more than the socket buffers hold
		rs = append(rs, &kgo.Record{Topic: "big", Value: val})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if err := nc.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(4)
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MaxBytes = 64 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "big"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	frame := []byte{0, 0, 0, 0, 0, 1, 0, 4, 0, 0, 0, 7, 0xff, 0xff} // size, key, version, id, no client id
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	var size [4]byte // the answer has started: the broker is writing it
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(size[:]); n < 16<<20 {
		t.Fatalf("answer of %d bytes, want one larger than the socket buffers", n)
	}

	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker shutdown hangs on a client that stopped reading")
	}
}
