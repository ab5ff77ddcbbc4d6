// Package metadata holds the cluster view every request routes by: an immutable Image of
// brokers, topics, partitions and configs, replaced as a whole on every change so readers
// never lock.
//
// A Publisher (publisher.go) publishes the Images: it follows the controller's metadata
// log, applies committed record batches to a private state.Image and publishes a new Image
// after each, rebuilding only what the records touched.
package metadata

import (
	"encoding/hex"
	"sort"

	"github.com/gregor-project/gregor/internal/quota"
)

// TopicID is a topic's 16-byte UUID (KIP-516).
type TopicID [16]byte

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// Topic is one topic as the image holds it. Topic values in an Image are never mutated,
// nor is anything they reference (Configs, Parts and the partitions' slices).
//
// In an Image published by a Publisher: Partitions == len(Parts); ReplicationFactor is the
// number of target replicas of partition 0 (its replicas minus those being removed by a
// reassignment); Configs is the topic's overrides (nil when it has none); Internal is set for
// __consumer_offsets and __transaction_state.
type Topic struct {
	Name              string
	ID                TopicID
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string // topic-level overrides
	Internal          bool
	// Parts holds partition i at index i: its replicas, ISR and leadership.
	Parts []Partition
}

// Partition returns partition p, or nil when the topic has no such partition. The result
// points into the image and must not be modified.
func (t *Topic) Partition(p int32) *Partition {
	if p < 0 || int(p) >= len(t.Parts) {
		return nil
	}
	return &t.Parts[p]
}

// Image is an immutable view of the cluster metadata: nothing reachable from an Image is
// modified once it is published.
//
// Pointer stability: a Publisher builds each Image from the previous one, and every topic,
// broker and config map that the applied records did not touch is the SAME pointer (or map)
// in both. The broker finds what changed between two images by comparing pointers
// (prev.Topics[name] != next.Topics[name]) instead of comparing contents; a changed pointer
// may still hold equal contents (a rejected record still marks what it names).
type Image struct {
	Topics map[string]*Topic
	byID   map[TopicID]*Topic
	// NextProducerID is the first producer id not yet handed out (persisted in blocks).
	NextProducerID int64
	// BrokerConfigs are the cluster-wide dynamic broker configs set by AlterConfigs (resource
	// type 4, name ""). Never mutated.
	BrokerConfigs map[string]string

	// Brokers are the registered brokers by id.
	Brokers map[int32]*Broker
	// NodeConfigs are the dynamic overrides of single brokers (resource type 4, name = the
	// broker id), by broker id. Neither map nor the inner maps are mutated.
	NodeConfigs map[int32]map[string]string
	// GroupConfigs are the overrides of single consumer or share groups (resource type 32,
	// name = the group id), by group id; a group without overrides has no entry. Neither
	// map nor the inner maps are mutated.
	GroupConfigs map[string]map[string]string
	// ClientQuotas are the client quotas by entity (nil when none is set). Never mutated.
	ClientQuotas quota.Table
	// Offset is the metadata log offset of the last batch this image reflects, -1 when none.
	Offset int64

	// acls and scram are the ACLs and SCRAM credentials (security.go), nil when there are
	// none; shared with the previous Image until a record changes them.
	acls  *aclSet
	scram *scramSet
	// tokens are the delegation tokens by id (tokens.go), nil when there are none.
	tokens map[string]*DelegationToken
}

// Topic returns the topic by name, or nil.
func (im *Image) Topic(name string) *Topic { return im.Topics[name] }

// TopicByID returns the topic by id, or nil.
func (im *Image) TopicByID(id TopicID) *Topic { return im.byID[id] }

// TopicNames returns all topic names, sorted.
func (im *Image) TopicNames() []string {
	names := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
