package metadata

import "github.com/gregor-project/gregor/internal/controller/state"

// delta is what a run of applied records touched, so a publish rebuilds only that. It is
// noted from the records themselves (before or after they apply, it does not matter): a
// record that the state image rejects still marks what it names, which costs a rebuild of
// an unchanged topic and nothing else.
type delta struct {
	full bool // a snapshot replaced the state image: rebuild everything
	// topics are the topics, by id, whose partitions, existence or configs changed.
	topics map[state.UUID]*topicDelta
	// topicConfigs are the names of topics whose overrides changed; resolved to ids at
	// publish time (the name may be re-used by another topic by then).
	topicConfigs   map[string]bool
	brokers        map[int32]bool  // registered, unregistered or changed brokers
	clusterConfigs bool            // the cluster-wide broker overrides changed
	nodeConfigs    map[int32]bool  // single brokers whose overrides changed
	groupConfigs   map[string]bool // groups whose overrides changed
	acls           bool            // an ACL was created or removed
	scram          bool            // a SCRAM credential was set or removed
	clientQuotas   bool            // a client quota was set or removed
	tokens         bool            // a delegation token was created, changed or removed
}

// topicDelta is what changed in one topic.
type topicDelta struct {
	whole   bool    // created or removed: build it from scratch
	configs bool    // its overrides changed
	parts   []int32 // partitions created or changed (may repeat; see patchTopic)
}

func (d *delta) empty() bool {
	return !d.full && len(d.topics) == 0 && len(d.topicConfigs) == 0 && len(d.brokers) == 0 &&
		!d.clusterConfigs && len(d.nodeConfigs) == 0 && len(d.groupConfigs) == 0 && !d.acls && !d.scram && !d.clientQuotas && !d.tokens
}

func (d *delta) topic(id state.UUID) *topicDelta {
	if d.topics == nil {
		d.topics = map[state.UUID]*topicDelta{}
	}
	td := d.topics[id]
	if td == nil {
		td = &topicDelta{}
		d.topics[id] = td
	}
	return td
}

func (d *delta) broker(id int32) {
	if d.brokers == nil {
		d.brokers = map[int32]bool{}
	}
	d.brokers[id] = true
}

// note records what r touches.
func (d *delta) note(r state.Record) {
	if d.full {
		return
	}
	switch r := r.(type) {
	case *state.RegisterBrokerRecord:
		d.broker(r.NodeID)
	case *state.UnregisterBrokerRecord:
		d.broker(r.NodeID)
	case *state.BrokerRegistrationChangeRecord:
		d.broker(r.NodeID)
	case *state.TopicRecord:
		d.topic(r.TopicID).whole = true
	case *state.RemoveTopicRecord:
		d.topic(r.TopicID).whole = true
	case *state.PartitionRecord:
		d.notePartition(r.TopicID, r.Partition)
	case *state.PartitionChangeRecord:
		d.notePartition(r.TopicID, r.Partition)
	case *state.ConfigRecord:
		switch r.ResourceType {
		case state.ResourceTopic:
			if d.topicConfigs == nil {
				d.topicConfigs = map[string]bool{}
			}
			d.topicConfigs[r.ResourceName] = true
		case state.ResourceBroker:
			if r.ResourceName == "" {
				d.clusterConfigs = true
			} else if id, ok := nodeID(r.ResourceName); ok {
				if d.nodeConfigs == nil {
					d.nodeConfigs = map[int32]bool{}
				}
				d.nodeConfigs[id] = true
			}
		case state.ResourceGroup:
			if d.groupConfigs == nil {
				d.groupConfigs = map[string]bool{}
			}
			d.groupConfigs[r.ResourceName] = true
		}
	case *state.AccessControlEntryRecord, *state.RemoveAccessControlEntryRecord:
		d.acls = true
	case *state.UserScramCredentialRecord, *state.RemoveUserScramCredentialRecord:
		d.scram = true
	case *state.DelegationTokenRecord, *state.RemoveDelegationTokenRecord:
		d.tokens = true
	}
	if _, ok := r.(*state.ClientQuotaRecord); ok {
		d.clientQuotas = true
	}
	// ProducerIDsRecord: NextProducerID is copied on every publish.
}

func (d *delta) notePartition(id state.UUID, p int32) {
	td := d.topic(id)
	if td.whole {
		return
	}
	td.parts = append(td.parts, p)
}
