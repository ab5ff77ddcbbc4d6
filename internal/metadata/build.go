package metadata

import (
	"maps"
	"slices"
	"strconv"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/quota"
)

// Building Image values from the controller's state.Image. Everything built here is copied
// out of the state image, which keeps changing under the Publisher; nothing is shared with
// it, so a published Image stays as it was.

// internalTopics are the topics Kafka marks internal in Metadata responses.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "__share_group_state": true}

// newPartition copies p. The four broker lists share one allocation (each with its capacity
// cut to its length, so an append by mistake cannot run into the next): at 100,000
// partitions that is one allocation per partition instead of four.
func newPartition(p *state.Partition) Partition {
	buf := make([]int32, 0, len(p.Replicas)+len(p.ISR)+len(p.Adding)+len(p.Removing))
	take := func(s []int32) []int32 {
		if len(s) == 0 {
			return nil
		}
		start := len(buf)
		buf = append(buf, s...) // within capacity: never moves
		return buf[start:len(buf):len(buf)]
	}
	return Partition{
		Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		Replicas: take(p.Replicas), ISR: take(p.ISR), Adding: take(p.Adding), Removing: take(p.Removing),
	}
}

// topicConfigs copies a topic's overrides out of st (nil when it has none).
func topicConfigs(st *state.Image, name string) map[string]string {
	return cloneConfigs(st.Configs(state.ConfigResource{Type: state.ResourceTopic, Name: name}))
}

func cloneConfigs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// newTopic builds a topic from scratch.
func newTopic(st *state.Image, t *state.Topic) *Topic {
	parts := make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		parts[i] = newPartition(p)
	}
	return finishTopic(t, parts, topicConfigs(st, t.Name))
}

// patchTopic builds the new version of old, whose partitions other than changed (and those
// past old's partition count) are as they were: their Partition values, and the slices in
// them, are shared with old. Configs are re-read when configsChanged. The cost is a copy of
// the topic's Partition values plus a build of each changed partition.
func patchTopic(st *state.Image, old *Topic, t *state.Topic, changed []int32, configsChanged bool) *Topic {
	// Partitions are never removed, so fewer than old means old is not this topic's past;
	// as many changes as partitions means a rebuild costs no more than the patch.
	if len(t.Partitions) < len(old.Parts) || len(changed) >= len(t.Partitions) {
		return newTopic(st, t)
	}
	parts := make([]Partition, len(t.Partitions))
	copy(parts, old.Parts)
	for _, i := range changed {
		if i >= 0 && int(i) < len(parts) {
			parts[i] = newPartition(t.Partitions[i])
		}
	}
	for i := len(old.Parts); i < len(parts); i++ {
		parts[i] = newPartition(t.Partitions[i])
	}
	configs := old.Configs
	if configsChanged {
		configs = topicConfigs(st, t.Name)
	}
	return finishTopic(t, parts, configs)
}

func finishTopic(t *state.Topic, parts []Partition, configs map[string]string) *Topic {
	nt := &Topic{
		Name: t.Name, ID: TopicID(t.ID), Partitions: int32(len(parts)),
		Configs: configs, Internal: internalTopics[t.Name], Parts: parts,
	}
	if len(parts) > 0 {
		nt.ReplicationFactor = int16(len(parts[0].Replicas) - len(parts[0].Removing))
	}
	return nt
}

func newBroker(b *state.Broker) *Broker {
	nb := &Broker{
		ID: b.ID, Epoch: b.Epoch, IncarnationID: b.IncarnationID, Rack: b.Rack,
		Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown,
	}
	if len(b.Endpoints) > 0 {
		nb.Endpoints = make([]Endpoint, len(b.Endpoints))
		for i, ep := range b.Endpoints {
			nb.Endpoints[i] = Endpoint(ep)
		}
	}
	return nb
}

// nodeID parses the resource name of a single broker's configs: a broker id written the way
// Kafka writes it (decimal, no sign or leading zeros). ok is false for anything else.
func nodeID(name string) (int32, bool) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return 0, false
	}
	return int32(id), true
}

// equalTopic reports whether a and b hold the same contents.
func equalTopic(a, b *Topic) bool {
	if a.Name != b.Name || a.ID != b.ID || a.Partitions != b.Partitions ||
		a.ReplicationFactor != b.ReplicationFactor || a.Internal != b.Internal ||
		!maps.Equal(a.Configs, b.Configs) || len(a.Parts) != len(b.Parts) {
		return false
	}
	for i := range a.Parts {
		if !equalPartition(&a.Parts[i], &b.Parts[i]) {
			return false
		}
	}
	return true
}

func equalPartition(a, b *Partition) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.Adding, b.Adding) && slices.Equal(a.Removing, b.Removing)
}

func equalBroker(a, b *Broker) bool {
	return a.ID == b.ID && a.Epoch == b.Epoch && a.IncarnationID == b.IncarnationID && a.Rack == b.Rack &&
		a.Fenced == b.Fenced && a.InControlledShutdown == b.InControlledShutdown &&
		slices.Equal(a.Endpoints, b.Endpoints)
}

// clientQuotas copies the quota table out of st (nil when empty). The key maps are shared:
// the state image never modifies one it has put in its table (copy on write).
func clientQuotas(st *state.Image) quota.Table {
	if len(st.ClientQuotas()) == 0 {
		return nil
	}
	return maps.Clone(st.ClientQuotas())
}
