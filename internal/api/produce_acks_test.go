package api_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// acks other than -1, 0 and 1 is refused with INVALID_REQUIRED_ACKS and nothing is appended,
// as Kafka does.
func TestProduceInvalidAcks(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "acks", 1, nil)
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(8) // not flexible: the frame below has a v1 request header
	req.Acks = 2
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "acks"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = producerBatch(t, -1, -1, -1, 1)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// Raw over TCP: kgo's Client.Request rewrites a produce request's acks to its own.
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	frame := []byte{0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 7, 0xff, 0xff} // size, key, version, id, no client id
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(8)
	if err := resp.ReadFrom(body[4:]); err != nil { // after the correlation id
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: error %v, base offset %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "acks"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if off := request[*kmsg.ListOffsetsResponse](t, cl, lo).Topics[0].Partitions[0].Offset; off != 0 {
		t.Fatalf("records appended by a refused produce: high watermark %d", off)
	}
}
