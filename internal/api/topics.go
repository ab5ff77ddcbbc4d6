package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/txn"
)

// Topic operations shared by CreateTopics, Metadata (auto-creation), DeleteTopics,
// CreatePartitions and the config APIs.

// maxTopicNameLen is Kafka's limit (249: room for a partition suffix in a 255-byte file name).
const maxTopicNameLen = 249

// maxRecordsPerUserOp bounds the metadata records one admin request may create (Kafka's
// QuorumController.MAX_RECORDS_PER_USER_OP): one record per partition and one per config (a
// deviation: Kafka counts each topic record too, which refuses a topic of exactly 10,000
// partitions; Gregor accepts it). A CreateTopics or CreatePartitions request asking for more is refused whole
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
	partitions int32 // -1: the controller's num.partitions
	rf         int16 // -1: the controller's default.replication.factor
	assignment map[int32][]int32
	configs    map[string]string
}

// autoCreateTimeout bounds a topic creation that no request's timeout bounds: Metadata's
// auto-creation and the group coordinator's __consumer_offsets.
const autoCreateTimeout = 10 * time.Second

// checkTopic applies the checks that need no cluster state (the name, the shape of a manual
// assignment, explicit counts, config values) and __consumer_offsets' defaults. What needs
// the cluster (does the topic exist, or one whose name differs only by '.' and '_', are
// there enough brokers, are the assigned brokers registered) is the controller's to decide.
func (h *Handler) checkTopic(s *topicSpec) error {
	if err := validTopicName(s.name); err != nil {
		return err
	}
	switch s.name {
	case group.TopicName:
		h.offsetsTopicDefaults(s) // however it is created, it is the group coordinator's topic
	case txn.TopicName:
		h.txnTopicDefaults(s) // and this the transaction coordinator's
	case share.StateTopic:
		h.shareStateTopicDefaults(s) // and this the share coordinator's
	}
	if len(s.assignment) > 0 {
		if s.partitions != -1 || s.rf != -1 {
			return fmt.Errorf("%w: both a replica assignment and partitions/replication factor given", errInvalidRequest)
		}
		if err := checkAssignment(s.assignment, 0, int32(len(s.assignment)), len(s.assignment[0])); err != nil {
			return err
		}
	}
	if s.partitions == 0 || s.partitions < -1 {
		return fmt.Errorf("%w: %d partitions", errInvalidPartitions, s.partitions)
	}
	if s.rf == 0 || s.rf < -1 {
		return fmt.Errorf("%w: replication factor must be larger than 0", errInvalidRF)
	}
	for k, v := range s.configs {
		if err := config.ValidateTopicConfig(k, v); err != nil {
			return err
		}
	}
	_, err := h.Cfg.ResolveTopic(s.configs)
	return err
}

// checkAssignment checks the shape of a manual assignment of partitions [from, to): each
// partition listed, with rf distinct replicas. Whether the brokers exist is the
// controller's to check.
func checkAssignment(a map[int32][]int32, from, to int32, rf int) error {
	for p := range a {
		if p < from || p >= to {
			return fmt.Errorf("%w: partition %d is not among the new partitions %d-%d", errInvalidAssignment, p, from, to-1)
		}
	}
	for p := from; p < to; p++ {
		reps, ok := a[p]
		if !ok || len(reps) == 0 {
			return fmt.Errorf("%w: partition %d has no replicas", errInvalidAssignment, p)
		}
		if len(reps) != rf {
			return fmt.Errorf("%w: partition %d has %d replicas where others have %d", errInvalidAssignment, p, len(reps), rf)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] {
				return fmt.Errorf("%w: duplicate replica %d", errInvalidAssignment, r)
			}
			seen[r] = true
		}
	}
	return nil
}

// createdTopic is the controller's answer for one topic of a forwarded CreateTopics.
type createdTopic struct {
	id                metadata.TopicID
	partitions        int32
	replicationFactor int16
	err               error
}

