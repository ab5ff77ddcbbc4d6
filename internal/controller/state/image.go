package state

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sort"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/quota"
)

// NoLeader is the leader of a partition without one (Kafka's -1).
const NoLeader int32 = -1

// UUID is a 16-byte id: topic ids (KIP-516) and broker incarnation ids.
type UUID [16]byte

// RandomUUID returns a random, non-zero UUID.
func RandomUUID() UUID {
	var u UUID
	for u == (UUID{}) {
		if _, err := rand.Read(u[:]); err != nil {
			panic(err) // crypto/rand does not fail on Linux
		}
	}
	return u
}

func (u UUID) String() string { return hex.EncodeToString(u[:]) }

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Name             string // listener name, e.g. PLAINTEXT
	Host             string
	Port             int32
	SecurityProtocol int16 // Kafka's security protocol id (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL)
}

// Broker is one registered broker as the image holds it.
type Broker struct {
	ID            int32
	IncarnationID UUID // random per broker process start; tells a restart from a duplicate
	Epoch         int64
	Endpoints     []Endpoint
	Rack          string // "" = none
	// Fenced brokers lead no partition and join no ISR. A broker registers fenced and is
	// unfenced once it has caught up with the metadata log (RegisteredOffset).
	Fenced bool
	// InControlledShutdown brokers are moving their leaderships away before stopping.
	InControlledShutdown bool
	// RegisteredOffset is the metadata offset of the registration; the broker must have
	// applied the log up to it before it is unfenced.
	RegisteredOffset int64
}

// Active reports whether b may lead partitions, join ISRs and receive new replicas.
func (b *Broker) Active() bool { return b != nil && !b.Fenced && !b.InControlledShutdown }

// Topic is one topic. Partitions[i] is partition i; partitions are never removed.
type Topic struct {
	Name       string
	ID         UUID
	Partitions []*Partition
}

// Partition is one partition's assignment and leadership.
//
// Invariants (checked by Image.Check and kept by every Apply):
//   - Replicas are distinct and non-empty;
//   - ISR is non-empty and ISR ⊆ Replicas (the last ISR member stays in the ISR even when
//     its broker is fenced, so a clean leader can come back);
//   - Leader == NoLeader or Leader ∈ ISR;
//   - Adding ⊆ Replicas, Removing ⊆ Replicas, Adding ∩ Removing = ∅ (non-empty only
//     during a reassignment, whose target is Replicas minus Removing);
//   - LeaderEpoch and PartitionEpoch never decrease; PartitionEpoch grows with every
//     change, LeaderEpoch with every change of leader or removal of a replica.
type Partition struct {
	Replicas       []int32
	ISR            []int32
	Adding         []int32
	Removing       []int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// Reassigning reports whether a reassignment is in progress.
func (p *Partition) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// Target returns the replicas the partition will have when its reassignment completes (its
// replicas when none is in progress).
func (p *Partition) Target() []int32 {
	if len(p.Removing) == 0 {
		return p.Replicas
	}
	return without(p.Replicas, p.Removing)
}

// Original returns the replicas the partition had before its reassignment started.
func (p *Partition) Original() []int32 {
	if len(p.Adding) == 0 {
		return p.Replicas
	}
	return without(p.Replicas, p.Adding)
}

// Config resource types, as Kafka numbers them in DescribeConfigs and AlterConfigs.
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4  // name "" is the cluster-wide default, else a broker id
	ResourceGroup  int8 = 32 // a consumer or share group's overrides (KIP-848, KIP-932); never name ""
)

// ConfigResource names a set of config overrides.
type ConfigResource struct {
	Type int8
	Name string
}

