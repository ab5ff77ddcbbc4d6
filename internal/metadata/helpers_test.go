package metadata

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/controller/state"
)

const testCluster = "test-cluster"

// harness drives a state.Controller like the quorum does and feeds every committed batch to
// a Publisher, checking after each batch that the published Image matches the controller's
// state image, that untouched topics and brokers kept their pointers, and that the previous
// Image was not modified.
type harness struct {
	t      testing.TB
	c      *state.Controller
	p      *Publisher
	now    int64
	offset int64
	seq    byte
	log    []Entry // every batch, as applied
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, now: 1_000_000, p: NewPublisher()}
	cfg := state.Config{ClusterID: testCluster, SessionTimeoutMs: 9000}
	cfg.NewUUID = func() state.UUID { // deterministic topic ids
		h.seq++
		return state.UUID{0xAA, h.seq, byte(h.offset), byte(h.offset >> 8)}
	}
	h.c = state.New(cfg)
	return h
}

// decode round-trips recs through the wire format, as the log would, so the controller and
// the publisher share no record.
func (h *harness) decode(recs []state.Record) []state.Record {
	h.t.Helper()
	dec, err := state.DecodeBatch(state.EncodeBatch(recs))
	if err != nil {
		h.t.Fatalf("decode own batch: %v", err)
	}
	return dec
}

// apply commits recs as one batch (nothing when empty) and checks the published image.
func (h *harness) apply(recs []state.Record) {
	h.t.Helper()
	if len(recs) == 0 {
		return
	}
	h.offset++
	if err := h.c.Apply(h.offset, h.decode(recs)); err != nil {
		h.t.Fatalf("controller apply at %d: %v", h.offset, err)
	}
	prev := h.p.Image()
	before := dump(prev)
	mine := h.decode(recs)
	h.log = append(h.log, Entry{Offset: h.offset, Records: h.decode(recs)})
	if err := h.p.Apply(h.offset, mine); err != nil {
		h.t.Fatalf("publisher apply at %d: %v", h.offset, err)
	}
	next := h.p.Image()
	checkImage(h.t, next, h.c.Image())
	checkUntouchedShared(h.t, prev, next, recs)
	if dump(prev) != before {
		h.t.Fatalf("offset %d: the previous image was modified by the publish", h.offset)
	}
}

// register registers broker id and unfences it; it returns the broker epoch.
func (h *harness) register(id int32) int64 {
	h.t.Helper()
	recs, resp := h.c.RegisterBroker(h.now, state.RegisterBrokerRequest{
		NodeID: id, IncarnationID: state.UUID{byte(id), 1}, ClusterID: testCluster, Rack: fmt.Sprintf("r%d", id%2),
		Endpoints: []state.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092 + id}, {Name: "INTERNAL", Host: "10.0.0.1", Port: 19092 + id, SecurityProtocol: 1}},
	})
	if resp.Err != nil {
		h.t.Fatalf("register %d: %v", id, resp.Err)
	}
	h.apply(recs)
	h.heartbeat(state.HeartbeatRequest{NodeID: id, BrokerEpoch: resp.BrokerEpoch})
	return resp.BrokerEpoch
}

func (h *harness) heartbeat(req state.HeartbeatRequest) state.HeartbeatResponse {
	h.t.Helper()
	req.CurrentMetadataOffset = h.offset
	recs, resp := h.c.Heartbeat(h.now, req)
	if resp.Err != nil {
		h.t.Fatalf("heartbeat %d: %v", req.NodeID, resp.Err)
	}
	h.apply(recs)
	return resp
}

func (h *harness) createTopic(name string, partitions int32, rf int16, configs ...string) *Topic {
	h.t.Helper()
	ct := state.CreatableTopic{Name: name, NumPartitions: partitions, ReplicationFactor: rf, Configs: map[string]string{}}
	for i := 0; i+1 < len(configs); i += 2 {
		ct.Configs[configs[i]] = configs[i+1]
	}
	recs, res := h.c.CreateTopics(state.CreateTopicsRequest{Topics: []state.CreatableTopic{ct}})
	if res[0].Err != nil {
		h.t.Fatalf("create %s: %v", name, res[0].Err)
	}
	h.apply(recs)
	return h.p.Image().Topic(name)
}

