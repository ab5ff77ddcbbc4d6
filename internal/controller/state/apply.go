package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrRecordRejected is returned by Apply for a record that does not fit the image: a stale
// epoch, an unknown topic, a partition state that would break an invariant. The image is
// unchanged by the rejected record. Commands only produce records that apply, so this
// signals a bug or a corrupt log; every replica rejects the same records, so replicas stay
// identical either way.
var ErrRecordRejected = errors.New("state: record rejected")

func reject(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRecordRejected}, args...)...)
}

// Apply applies one batch (the records of one log entry) at offset. Records apply in order;
// a rejected record changes nothing and the error names it, but the records before it stay
// applied (every replica does the same). Offsets never go back.
func (im *Image) Apply(offset int64, recs []Record) error {
	if offset < im.offset {
		return reject("offset %d is below the image offset %d", offset, im.offset)
	}
	var errs []error
	for i, r := range recs {
		if err := im.apply(offset, r); err != nil {
			errs = append(errs, fmt.Errorf("record %d of %d (type %d) at offset %d: %w", i, len(recs), r.Type(), offset, err))
		}
	}
	im.offset = offset
	return errors.Join(errs...)
}

func (im *Image) apply(offset int64, r Record) error {
	switch r := r.(type) {
	case *RegisterBrokerRecord:
		return im.applyRegisterBroker(offset, r)
	case *UnregisterBrokerRecord:
		b := im.brokers[r.NodeID]
		if b == nil || b.Epoch != r.BrokerEpoch {
			return reject("unregister broker %d epoch %d: not registered with that epoch", r.NodeID, r.BrokerEpoch)
		}
		delete(im.brokers, r.NodeID)
	case *BrokerRegistrationChangeRecord:
		b := im.brokers[r.NodeID]
		if b == nil || b.Epoch != r.BrokerEpoch {
			return reject("change broker %d epoch %d: not registered with that epoch", r.NodeID, r.BrokerEpoch)
		}
		nb := *b
		if r.Fenced != NoChange {
			nb.Fenced = r.Fenced == SetTrue
		}
		if r.InControlledShutdown != NoChange {
			nb.InControlledShutdown = r.InControlledShutdown == SetTrue
		}
		im.brokers[r.NodeID] = &nb
	case *TopicRecord:
		if err := validTopicName(r.Name); err != nil {
			return reject("topic %q: %v", r.Name, err)
		}
		if r.TopicID == (UUID{}) || im.topics[r.TopicID] != nil || im.topicsByName[r.Name] != nil {
			return reject("topic %q id %s: exists or zero id", r.Name, r.TopicID)
		}
		t := &Topic{Name: r.Name, ID: r.TopicID}
		im.topics[t.ID] = t
		im.topicsByName[t.Name] = t
	case *PartitionRecord:
		t := im.topics[r.TopicID]
		if t == nil {
			return reject("partition %s-%d: unknown topic", r.TopicID, r.Partition)
		}
		if int(r.Partition) != len(t.Partitions) {
			return reject("partition %s-%d: the topic has %d partitions", t.Name, r.Partition, len(t.Partitions))
		}
		p := &Partition{
			Replicas: r.Replicas, ISR: r.ISR, Adding: r.Adding, Removing: r.Removing,
			Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch,
		}
		if err := p.validate(); err != nil {
			return reject("partition %s-%d: %v", t.Name, r.Partition, err)
		}
		t.Partitions = append(t.Partitions, p)
		im.partitions++
	case *PartitionChangeRecord:
		return im.applyPartitionChange(r)
	case *ConfigRecord:
		return im.applyConfig(r)
	case *RemoveTopicRecord:
		t := im.topics[r.TopicID]
		if t == nil {
			return reject("remove topic %s: unknown", r.TopicID)
		}
		delete(im.topics, t.ID)
		delete(im.topicsByName, t.Name)
		delete(im.configs, ConfigResource{ResourceTopic, t.Name})
		im.partitions -= len(t.Partitions)
	case *ProducerIDsRecord:
		if r.NextProducerID <= im.nextProducerID {
			return reject("producer ids up to %d: already at %d", r.NextProducerID, im.nextProducerID)
		}
		im.nextProducerID = r.NextProducerID
	case *UserScramCredentialRecord:
		return im.applyScramCredential(r)
	case *RemoveUserScramCredentialRecord:
		return im.applyRemoveScramCredential(r)
	case *AccessControlEntryRecord:
		return im.applyACL(r)
	case *RemoveAccessControlEntryRecord:
		return im.applyRemoveACL(r)
	case *ClientQuotaRecord:
		return im.applyClientQuota(r)
	case *DelegationTokenRecord:
		return im.applyDelegationToken(r)
	case *RemoveDelegationTokenRecord:
		return im.applyRemoveDelegationToken(r)
	case *SnapshotHeaderRecord:
		return reject("a snapshot header outside a snapshot")
	default:
		return reject("unknown record %T", r)
	}
	return nil
}

func (im *Image) applyRegisterBroker(offset int64, r *RegisterBrokerRecord) error {
	if r.NodeID < 0 {
		return reject("register broker %d: negative id", r.NodeID)
	}
	if old := im.brokers[r.NodeID]; old != nil && r.BrokerEpoch <= old.Epoch {
		return reject("register broker %d epoch %d: registered with epoch %d", r.NodeID, r.BrokerEpoch, old.Epoch)
	}
	regOffset := r.RegisteredOffset
	if regOffset < 0 {
		regOffset = offset
	}
	im.brokers[r.NodeID] = &Broker{
		ID: r.NodeID, IncarnationID: r.IncarnationID, Epoch: r.BrokerEpoch,
		Endpoints: slices.Clone(r.Endpoints), Rack: r.Rack,
		Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown,
		RegisteredOffset: regOffset,
	}
	im.nextBrokerEpoch = max(im.nextBrokerEpoch, r.BrokerEpoch+1)
	return nil
}

