package metadata

import (
	"slices"
	"sort"
)

// Partition is one partition's assignment and leadership, as the controller last decided
// them. The invariants are the controller's (see state.Partition): ISR ⊆ Replicas, Leader is
// NoLeader or an ISR member, and during a reassignment Adding and Removing are the replicas
// joining and leaving (the target assignment is Replicas minus Removing).
type Partition struct {
	Leader         int32 // broker id, NoLeader when the partition has none
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	Adding         []int32
	Removing       []int32
}

// NoLeader is the Leader of a partition without one (Kafka's -1).
const NoLeader int32 = -1

// InISR reports whether broker id is in the partition's ISR.
func (p *Partition) InISR(id int32) bool { return slices.Contains(p.ISR, id) }

// IsReplica reports whether broker id holds a replica of the partition (a replica being
// added or removed by a reassignment counts).
func (p *Partition) IsReplica(id int32) bool { return slices.Contains(p.Replicas, id) }

// Broker is one registered broker.
type Broker struct {
	ID            int32
	Epoch         int64    // the broker epoch of this registration
	IncarnationID [16]byte // random per broker process start
	Endpoints     []Endpoint
	Rack          string // "" = none
	// Fenced brokers lead no partition and are in no ISR (except as the last member of one);
	// a broker registers fenced and is unfenced once it has caught up with the metadata log.
	Fenced bool
	// InControlledShutdown brokers are moving their leaderships away before they stop.
	InControlledShutdown bool
}

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Name             string // listener name, e.g. PLAINTEXT
	Host             string
	Port             int32
	SecurityProtocol int16 // 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL
}

// Broker returns a registered broker, or nil.
func (im *Image) Broker(id int32) *Broker { return im.Brokers[id] }

// SortedBrokers returns the registered brokers ordered by id.
func (im *Image) SortedBrokers() []*Broker {
	bs := make([]*Broker, 0, len(im.Brokers))
	for _, b := range im.Brokers {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	return bs
}

// Endpoint returns where broker id listens on the named listener; ok is false when the
// broker is not registered or has no such listener.
func (im *Image) Endpoint(id int32, listener string) (host string, port int32, ok bool) {
	b := im.Brokers[id]
	if b == nil {
		return "", 0, false
	}
	for _, ep := range b.Endpoints {
		if ep.Name == listener {
			return ep.Host, ep.Port, true
		}
	}
	return "", 0, false
}
