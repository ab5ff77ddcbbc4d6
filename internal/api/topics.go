package api

import (
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/storage"
)

// Topic operations shared by CreateTopics, Metadata (auto-creation), DeleteTopics,
// CreatePartitions and the config APIs.

// maxTopicNameLen is Kafka's limit (249: room for a partition suffix in a 255-byte file name).
const maxTopicNameLen = 249

// maxRecordsPerUserOp bounds the metadata records one admin request may create (Kafka's
// QuorumController.MAX_RECORDS_PER_USER_OP): a topic record, one record per partition and one
// per config. A CreateTopics or CreatePartitions request asking for more is refused whole
// with POLICY_VIOLATION, so one request cannot make the broker open millions of partitions.
const maxRecordsPerUserOp = 10000

// errExcessiveBatch is Kafka's error (POLICY_VIOLATION, with this message) for a request over
// maxRecordsPerUserOp.
var errExcessiveBatch = errors.New("Unable to perform excessively large batch operation.") //nolint:staticcheck // Kafka's message, verbatim

// validTopicName applies Kafka's rules: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > maxTopicNameLen {
		return fmt.Errorf("%w: %q", errInvalidTopic, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q contains %q (legal: ASCII alphanumerics, '.', '_', '-')", errInvalidTopic, name, c)
		}
	}
	return nil
}

// topicSpec is a topic to create.
type topicSpec struct {
	name       string
	partitions int32 // -1: num.partitions
	rf         int16 // -1: default.replication.factor
	assignment map[int32][]int32
	configs    map[string]string
}

// checkTopic validates a spec and fills in defaults.
func (h *Handler) checkTopic(s *topicSpec) error {
	if err := validTopicName(s.name); err != nil {
		return err
	}
	if s.name == group.TopicName {
		h.offsetsTopicDefaults(s) // however it is created, it is the group coordinator's topic
	}
	if h.Meta.Image().Topic(s.name) != nil {
		return fmt.Errorf("%w: %s", metadata.ErrTopicExists, s.name)
	}
	if strings.Contains(s.name, ".") || strings.Contains(s.name, "_") {
		// Kafka forbids topics whose names differ only by '.' vs '_' (metric names collide).
		norm := strings.ReplaceAll(s.name, ".", "_")
		for _, n := range h.Meta.Image().TopicNames() {
			if strings.ReplaceAll(n, ".", "_") == norm {
				return fmt.Errorf("%w: %q collides with existing topic %q", errInvalidTopic, s.name, n)
			}
		}
	}
	if len(s.assignment) > 0 {
		if s.partitions != -1 || s.rf != -1 {
			return fmt.Errorf("%w: both a replica assignment and partitions/replication factor given", errInvalidRequest)
		}
		if err := h.checkAssignment(s.assignment, 0, int32(len(s.assignment))); err != nil {
			return err
		}
		s.partitions = int32(len(s.assignment))
		s.rf = int16(len(s.assignment[0]))
	}
	if s.partitions == -1 {
		s.partitions = h.Cfg.Current().NumPartitions
	}
	if s.rf == -1 {
		s.rf = int16(h.Cfg.Current().DefaultReplicationFactor)
	}
	if s.partitions <= 0 {
		return fmt.Errorf("%w: %d partitions", errInvalidPartitions, s.partitions)
	}
	if s.rf <= 0 {
		return fmt.Errorf("%w: replication factor must be larger than 0", errInvalidRF)
	}
	if s.rf > 1 {
		return fmt.Errorf("%w: replication factor %d larger than the 1 available broker", errInvalidRF, s.rf)
	}
	for k, v := range s.configs {
		if err := config.ValidateTopicConfig(k, v); err != nil {
			return err
		}
	}
	_, err := h.Cfg.ResolveTopic(s.configs)
	return err
}