func (im *Image) applyPartitionChange(r *PartitionChangeRecord) error {
	t := im.topics[r.TopicID]
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return reject("change partition %s-%d: unknown", r.TopicID, r.Partition)
	}
	old := t.Partitions[r.Partition]
	if r.PartitionEpoch != old.PartitionEpoch {
		return reject("change partition %s-%d: computed at partition epoch %d, now %d", t.Name, r.Partition, r.PartitionEpoch, old.PartitionEpoch)
	}
	p := r.result(old)
	if err := p.validate(); err != nil {
		return reject("change partition %s-%d: %v", t.Name, r.Partition, err)
	}
	t.Partitions[r.Partition] = p
	return nil
}

// result is the partition old becomes when the change applies (old is not modified).
func (r *PartitionChangeRecord) result(old *Partition) *Partition {
	p := *old
	if r.Fields&ChangeLeader != 0 {
		p.Leader = r.Leader
	}
	if r.Fields&ChangeISR != 0 {
		p.ISR = r.ISR
	}
	if r.Fields&ChangeReplicas != 0 {
		p.Replicas = r.Replicas
	}
	if r.Fields&ChangeAdding != 0 {
		p.Adding = r.Adding
	}
	if r.Fields&ChangeRemoving != 0 {
		p.Removing = r.Removing
	}
	p.PartitionEpoch++
	if r.BumpLeaderEpoch {
		p.LeaderEpoch++
	}
	return &p
}

func (im *Image) applyConfig(r *ConfigRecord) error {
	res := ConfigResource{r.ResourceType, r.ResourceName}
	switch r.ResourceType {
	case ResourceTopic:
		if im.topicsByName[r.ResourceName] == nil {
			return reject("config of topic %q: unknown topic", r.ResourceName)
		}
	case ResourceBroker:
	case ResourceGroup:
		if r.ResourceName == "" {
			return reject("config of the default group")
		}
	default:
		return reject("config resource type %d", r.ResourceType)
	}
	if r.Name == "" {
		return reject("config of %v: empty key", res)
	}
	m := maps.Clone(im.configs[res]) // copy on write: readers may hold the old map
	if r.Delete {
		delete(m, r.Name)
	} else {
		if m == nil {
			m = map[string]string{}
		}
		m[r.Name] = r.Value
	}
	if len(m) == 0 {
		delete(im.configs, res)
	} else {
		im.configs[res] = m
	}
	return nil
}

// validate checks the invariants documented on Partition.
func (p *Partition) validate() error {
	switch {
	case len(p.Replicas) == 0:
		return errors.New("no replicas")
	case !distinct(p.Replicas):
		return fmt.Errorf("replicas %v are not distinct", p.Replicas)
	case len(p.ISR) == 0:
		return errors.New("empty ISR")
	case !distinct(p.ISR) || !subset(p.ISR, p.Replicas):
		return fmt.Errorf("ISR %v is not a set within replicas %v", p.ISR, p.Replicas)
	case p.Leader != NoLeader && !contains(p.ISR, p.Leader):
		return fmt.Errorf("leader %d is not in ISR %v", p.Leader, p.ISR)
	case !distinct(p.Adding) || !subset(p.Adding, p.Replicas):
		return fmt.Errorf("adding %v is not a set within replicas %v", p.Adding, p.Replicas)
	case !distinct(p.Removing) || !subset(p.Removing, p.Replicas):
		return fmt.Errorf("removing %v is not a set within replicas %v", p.Removing, p.Replicas)
	case len(p.Adding) > 0 && len(p.Removing) > 0 && !sameSet(without(p.Adding, p.Removing), p.Adding):
		return fmt.Errorf("adding %v and removing %v overlap", p.Adding, p.Removing)
	case len(p.Removing) == len(p.Replicas):
		return errors.New("a reassignment may not remove every replica")
	case p.LeaderEpoch < 0 || p.PartitionEpoch < 0:
		return errors.New("negative epoch")
	}
	for _, r := range p.Replicas {
		if r < 0 {
			return fmt.Errorf("negative broker id %d", r)
		}
	}
	return nil
}

// Check verifies every invariant of the image (tests and debugging; O(size)).
func (im *Image) Check() error {
	n := 0
	if len(im.topics) != len(im.topicsByName) {
		return fmt.Errorf("%d topics by id, %d by name", len(im.topics), len(im.topicsByName))
	}
	for id, t := range im.topics {
		if t.ID != id || im.topicsByName[t.Name] != t {
			return fmt.Errorf("topic %q indexed wrongly", t.Name)
		}
		for i, p := range t.Partitions {
			if err := p.validate(); err != nil {
				return fmt.Errorf("partition %s-%d: %w", t.Name, i, err)
			}
		}
		n += len(t.Partitions)
	}
	if n != im.partitions {
		return fmt.Errorf("partition count %d, counted %d", im.partitions, n)
	}
	for id, b := range im.brokers {
		if b.ID != id || b.Epoch >= im.nextBrokerEpoch {
			return fmt.Errorf("broker %d epoch %d (next %d)", id, b.Epoch, im.nextBrokerEpoch)
		}
	}
	if err := im.checkSecurity(); err != nil {
		return err
	}
	return im.checkTokens()
}
