package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxPartitionsPerCommand bounds the partitions one CreateTopics or CreatePartitions may
// create, so one request cannot make the controller allocate without limit (Kafka bounds
// records per operation the same way).
const MaxPartitionsPerCommand = 100_000

// maxTopicNameLen is Kafka's limit (room for a partition suffix in a 255-byte file name).
const maxTopicNameLen = 249

// validTopicName applies Kafka's rules: 1-249 of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > maxTopicNameLen:
		return fmt.Errorf("topic name is %d characters long, the limit is %d", len(name), maxTopicNameLen)
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q contains %q: only ASCII letters, digits, '.', '_' and '-' are allowed", name, c)
		}
	}
	return nil
}

// CreatableTopic is one topic of a CreateTopics request.
type CreatableTopic struct {
	Name              string
	NumPartitions     int32 // -1: num.partitions
	ReplicationFactor int16 // -1: default.replication.factor
	// Assignments, when set, places partition i on Assignments[i] (first = preferred leader);
	// NumPartitions and ReplicationFactor must then be -1.
	Assignments [][]int32
	Configs     map[string]string
}

// CreateTopicsRequest creates topics; with ValidateOnly nothing is created.
type CreateTopicsRequest struct {
	Topics       []CreatableTopic
	ValidateOnly bool
}

// CreateTopicResult is the outcome for one topic.
type CreateTopicResult struct {
	Name              string
	Err               error
	TopicID           UUID
	NumPartitions     int32
	ReplicationFactor int16
	Configs           map[string]string // the topic's overrides
}

// CreateTopics creates topics: a TopicRecord, a PartitionRecord per partition (replicas from
// the placer or the manual assignment, ISR = the active replicas, leader = the first of
// them, epochs 0) and a ConfigRecord per override. Each topic succeeds or fails alone.
func (c *Controller) CreateTopics(req CreateTopicsRequest) ([]Record, []CreateTopicResult) {
	var recs []Record
	results := make([]CreateTopicResult, len(req.Topics))
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Name]++
	}
	pl := c.newPlacer()
	budget := MaxPartitionsPerCommand
	for i, t := range req.Topics {
		res := &results[i]
		res.Name = t.Name
		if seen[t.Name] > 1 {
			res.Err = errf(kerr.InvalidRequest, "topic %q appears more than once in the request", t.Name)
			continue
		}
		trecs, err := c.createTopic(t, pl, &budget, res)
		if err != nil {
			res.Err = err
			continue
		}
		if !req.ValidateOnly {
			recs = append(recs, trecs...)
		}
	}
	return recs, results
}