// checkAssignment checks a manual assignment for partitions [from, to): each partition listed
// once with distinct replicas, all of them this broker.
func (h *Handler) checkAssignment(a map[int32][]int32, from, to int32) error {
	for p := from; p < to; p++ {
		reps, ok := a[p]
		if !ok || len(reps) == 0 {
			return fmt.Errorf("%w: partition %d has no replicas", errInvalidAssignment, p)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if r != h.NodeID {
				return fmt.Errorf("%w: unknown broker %d", errInvalidAssignment, r)
			}
			if seen[r] {
				return fmt.Errorf("%w: duplicate replica %d", errInvalidAssignment, r)
			}
			seen[r] = true
		}
	}
	return nil
}

// createTopic validates, records and opens a topic's partitions.
func (h *Handler) createTopic(s topicSpec, validateOnly bool) (*metadata.Topic, error) {
	if err := h.checkTopic(&s); err != nil {
		return nil, err
	}
	if validateOnly {
		return &metadata.Topic{Name: s.name, Partitions: s.partitions, ReplicationFactor: s.rf, Configs: s.configs}, nil
	}
	t, err := h.Meta.CreateTopic(metadata.Topic{Name: s.name, Partitions: s.partitions, ReplicationFactor: s.rf, Configs: s.configs, Internal: s.name == group.TopicName})
	if err != nil {
		return nil, err
	}
	h.Log.Info("created topic", "topic", t.Name, "partitions", t.Partitions, "id", t.ID.String())
	return t, h.OpenPartitions(t, 0)
}

// OpenPartitions opens the topic's partitions from index `from` on.
func (h *Handler) OpenPartitions(t *metadata.Topic, from int32) error {
	s, err := h.settings(t.Configs)
	if err != nil {
		return err
	}
	for p := from; p < t.Partitions; p++ {
		if _, err := h.Replicas.Open(t.Name, p, s); err != nil {
			return fmt.Errorf("open %s-%d: %w", t.Name, p, err)
		}
	}
	return nil
}

// reconfigureTopic applies a topic's new overrides to its open partitions.
func (h *Handler) reconfigureTopic(t *metadata.Topic) error {
	s, err := h.settings(t.Configs)
	if err != nil {
		return err
	}
	for p := int32(0); p < t.Partitions; p++ {
		if part := h.Replicas.Get(t.Name, p); part != nil {
			part.Reconfigure(s)
		}
	}
	return nil
}

// ReconfigureAll re-resolves every topic after a broker default changed.
func (h *Handler) ReconfigureAll() error {
	im := h.Meta.Image()
	for _, n := range im.TopicNames() {
		if err := h.reconfigureTopic(im.Topic(n)); err != nil {
			return err
		}
	}
	return nil
}

// deleteTopic removes a topic from metadata, then its partitions from disk.
func (h *Handler) deleteTopic(name string) error {
	if !h.Cfg.Current().DeleteTopicEnable {
		return errDeleteDisabled
	}
	t, err := h.Meta.DeleteTopic(name)
	if err != nil {
		return err
	}
	for p := int32(0); p < t.Partitions; p++ {
		if err := h.Replicas.Remove(t.Name, p); err != nil {
			h.Log.Error("deleting partition files failed", "topic", t.Name, "partition", p, "err", err)
		}
	}
	h.Log.Info("deleted topic", "topic", name)
	return nil
}

// partition returns an open partition of a known topic, or errUnknownPartition; a partition
// whose log went offline after an I/O error is refused with storage.ErrLogOffline
// (KAFKA_STORAGE_ERROR), as Kafka refuses every request for a partition on a failed log dir.
func (h *Handler) partition(topic string, part int32) (*replica.Partition, error) {
	p := h.Replicas.Get(topic, part)
	if p == nil {
		return nil, fmt.Errorf("%w: %s-%d", errUnknownPartition, topic, part)
	}
	if p.Log().Offline() {
		return nil, fmt.Errorf("%w: %s-%d", storage.ErrLogOffline, topic, part)
	}
	return p, nil
}

// withConfig returns a copy of overrides with k set to v.
func withConfig(overrides map[string]string, k, v string) map[string]string {
	m := maps.Clone(overrides)
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}