func (h *harness) alterConfigs(typ int8, name string, changes ...state.ConfigChange) {
	h.t.Helper()
	recs, res := h.c.AlterConfigs(state.AlterConfigsRequest{Incremental: true, Resources: []state.AlterConfigsResource{{Type: typ, Name: name, Changes: changes}}})
	if res[0].Err != nil {
		h.t.Fatalf("alter configs %d/%q: %v", typ, name, res[0].Err)
	}
	h.apply(recs)
}

// checkImage compares im with the controller's image field by field.
func checkImage(t testing.TB, im *Image, st *state.Image) {
	t.Helper()
	checkSecurity(t, im, st)
	if im.Offset != st.Offset() || im.NextProducerID != st.NextProducerID() {
		t.Fatalf("offset %d next pid %d, state has %d and %d", im.Offset, im.NextProducerID, st.Offset(), st.NextProducerID())
	}
	sbs := st.Brokers()
	if len(im.Brokers) != len(sbs) {
		t.Fatalf("%d brokers, state has %d", len(im.Brokers), len(sbs))
	}
	for _, sb := range sbs {
		b := im.Broker(sb.ID)
		if b == nil || b.ID != sb.ID || b.Epoch != sb.Epoch || b.IncarnationID != sb.IncarnationID || b.Rack != sb.Rack ||
			b.Fenced != sb.Fenced || b.InControlledShutdown != sb.InControlledShutdown || len(b.Endpoints) != len(sb.Endpoints) {
			t.Fatalf("broker %d: %+v, state has %+v", sb.ID, b, sb)
		}
		for i, ep := range sb.Endpoints {
			if b.Endpoints[i] != (Endpoint{ep.Name, ep.Host, ep.Port, ep.SecurityProtocol}) {
				t.Fatalf("broker %d endpoint %d: %+v, state has %+v", sb.ID, i, b.Endpoints[i], ep)
			}
		}
	}
	names := st.TopicNames()
	if !slices.Equal(im.TopicNames(), names) || len(im.byID) != len(names) {
		t.Fatalf("topics %v (%d by id), state has %v", im.TopicNames(), len(im.byID), names)
	}
	for _, n := range names {
		stt, tp := st.Topic(n), im.Topic(n)
		if tp.Name != n || tp.ID != TopicID(stt.ID) || im.TopicByID(tp.ID) != tp {
			t.Fatalf("topic %s: name %q id %s, state id %s", n, tp.Name, tp.ID, stt.ID)
		}
		if int(tp.Partitions) != len(stt.Partitions) || len(tp.Parts) != len(stt.Partitions) {
			t.Fatalf("topic %s: %d/%d partitions, state has %d", n, tp.Partitions, len(tp.Parts), len(stt.Partitions))
		}
		for i, sp := range stt.Partitions {
			p := tp.Partition(int32(i))
			if p.Leader != sp.Leader || p.LeaderEpoch != sp.LeaderEpoch || p.PartitionEpoch != sp.PartitionEpoch ||
				!slices.Equal(p.Replicas, sp.Replicas) || !slices.Equal(p.ISR, sp.ISR) ||
				!slices.Equal(p.Adding, sp.Adding) || !slices.Equal(p.Removing, sp.Removing) {
				t.Fatalf("%s-%d: %+v, state has %+v", n, i, *p, *sp)
			}
		}
		if len(stt.Partitions) > 0 && int(tp.ReplicationFactor) != len(stt.Partitions[0].Target()) {
			t.Fatalf("topic %s: replication factor %d, target of partition 0 is %v", n, tp.ReplicationFactor, stt.Partitions[0].Target())
		}
		if !maps.Equal(tp.Configs, st.Configs(state.ConfigResource{Type: state.ResourceTopic, Name: n})) {
			t.Fatalf("topic %s configs %v, state has %v", n, tp.Configs, st.Configs(state.ConfigResource{Type: state.ResourceTopic, Name: n}))
		}
		if tp.Internal != (n == "__consumer_offsets" || n == "__transaction_state") {
			t.Fatalf("topic %s internal %v", n, tp.Internal)
		}
	}
	if !maps.Equal(im.BrokerConfigs, st.Configs(state.ConfigResource{Type: state.ResourceBroker})) {
		t.Fatalf("broker configs %v, state has %v", im.BrokerConfigs, st.Configs(state.ConfigResource{Type: state.ResourceBroker}))
	}
	nodes := 0
	for _, r := range st.ConfigResources() {
		if r.Type == state.ResourceBroker && r.Name != "" {
			nodes++
			id, err := strconv.Atoi(r.Name)
			if err != nil {
				t.Fatalf("broker config resource %q: %v", r.Name, err)
			}
			if !maps.Equal(im.NodeConfigs[int32(id)], st.Configs(r)) {
				t.Fatalf("broker %s configs %v, state has %v", r.Name, im.NodeConfigs[int32(id)], st.Configs(r))
			}
		}
	}
	if len(im.NodeConfigs) != nodes {
		t.Fatalf("configs of %d brokers, state has %d", len(im.NodeConfigs), nodes)
	}
}

