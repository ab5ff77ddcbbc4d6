// Package metadata holds the cluster view every request routes by: an immutable Image of
// topics, partitions and configs, replaced as a whole on every change so readers never lock.
package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
)

// TopicID is a topic's 16-byte UUID (KIP-516).
type TopicID [16]byte

// NewTopicID returns a random, non-zero id.
func NewTopicID() TopicID {
	var id TopicID
	for id == (TopicID{}) {
		if _, err := rand.Read(id[:]); err != nil {
			panic(err) // crypto/rand never fails on Linux
		}
	}
	return id
}

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// Topic is one topic as the image holds it. Topic values in an Image are never mutated.
type Topic struct {
	Name              string            `json:"name"`
	ID                TopicID           `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"` // topic-level overrides
	Internal          bool              `json:"internal,omitempty"`
}

// Image is an immutable view of the cluster metadata.
type Image struct {
	Topics map[string]*Topic
	byID   map[TopicID]*Topic
	// NextProducerID is the first producer id not yet handed out (persisted in blocks).
	NextProducerID int64
	// BrokerConfigs are the dynamic broker configs set by AlterConfigs (never mutated).
	BrokerConfigs map[string]string
}

func newImage(topics map[string]*Topic, nextPID int64, brokerConfigs map[string]string) *Image {
	im := &Image{Topics: topics, byID: make(map[TopicID]*Topic, len(topics)), NextProducerID: nextPID, BrokerConfigs: brokerConfigs}
	for _, t := range topics {
		im.byID[t.ID] = t
	}
	return im
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

func (im *Image) clone() map[string]*Topic {
	m := make(map[string]*Topic, len(im.Topics)+1)
	for k, v := range im.Topics {
		m[k] = v
	}
	return m
}

// MarshalText writes the id as hex (the metadata file stays readable).
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads a hex id.
func (id *TopicID) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(id) {
		return errBadTopicID
	}
	_, err := hex.Decode(id[:], b)
	return err
}

var errBadTopicID = errors.New("metadata: bad topic id")
