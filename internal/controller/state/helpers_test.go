package state

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

const testCluster = "test-cluster"

// harness drives a Controller like the quorum does: every command's records are applied at
// the next offset, and after each batch the image's invariants are checked. The clock is
// fake: now only moves when a test moves it.
type harness struct {
	t      testing.TB
	c      *Controller
	now    int64
	offset int64
	seq    byte
	log    [][]Record // every applied batch, for replay checks
}

func newHarness(t testing.TB, mod ...func(*Config)) *harness {
	h := &harness{t: t, now: 1_000_000}
	cfg := Config{ClusterID: testCluster, SessionTimeoutMs: 9000}
	cfg.NewUUID = func() UUID { // deterministic topic ids
		h.seq++
		return UUID{0xAA, h.seq, byte(h.offset), byte(h.offset >> 8)}
	}
	for _, m := range mod {
		m(&cfg)
	}
	h.c = New(cfg)
	return h
}

// apply applies recs as one batch and checks invariants.
func (h *harness) apply(recs []Record) {
	h.t.Helper()
	if len(recs) == 0 {
		return
	}
	// Round-trip through the wire format, as the log would.
	dec, err := DecodeBatch(EncodeBatch(recs))
	if err != nil {
		h.t.Fatalf("decode own batch: %v", err)
	}
	h.offset++
	if err := h.c.Apply(h.offset, dec); err != nil {
		h.t.Fatalf("apply at %d: %v", h.offset, err)
	}
	h.log = append(h.log, dec)
	if err := h.c.Image().Check(); err != nil {
		h.t.Fatalf("invariants after offset %d: %v", h.offset, err)
	}
}

// register registers and unfences broker id (rack optional) and returns its epoch.
func (h *harness) register(id int32, rack string) int64 {
	h.t.Helper()
	recs, resp := h.c.RegisterBroker(h.now, RegisterBrokerRequest{
		NodeID: id, IncarnationID: UUID{byte(id), 1}, ClusterID: testCluster, Rack: rack,
		Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id}},
	})
	if resp.Err != nil {
		h.t.Fatalf("register %d: %v", id, resp.Err)
	}
	h.apply(recs)
	h.heartbeat(id, resp.BrokerEpoch)
	if h.c.Image().Broker(id).Fenced {
		h.t.Fatalf("broker %d still fenced after a caught-up heartbeat", id)
	}
	return resp.BrokerEpoch
}

func (h *harness) heartbeat(id int32, epoch int64) HeartbeatResponse {
	h.t.Helper()
	recs, resp := h.c.Heartbeat(h.now, HeartbeatRequest{NodeID: id, BrokerEpoch: epoch, CurrentMetadataOffset: h.offset})
	if resp.Err != nil {
		h.t.Fatalf("heartbeat %d: %v", id, resp.Err)
	}
	h.apply(recs)
	return resp
}

// brokers registers ids 1..n, racks from racks (cycled) when given.
func (h *harness) brokers(n int, racks ...string) {
	h.t.Helper()
	for i := 1; i <= n; i++ {
		rack := ""
		if len(racks) > 0 {
			rack = racks[(i-1)%len(racks)]
		}
		h.register(int32(i), rack)
	}
}

func (h *harness) createTopic(name string, partitions int32, rf int16, configs ...string) *Topic {
	h.t.Helper()
	ct := CreatableTopic{Name: name, NumPartitions: partitions, ReplicationFactor: rf, Configs: map[string]string{}}
	for i := 0; i+1 < len(configs); i += 2 {
		ct.Configs[configs[i]] = configs[i+1]
	}
	recs, res := h.c.CreateTopics(CreateTopicsRequest{Topics: []CreatableTopic{ct}})
	if res[0].Err != nil {
		h.t.Fatalf("create %s: %v", name, res[0].Err)
	}
	h.apply(recs)
	return h.c.Image().Topic(name)
}

func (h *harness) part(topic string, p int32) *Partition {
	h.t.Helper()
	t := h.c.Image().Topic(topic)
	if t == nil || int(p) >= len(t.Partitions) {
		h.t.Fatalf("no partition %s-%d", topic, p)
	}
	return t.Partitions[p]
}

func (h *harness) epoch(id int32) int64 { return h.c.Image().Broker(id).Epoch }

// isKafka reports whether err carries the Kafka error want.
func isKafka(err error, want *kerr.Error) bool { return errors.Is(err, want) }

func wantErr(t testing.TB, err error, want *kerr.Error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		return
	}
	if !isKafka(err, want) {
		t.Fatalf("error %v, want %s", err, want.Message)
	}
}

func ids(v ...int32) []int32 { return v }

func (p *Partition) String() string {
	return fmt.Sprintf("{replicas %v isr %v leader %d le %d pe %d adding %v removing %v}",
		p.Replicas, p.ISR, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.Adding, p.Removing)
}
