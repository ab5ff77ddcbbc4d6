package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/storage"
)

// Sentinel errors, translated to Kafka codes by the api layer.
var (
	ErrTopicExists  = errors.New("metadata: topic already exists")
	ErrUnknownTopic = errors.New("metadata: unknown topic")
	ErrPartitions   = errors.New("metadata: invalid partition count")
)

// FileName is the single-node metadata file in the first log dir. It is replaced atomically
// (write temp, fsync, rename, fsync dir) on every change, before the change is visible.
const FileName = "gregor-metadata.json"

// producerIDBlock is how many producer ids are reserved per persisted write.
const producerIDBlock = 1000

// Store owns the current Image and persists every change.
//
// Lock rule: mu serialises writers; readers call Image() without locking.
type Store struct {
	path  string
	image atomic.Pointer[Image]
	mu    struct {
		sync.Mutex
		pidNext, pidLimit int64 // ids handed out from [pidNext, pidLimit); pidLimit is persisted
	}
}

type fileFormat struct {
	Version        int               `json:"version"`
	Topics         []*Topic          `json:"topics"`
	NextProducerID int64             `json:"next_producer_id"`
	BrokerConfigs  map[string]string `json:"broker_configs,omitempty"`
}

// Open loads the store from dir, or starts empty.
func Open(dir string) (*Store, error) {
	s := &Store{path: filepath.Join(dir, FileName)}
	topics := map[string]*Topic{}
	var next int64
	var bc map[string]string
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var f fileFormat
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("metadata: %s: %w", s.path, err)
		}
		for _, t := range f.Topics {
			topics[t.Name] = t
		}
		next, bc = f.NextProducerID, f.BrokerConfigs
	}
	s.mu.pidNext, s.mu.pidLimit = next, next
	s.image.Store(newImage(topics, next, bc))
	return s, nil
}

// Image is the current view.
func (s *Store) Image() *Image { return s.image.Load() }

// publishLocked persists topics and makes them current.
func (s *Store) publishLocked(topics map[string]*Topic) error {
	return s.publishAllLocked(topics, s.Image().BrokerConfigs)
}

func (s *Store) publishAllLocked(topics map[string]*Topic, bc map[string]string) error {
	f := fileFormat{Version: 1, NextProducerID: s.mu.pidLimit, BrokerConfigs: bc}
	for _, n := range newImage(topics, 0, nil).TopicNames() {
		f.Topics = append(f.Topics, topics[n])
	}
	b, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return err
	}
	if err := storage.WriteFileAtomic(storage.OS, filepath.Dir(s.path), filepath.Base(s.path), b); err != nil {
		return err
	}
	s.image.Store(newImage(topics, s.mu.pidLimit, bc))
	return nil
}

// SetBrokerConfigs replaces the dynamic broker configs.
func (s *Store) SetBrokerConfigs(bc map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.publishAllLocked(s.Image().clone(), maps.Clone(bc))
}

// CreateTopic adds a topic.
func (s *Store) CreateTopic(t Topic) (*Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.Image()
	if im.Topics[t.Name] != nil {
		return nil, ErrTopicExists
	}
	if t.ID == (TopicID{}) {
		t.ID = NewTopicID()
	}
	t.Configs = maps.Clone(t.Configs)
	topics := im.clone()
	topics[t.Name] = &t
	if err := s.publishLocked(topics); err != nil {
		return nil, err
	}
	return &t, nil
}

// DeleteTopic removes a topic and returns what it was.
func (s *Store) DeleteTopic(name string) (*Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.Image()
	t := im.Topics[name]
	if t == nil {
		return nil, ErrUnknownTopic
	}
	topics := im.clone()
	delete(topics, name)
	return t, s.publishLocked(topics)
}

// SetPartitions raises a topic's partition count.
func (s *Store) SetPartitions(name string, count int32) (*Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.Image()
	t := im.Topics[name]
	if t == nil {
		return nil, ErrUnknownTopic
	}
	if count <= t.Partitions {
		return nil, fmt.Errorf("%w: topic has %d partitions, asked for %d", ErrPartitions, t.Partitions, count)
	}
	nt := *t
	nt.Partitions = count
	topics := im.clone()
	topics[name] = &nt
	return &nt, s.publishLocked(topics)
}

// SetConfigs replaces a topic's config overrides.
func (s *Store) SetConfigs(name string, configs map[string]string) (*Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.Image()
	t := im.Topics[name]
	if t == nil {
		return nil, ErrUnknownTopic
	}
	nt := *t
	nt.Configs = maps.Clone(configs)
	topics := im.clone()
	topics[name] = &nt
	return &nt, s.publishLocked(topics)
}

// NextProducerID hands out a producer id, never one handed out before, even across restarts:
// ids are reserved a block at a time and the block's end is persisted before any is used.
func (s *Store) NextProducerID() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.pidNext >= s.mu.pidLimit {
		old := s.mu.pidLimit
		s.mu.pidLimit += producerIDBlock
		if err := s.publishLocked(s.Image().clone()); err != nil {
			s.mu.pidLimit = old
			return 0, err
		}
	}
	id := s.mu.pidNext
	s.mu.pidNext++
	return id, nil
}