func (c *Controller) createTopic(t CreatableTopic, pl *placer, budget *int, res *CreateTopicResult) ([]Record, error) {
	if err := validTopicName(t.Name); err != nil {
		return nil, errf(kerr.InvalidTopicException, "%v", err)
	}
	if c.im.topicsByName[t.Name] != nil {
		return nil, errf(kerr.TopicAlreadyExists, "topic %q already exists", t.Name)
	}
	for _, k := range sortedKeys(t.Configs) {
		if err := c.cfg.ValidateTopicConfig(k, t.Configs[k]); err != nil {
			return nil, errf(kerr.InvalidConfig, "%v", err)
		}
	}
	var assignment [][]int32
	if len(t.Assignments) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, errf(kerr.InvalidRequest, "topic %q: give either an assignment or a partition count and replication factor", t.Name)
		}
		if len(t.Assignments) > *budget {
			return nil, errf(kerr.InvalidPartitions, "topic %q: %d partitions exceed the %d allowed in one request", t.Name, len(t.Assignments), MaxPartitionsPerCommand)
		}
		for p, replicas := range t.Assignments {
			if err := c.checkAssignment(replicas, len(t.Assignments[0])); err != nil {
				return nil, fmt.Errorf("topic %q partition %d: %w", t.Name, p, err)
			}
		}
		assignment = t.Assignments
		for _, a := range assignment {
			pl.count(a)
		}
	} else {
		n, rf := t.NumPartitions, t.ReplicationFactor
		if n == -1 {
			n = c.cfg.DefaultPartitions
		}
		if rf == -1 {
			rf = c.cfg.DefaultReplicationFactor
		}
		if n < 1 {
			return nil, errf(kerr.InvalidPartitions, "topic %q: %d partitions; it needs at least 1", t.Name, n)
		}
		if int(n) > *budget {
			return nil, errf(kerr.InvalidPartitions, "topic %q: %d partitions exceed the %d allowed in one request", t.Name, n, MaxPartitionsPerCommand)
		}
		if rf < 1 {
			return nil, errf(kerr.InvalidReplicationFactor, "topic %q: replication factor %d is below 1", t.Name, rf)
		}
		if int(rf) > len(pl.brokers) {
			return nil, errf(kerr.InvalidReplicationFactor, "topic %q: replication factor %d is larger than the %d available brokers", t.Name, rf, len(pl.brokers))
		}
		assignment = make([][]int32, n)
		pl.startTopic(nil)
		for p := range assignment {
			a, err := pl.place(int(rf))
			if err != nil {
				return nil, err
			}
			assignment[p] = a
		}
	}
	*budget -= len(assignment)
	id := c.cfg.NewUUID()
	for c.im.topics[id] != nil || id == (UUID{}) {
		id = c.cfg.NewUUID()
	}
	recs := make([]Record, 0, 1+len(assignment)+len(t.Configs))
	recs = append(recs, &TopicRecord{Name: t.Name, TopicID: id})
	for p, replicas := range assignment {
		recs = append(recs, c.newPartition(id, int32(p), replicas))
	}
	for _, k := range sortedKeys(t.Configs) {
		recs = append(recs, &ConfigRecord{ResourceType: ResourceTopic, ResourceName: t.Name, Name: k, Value: t.Configs[k]})
	}
	res.TopicID = id
	res.NumPartitions = int32(len(assignment))
	res.ReplicationFactor = int16(len(assignment[0]))
	res.Configs = maps.Clone(t.Configs)
	return recs, nil
}

// checkAssignment validates a manual replica list: rf long, distinct, registered brokers, at
// least one of them active (the ISR starts as the active ones).
func (c *Controller) checkAssignment(replicas []int32, rf int) error {
	switch {
	case len(replicas) == 0:
		return errf(kerr.InvalidReplicaAssignment, "no replicas")
	case len(replicas) != rf:
		return errf(kerr.InvalidReplicaAssignment, "%d replicas where the other partitions have %d", len(replicas), rf)
	case !distinct(replicas):
		return errf(kerr.InvalidReplicaAssignment, "replicas %v are not distinct", replicas)
	}
	active := false
	for _, r := range replicas {
		b := c.im.brokers[r]
		if b == nil {
			return errf(kerr.InvalidReplicaAssignment, "broker %d is not registered", r)
		}
		active = active || b.Active()
	}
	if !active {
		return errf(kerr.InvalidReplicaAssignment, "all of brokers %v are fenced or shutting down", replicas)
	}
	return nil
}

// newPartition is the record of a new partition on replicas: ISR = active replicas, leader =
// the first of them.
func (c *Controller) newPartition(id UUID, p int32, replicas []int32) *PartitionRecord {
	isr := slices.DeleteFunc(slices.Clone(replicas), func(r int32) bool { return !c.im.brokers[r].Active() })
	return &PartitionRecord{TopicID: id, Partition: p, Replicas: slices.Clone(replicas), ISR: isr, Leader: isr[0]}
}

// DeleteTopicsRequest names topics by name or by id.
type DeleteTopicsRequest struct {
	Names []string
	IDs   []UUID
}

// DeleteTopicResult is the outcome for one topic (Name or ID as asked, both when found).
type DeleteTopicResult struct {
	Name string
	ID   UUID
	Err  error
}