// checkUntouchedShared checks that every topic and broker no record of recs names is the
// same pointer in next as in prev, as are the config maps no record names.
func checkUntouchedShared(t testing.TB, prev, next *Image, recs []state.Record) {
	t.Helper()
	topics, brokers := map[TopicID]bool{}, map[int32]bool{}
	topicNames, nodeConfigs, clusterConfigs := map[string]bool{}, map[string]bool{}, false
	for _, r := range recs {
		switch r := r.(type) {
		case *state.RegisterBrokerRecord:
			brokers[r.NodeID] = true
		case *state.UnregisterBrokerRecord:
			brokers[r.NodeID] = true
		case *state.BrokerRegistrationChangeRecord:
			brokers[r.NodeID] = true
		case *state.TopicRecord:
			topics[TopicID(r.TopicID)] = true
		case *state.PartitionRecord:
			topics[TopicID(r.TopicID)] = true
		case *state.PartitionChangeRecord:
			topics[TopicID(r.TopicID)] = true
		case *state.RemoveTopicRecord:
			topics[TopicID(r.TopicID)] = true
		case *state.ConfigRecord:
			switch {
			case r.ResourceType == state.ResourceTopic:
				topicNames[r.ResourceName] = true
			case r.ResourceName == "":
				clusterConfigs = true
			default:
				nodeConfigs[r.ResourceName] = true
			}
		}
	}
	for name, tp := range prev.Topics {
		if !topics[tp.ID] && !topicNames[name] && next.Topics[name] != tp {
			t.Fatalf("topic %s was not touched but is a new pointer", name)
		}
	}
	for id, b := range prev.Brokers {
		if !brokers[id] && next.Brokers[id] != b {
			t.Fatalf("broker %d was not touched but is a new pointer", id)
		}
	}
	if !clusterConfigs && !sameMap(prev.BrokerConfigs, next.BrokerConfigs) {
		t.Fatal("cluster configs were not touched but are a new map")
	}
	for id, m := range prev.NodeConfigs {
		if !nodeConfigs[fmt.Sprint(id)] && !sameMap(m, next.NodeConfigs[id]) {
			t.Fatalf("configs of broker %d were not touched but are a new map", id)
		}
	}
}

// sameMap reports whether a and b are the same map (or both nil).
func sameMap(a, b map[string]string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b)
}

// dump renders everything reachable from im, deterministically.
func dump(im *Image) string {
	var b strings.Builder
	fmt.Fprintf(&b, "offset %d pid %d cluster %v\n", im.Offset, im.NextProducerID, im.BrokerConfigs)
	for _, br := range im.SortedBrokers() {
		fmt.Fprintf(&b, "broker %+v configs %v\n", *br, im.NodeConfigs[br.ID])
	}
	ids := slices.Collect(maps.Keys(im.NodeConfigs))
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	fmt.Fprintf(&b, "node configs %v\n", ids)
	for _, n := range im.TopicNames() {
		tp := im.Topics[n]
		fmt.Fprintf(&b, "topic %s %s %d rf %d internal %v configs %v by id %v\n", n, tp.ID, tp.Partitions, tp.ReplicationFactor, tp.Internal, tp.Configs, im.TopicByID(tp.ID) == tp)
		for i, p := range tp.Parts {
			fmt.Fprintf(&b, "  %d %+v\n", i, p)
		}
	}
	dumpSecurity(&b, im)
	return b.String()
}

// fmtPtr renders a map's identity.
func fmtPtr[K comparable, V any](m map[K]V) string { return fmt.Sprintf("%p", m) }
