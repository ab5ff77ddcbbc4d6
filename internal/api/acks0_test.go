package api_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// An acks=0 produce gets no response; one that fails closes the connection, which is how
// Kafka tells a fire-and-forget producer something went wrong.
func TestAcksZeroFailureClosesConnection(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "a0", 1, nil)
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	send := func(topic string, corr int32) {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(7)
		req.Acks = 0
		req.TimeoutMillis = 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = producerBatch(t, -1, -1, -1, 1)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		f := binary.BigEndian.AppendUint32(nil, 0)
		f = binary.BigEndian.AppendUint16(f, uint16(req.Key()))
		f = binary.BigEndian.AppendUint16(f, uint16(req.Version))
		f = binary.BigEndian.AppendUint32(f, uint32(corr))
		f = binary.BigEndian.AppendUint16(f, 0xffff) // null client id
		f = req.AppendTo(f)
		binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	send("a0", 1)   // succeeds: no answer
	send("nope", 2) // fails: the connection is closed
	rest, err := io.ReadAll(c)
	if err != nil || len(rest) != 0 {
		t.Fatalf("want a silent close, got %d bytes, %v", len(rest), err)
	}
	end, _ := newAdmin(t, b.Addr()).ListEndOffsets(ctxT(t), "a0")
	if o, _ := end.Lookup("a0", 0); o.Offset != 1 {
		t.Fatalf("the successful acks=0 record was not stored: end offset %d", o.Offset)
	}
}