// DeleteTopics removes topics (a RemoveTopicRecord each), names first then ids.
func (c *Controller) DeleteTopics(req DeleteTopicsRequest) ([]Record, []DeleteTopicResult) {
	var recs []Record
	var results []DeleteTopicResult
	done := map[UUID]bool{}
	del := func(t *Topic, res DeleteTopicResult) {
		res.Name, res.ID = t.Name, t.ID
		if done[t.ID] {
			res.Err = errf(kerr.InvalidRequest, "topic %q is named more than once", t.Name)
		} else {
			done[t.ID] = true
			recs = append(recs, &RemoveTopicRecord{TopicID: t.ID})
		}
		results = append(results, res)
	}
	for _, n := range req.Names {
		if t := c.im.topicsByName[n]; t != nil {
			del(t, DeleteTopicResult{})
		} else {
			results = append(results, DeleteTopicResult{Name: n, Err: errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", n)})
		}
	}
	for _, id := range req.IDs {
		if t := c.im.topics[id]; t != nil {
			del(t, DeleteTopicResult{})
		} else {
			results = append(results, DeleteTopicResult{ID: id, Err: errf(kerr.UnknownTopicID, "topic id %s does not exist", id)})
		}
	}
	return recs, results
}

// CreatePartitionsTopic asks for a topic to have Count partitions.
type CreatePartitionsTopic struct {
	Name  string
	Count int32
	// Assignments, when set, places the new partitions (Count minus the current count lists).
	Assignments [][]int32
}

// CreatePartitionsRequest grows topics; with ValidateOnly nothing changes.
type CreatePartitionsRequest struct {
	Topics       []CreatePartitionsTopic
	ValidateOnly bool
}

// CreatePartitionsResult is the outcome for one topic.
type CreatePartitionsResult struct {
	Name string
	Err  error
}

// CreatePartitions adds partitions to existing topics, with the replication factor of the
// topic's first partition, placed like CreateTopics places them.
func (c *Controller) CreatePartitions(req CreatePartitionsRequest) ([]Record, []CreatePartitionsResult) {
	var recs []Record
	results := make([]CreatePartitionsResult, len(req.Topics))
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Name]++
	}
	pl := c.newPlacer()
	budget := MaxPartitionsPerCommand
	for i, ct := range req.Topics {
		results[i].Name = ct.Name
		if seen[ct.Name] > 1 {
			results[i].Err = errf(kerr.InvalidRequest, "topic %q appears more than once in the request", ct.Name)
			continue
		}
		trecs, err := c.createPartitions(ct, pl, &budget)
		if err != nil {
			results[i].Err = err
			continue
		}
		if !req.ValidateOnly {
			recs = append(recs, trecs...)
		}
	}
	return recs, results
}

func (c *Controller) createPartitions(ct CreatePartitionsTopic, pl *placer, budget *int) ([]Record, error) {
	t := c.im.topicsByName[ct.Name]
	if t == nil {
		return nil, errf(kerr.UnknownTopicOrPartition, "topic %q does not exist", ct.Name)
	}
	have := int32(len(t.Partitions))
	if ct.Count <= have {
		return nil, errf(kerr.InvalidPartitions, "topic %q has %d partitions; asked for %d", ct.Name, have, ct.Count)
	}
	add := int(ct.Count - have)
	if add > *budget {
		return nil, errf(kerr.InvalidPartitions, "topic %q: %d new partitions exceed the %d allowed in one request", ct.Name, add, MaxPartitionsPerCommand)
	}
	rf := len(t.Partitions[0].Target())
	assignment := ct.Assignments
	if assignment != nil {
		if len(assignment) != add {
			return nil, errf(kerr.InvalidReplicaAssignment, "topic %q: %d assignments for %d new partitions", ct.Name, len(assignment), add)
		}
		for i, a := range assignment {
			if err := c.checkAssignment(a, rf); err != nil {
				return nil, fmt.Errorf("topic %q new partition %d: %w", ct.Name, int(have)+i, err)
			}
		}
		for _, a := range assignment {
			pl.count(a)
		}
	} else {
		if rf > len(pl.brokers) {
			return nil, errf(kerr.InvalidReplicationFactor, "topic %q: replication factor %d is larger than the %d available brokers", ct.Name, rf, len(pl.brokers))
		}
		assignment = make([][]int32, add)
		pl.startTopic(t.Partitions)
		for i := range assignment {
			a, err := pl.place(rf)
			if err != nil {
				return nil, err
			}
			assignment[i] = a
		}
	}
	*budget -= add
	recs := make([]Record, 0, add)
	for i, a := range assignment {
		recs = append(recs, c.newPartition(t.ID, have+int32(i), a))
	}
	return recs, nil
}