// createTopics forwards specs (already checked) to the controller as one CreateTopics
// request, at the newest version so the answer carries topic ids, and returns the answers
// in specs' order. Unless validateOnly, it then waits until every created topic is in this
// broker's image; a topic that does not show before ctx ends is REQUEST_TIMED_OUT, as Kafka
// answers a creation not complete within the request's timeout.
func (h *Handler) createTopics(ctx context.Context, specs []topicSpec, validateOnly bool) []createdTopic {
	out := make([]createdTopic, len(specs))
	if len(specs) == 0 {
		return out
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(apis.MaxVersion(kmsg.CreateTopics.Int16()))
	req.ValidateOnly = validateOnly
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMillis = int32(min(max(time.Until(dl).Milliseconds(), 1), math.MaxInt32))
	}
	for _, s := range specs {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = s.name, s.partitions, s.rf
		for _, p := range slices.Sorted(maps.Keys(s.assignment)) {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = p, s.assignment[p]
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		for _, k := range slices.Sorted(maps.Keys(s.configs)) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(s.configs[k])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	r, err := h.forward(ctx, req)
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	byName := map[string]*kmsg.CreateTopicsResponseTopic{}
	for i := range r.(*kmsg.CreateTopicsResponse).Topics {
		st := &r.(*kmsg.CreateTopicsResponse).Topics[i]
		byName[st.Topic] = st
	}
	for i, s := range specs {
		st := byName[s.name]
		if st == nil {
			out[i].err = fmt.Errorf("api: the controller did not answer for topic %q", s.name)
			continue
		}
		out[i] = createdTopic{id: st.TopicID, partitions: st.NumPartitions, replicationFactor: st.ReplicationFactor, err: controllerError(st.ErrorCode, st.ErrorMessage)}
	}
	if validateOnly {
		return out
	}
	err = h.awaitMetadata(ctx, func(im *metadata.Image) bool {
		for i, s := range specs {
			if out[i].err == nil && !topicShown(im, s.name, out[i].id) {
				return false
			}
		}
		return true
	}, 0)
	if err != nil {
		im := h.Meta.Image()
		for i, s := range specs {
			if out[i].err == nil && !topicShown(im, s.name, out[i].id) {
				out[i].err = fmt.Errorf("%w: topic %q was created but broker %d does not see it yet", errTimedOut, s.name, h.NodeID)
			}
		}
	}
	for i, s := range specs {
		if out[i].err == nil {
			h.Log.Info("created topic", "topic", s.name, "partitions", out[i].partitions, "id", out[i].id.String())
		}
	}
	return out
}

// topicShown reports whether im has topic name, with id when id is known.
func topicShown(im *metadata.Image, name string, id metadata.TopicID) bool {
	t := im.Topic(name)
	return t != nil && (id == metadata.TopicID{} || t.ID == id)
}

// createTopic creates one topic through the controller (Metadata's auto-creation, the group
// coordinator's __consumer_offsets) and returns it as this broker's image shows it. A topic
// that exists already is an error wrapping metadata.ErrTopicExists, returned only once this
// broker's image shows that topic, so a caller that then reads the image finds it.
func (h *Handler) createTopic(s topicSpec, validateOnly bool) (*metadata.Topic, error) {
	ctx, cancel := context.WithTimeout(context.Background(), autoCreateTimeout)
	defer cancel()
	return h.createTopicContext(ctx, s, validateOnly)
}

// createTopicContext is createTopic bounded by ctx.
func (h *Handler) createTopicContext(ctx context.Context, s topicSpec, validateOnly bool) (*metadata.Topic, error) {
	if err := h.checkTopic(&s); err != nil {
		return nil, err
	}
	res := h.createTopics(ctx, []topicSpec{s}, validateOnly)[0]
	if errors.Is(res.err, kerr.TopicAlreadyExists) {
		if err := h.awaitMetadata(ctx, func(im *metadata.Image) bool { return im.Topic(s.name) != nil }, 0); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", metadata.ErrTopicExists, s.name)
	}
	if res.err != nil {
		return nil, res.err
	}
	if validateOnly {
		return &metadata.Topic{Name: s.name, Partitions: res.partitions, ReplicationFactor: res.replicationFactor, Configs: s.configs}, nil
	}
	if t := h.Meta.Image().Topic(s.name); t != nil {
		return t, nil
	}
	// Deleted again between the wait and now.
	return nil, fmt.Errorf("%w: %s", errUnknownPartition, s.name)
}

// ReconfigureTopic applies a topic's overrides, as resolved against this broker's current
// defaults, to its partitions open on this broker. The broker calls it when an image
// changes a topic's configs (compare Topic.Configs of the previous and the new image).
func (h *Handler) ReconfigureTopic(t *metadata.Topic) error {
	s, err := h.topicSettings(t)
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

// reconfigureAll re-resolves every topic of im after a broker default changed.
func (h *Handler) reconfigureAll(im *metadata.Image) error {
	var errs []error
	for _, n := range im.TopicNames() {
		if err := h.ReconfigureTopic(im.Topic(n)); err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// partition returns an open partition of a known topic. One this broker does not hold is
// NOT_LEADER_OR_FOLLOWER when the metadata has it (the client's metadata is stale, or this
// broker is still opening it) and errUnknownPartition otherwise, as Kafka's
// getPartitionOrError. A partition whose log went offline after an I/O error is refused with
// storage.ErrLogOffline (KAFKA_STORAGE_ERROR), as Kafka refuses every request for a partition
// on a failed log dir.
func (h *Handler) partition(topic string, part int32) (*replica.Partition, error) {
	p := h.Replicas.Get(topic, part)
	if p == nil {
		if t := h.Meta.Image().Topic(topic); t != nil && part >= 0 && part < t.Partitions {
			return nil, fmt.Errorf("%w: broker %d holds no replica of %s-%d", replica.ErrNotLeaderOrFollower, h.NodeID, topic, part)
		}
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