// Image is the controller's in-memory metadata: what applying the log up to Offset built.
// Only Apply and Restore change it; commands read it. It is not safe for concurrent use:
// the quorum reads and applies on one goroutine.
type Image struct {
	offset          int64
	nextBrokerEpoch int64
	nextProducerID  int64
	brokers         map[int32]*Broker
	topics          map[UUID]*Topic
	topicsByName    map[string]*Topic
	configs         map[ConfigResource]map[string]string
	partitions      int         // total partitions, for sizing
	quotas          quota.Table // client quotas (quotas.go); nil when none was ever set
	// scram holds the SCRAM credentials; acls the ACLs by id and aclIDs the same ACLs by
	// binding (a binding is stored at most once). See securityimage.go.
	scram  map[ScramKey]ScramCredential
	acls   map[UUID]authz.Binding
	aclIDs map[authz.Binding]UUID
	tokens map[string]*DelegationToken // delegation tokens by id (tokens.go)
}

// NewImage returns the empty image (offset -1: nothing applied).
func NewImage() *Image {
	return &Image{
		offset:       -1,
		brokers:      map[int32]*Broker{},
		topics:       map[UUID]*Topic{},
		topicsByName: map[string]*Topic{},
		configs:      map[ConfigResource]map[string]string{},
		scram:        map[ScramKey]ScramCredential{},
		acls:         map[UUID]authz.Binding{},
		aclIDs:       map[authz.Binding]UUID{},
		tokens:       map[string]*DelegationToken{},
	}
}

// Offset is the metadata offset of the last record applied, -1 if none.
func (im *Image) Offset() int64 { return im.offset }

// NextBrokerEpoch is the epoch the next registration receives.
func (im *Image) NextBrokerEpoch() int64 { return im.nextBrokerEpoch }

// NextProducerID is the first producer id not yet handed out in a block.
func (im *Image) NextProducerID() int64 { return im.nextProducerID }

// Broker returns a registered broker, or nil. The result must not be modified.
func (im *Image) Broker(id int32) *Broker { return im.brokers[id] }

// Brokers returns every registered broker, by id.
func (im *Image) Brokers() []*Broker {
	bs := make([]*Broker, 0, len(im.brokers))
	for _, b := range im.brokers {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
	return bs
}

// Topic returns a topic by name, or nil. The result must not be modified.
func (im *Image) Topic(name string) *Topic { return im.topicsByName[name] }

// TopicByID returns a topic by id, or nil.
func (im *Image) TopicByID(id UUID) *Topic { return im.topics[id] }

// TopicNames returns every topic name, sorted.
func (im *Image) TopicNames() []string {
	names := make([]string, 0, len(im.topicsByName))
	for n := range im.topicsByName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NumPartitions is the number of partitions over all topics.
func (im *Image) NumPartitions() int { return im.partitions }

// Partition returns one partition, or nil.
func (im *Image) Partition(id UUID, p int32) *Partition {
	t := im.topics[id]
	if t == nil || p < 0 || int(p) >= len(t.Partitions) {
		return nil
	}
	return t.Partitions[p]
}

// Configs returns the overrides of a resource (nil if none). The map must not be modified.
func (im *Image) Configs(r ConfigResource) map[string]string { return im.configs[r] }

// ConfigResources returns every resource with overrides, sorted by type then name.
func (im *Image) ConfigResources() []ConfigResource {
	rs := make([]ConfigResource, 0, len(im.configs))
	for r := range im.configs {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Type != rs[j].Type {
			return rs[i].Type < rs[j].Type
		}
		return rs[i].Name < rs[j].Name
	})
	return rs
}

// sortedTopics returns topics ordered by name (deterministic iteration).
func (im *Image) sortedTopics() []*Topic {
	ts := make([]*Topic, 0, len(im.topicsByName))
	for _, t := range im.topicsByName {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts
}

func contains(s []int32, v int32) bool { return slices.Contains(s, v) }

// without returns s minus the members of drop, keeping order, in a new slice.
func without(s, drop []int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, v := range s {
		if !contains(drop, v) {
			out = append(out, v)
		}
	}
	return out
}

// sameSet reports whether a and b hold the same members.
func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, v := range a {
		if !contains(b, v) {
			return false
		}
	}
	return true
}

// subset reports whether every member of a is in b.
func subset(a, b []int32) bool {
	for _, v := range a {
		if !contains(b, v) {
			return false
		}
	}
	return true
}

func distinct(s []int32) bool {
	for i, v := range s {
		if slices.Contains(s[:i], v) {
			return false
		}
	}
	return true
}
