package cli

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeCluster is a Kafka-protocol server over real TCP that plays a
// three-broker cluster (brokers 1, 2, 3, all at one address, broker 1 the
// controller) for the cluster tools, until gregor itself runs as a cluster:
// it serves Metadata, DescribeCluster, ElectLeaders,
// AlterPartitionReassignments, ListPartitionReassignments and
// IncrementalAlterConfigs with Kafka's semantics, simplified. A
// reassignment completes after mu.stepsToFinish ListPartitionReassignments
// calls that list it, so a test controls progress without a clock.
type fakeCluster struct {
	ln net.Listener

	mu struct {
		sync.Mutex
		topics        map[string][]*fakePartition
		stepsToFinish int
		configs       []string        // "SET broker 2 key=value", "DELETE topic t key", in order
		refuse        map[string]bool // "topic-partition": AlterPartitionReassignments answers INVALID_REPLICA_ASSIGNMENT
	}
}

// fakePartition is one partition; during a reassignment replicas is the
// target followed by the replicas being removed, as in Kafka.
type fakePartition struct {
	leader   int32
	replicas []int32
	adding   []int32
	removing []int32
	orig     []int32 // replicas before the ongoing reassignment
	steps    int     // list calls seen while moving
}

var fakeBrokers = []int32{1, 2, 3}

// startFakeCluster serves topics (topic -> partition -> replicas, leader
// the first replica) until the test ends.
func startFakeCluster(t *testing.T, topics map[string][][]int32) *fakeCluster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{ln: ln}
	f.mu.stepsToFinish = 2
	f.mu.topics = map[string][]*fakePartition{}
	f.mu.refuse = map[string]bool{}
	for name, ps := range topics {
		for _, rs := range ps {
			f.mu.topics[name] = append(f.mu.topics[name], &fakePartition{leader: rs[0], replicas: rs})
		}
	}
	var wg sync.WaitGroup
	conns := map[net.Conn]bool{}
	var connsMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connsMu.Lock()
			conns[c] = true
			connsMu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		connsMu.Lock()
		for c := range conns {
			c.Close()
		}
		connsMu.Unlock()
		wg.Wait()
	})
	return f
}

func (f *fakeCluster) addr() string { return f.ln.Addr().String() }

// configLog returns the config changes made so far.
func (f *fakeCluster) configLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mu.configs)
}

// assignment returns the current replicas of every partition.
func (f *fakeCluster) assignment() Assignment {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := Assignment{}
	for name, ps := range f.mu.topics {
		for i, p := range ps {
			a.Set(name, int32(i), slices.Clone(p.replicas))
		}
	}
	return a
}

// setSteps sets how many listings a reassignment takes from now on.
func (f *fakeCluster) setSteps(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.stepsToFinish = n
}

// refuseReassignment makes AlterPartitionReassignments refuse a partition.
func (f *fakeCluster) refuseReassignment(topic string, partition int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.refuse[fmt.Sprintf("%s-%d", topic, partition)] = true
}

// setLeader changes a partition's leader (to make an election needed).
func (f *fakeCluster) setLeader(topic string, partition int, leader int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.topics[topic][partition].leader = leader
}

// serve answers one connection's requests in order.
func (f *fakeCluster) serve(c net.Conn) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		buf := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		r := kbin.Reader{Src: buf}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		r.NullableString()
		req := kmsg.RequestForKey(key)
		if req == nil {
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&r)
		}
		if err := req.ReadFrom(r.Src); err != nil || !r.Ok() {
			return
		}
		resp := f.handle(req)
		if resp == nil {
			return
		}
		resp.SetVersion(version)
		body := kbin.AppendInt32(nil, corr)
		if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
			body = append(body, 0)
		}
		body = resp.AppendTo(body)
		if _, err := c.Write(append(kbin.AppendInt32(nil, int32(len(body))), body...)); err != nil {
			return
		}
	}
}

func (f *fakeCluster) handle(req kmsg.Request) kmsg.Response {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		for _, k := range []kmsg.Request{&kmsg.ApiVersionsRequest{}, &kmsg.MetadataRequest{}, &kmsg.DescribeClusterRequest{},
			&kmsg.ElectLeadersRequest{}, &kmsg.AlterPartitionAssignmentsRequest{}, &kmsg.ListPartitionReassignmentsRequest{},
			&kmsg.IncrementalAlterConfigsRequest{}} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.Key(), MaxVersion: k.MaxVersion()})
		}
		return resp
	case *kmsg.MetadataRequest:
		return f.metadataLocked(req)
	case *kmsg.DescribeClusterRequest:
		resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.ClusterID, resp.ControllerID = "fake", 1
		host, port := f.hostPort()
		for _, b := range fakeBrokers {
			resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: b, Host: host, Port: port})
		}
		return resp
	case *kmsg.ElectLeadersRequest:
		return f.electLocked(req)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return f.alterLocked(req)
	case *kmsg.ListPartitionReassignmentsRequest:
		return f.listLocked(req)
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, rr := range req.Resources {
			typ := map[kmsg.ConfigResourceType]string{kmsg.ConfigResourceTypeBroker: "broker", kmsg.ConfigResourceTypeTopic: "topic"}[rr.ResourceType]
			for _, c := range rr.Configs {
				switch c.Op {
				case kmsg.IncrementalAlterConfigOpSet:
					f.mu.configs = append(f.mu.configs, fmt.Sprintf("SET %s %s %s=%s", typ, rr.ResourceName, c.Name, derefString(c.Value)))
				case kmsg.IncrementalAlterConfigOpDelete:
					f.mu.configs = append(f.mu.configs, fmt.Sprintf("DELETE %s %s %s", typ, rr.ResourceName, c.Name))
				}
			}
			resp.Resources = append(resp.Resources, kmsg.IncrementalAlterConfigsResponseResource{ResourceType: rr.ResourceType, ResourceName: rr.ResourceName})
		}
		return resp
	}
	return nil
}

func (f *fakeCluster) hostPort() (string, int32) {
	a := f.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), int32(a.Port)
}

func (f *fakeCluster) metadataLocked(req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ClusterID, resp.ControllerID = kmsg.StringPtr("fake"), 1
	host, port := f.hostPort()
	for _, b := range fakeBrokers {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b, Host: host, Port: port})
	}
	var names []string
	if req.Topics == nil {
		names = sortedKeys(f.mu.topics)
	}
	for _, t := range req.Topics {
		names = append(names, derefString(t.Topic))
	}
	for _, name := range names {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		ps, ok := f.mu.topics[name]
		if !ok {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		for i, p := range ps {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition, rp.Leader, rp.Replicas, rp.ISR = int32(i), p.leader, p.replicas, p.replicas
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// partitionLocked finds a partition or answers why not.
func (f *fakeCluster) partitionLocked(topic string, partition int32) (*fakePartition, error) {
	ps := f.mu.topics[topic]
	if partition < 0 || int(partition) >= len(ps) {
		return nil, kerr.UnknownTopicOrPartition
	}
	return ps[partition], nil
}

func (f *fakeCluster) electLocked(req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	elect := func(topic string, partition int32, all bool) {
		var err error
		p, err := f.partitionLocked(topic, partition)
		switch {
		case err != nil:
		case req.ElectionType == 0 && p.leader == p.replicas[0]:
			err = kerr.ElectionNotNeeded
		case req.ElectionType == 1 && p.leader >= 0:
			err = kerr.ElectionNotNeeded
		case req.ElectionType == 0 && p.leader < 0:
			err = kerr.PreferredLeaderNotAvailable
		default:
			p.leader = p.replicas[0]
		}
		if all && errors.Is(err, kerr.ElectionNotNeeded) {
			return // Kafka leaves these out of an all-partitions answer
		}
		i := slices.IndexFunc(resp.Topics, func(t kmsg.ElectLeadersResponseTopic) bool { return t.Topic == topic })
		if i < 0 {
			resp.Topics = append(resp.Topics, kmsg.ElectLeadersResponseTopic{Topic: topic})
			i = len(resp.Topics) - 1
		}
		rp := kmsg.ElectLeadersResponseTopicPartition{Partition: partition}
		if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
			rp.ErrorCode = ke.Code
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	if req.Topics == nil {
		for _, name := range sortedKeys(f.mu.topics) {
			for i := range f.mu.topics[name] {
				elect(name, int32(i), true)
			}
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			elect(t.Topic, p, false)
		}
	}
	return resp
}

func (f *fakeCluster) alterLocked(req *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	for _, t := range req.Topics {
		rt := kmsg.AlterPartitionAssignmentsResponseTopic{Topic: t.Topic}
		for _, rp := range t.Partitions {
			code := int16(0)
			p, err := f.partitionLocked(t.Topic, rp.Partition)
			switch {
			case err != nil:
				code = kerr.UnknownTopicOrPartition.Code
			case f.mu.refuse[fmt.Sprintf("%s-%d", t.Topic, rp.Partition)]:
				code = kerr.InvalidReplicaAssignment.Code
			case rp.Replicas == nil && p.orig == nil:
				code = kerr.NoReassignmentInProgress.Code
			case rp.Replicas == nil: // cancel: back to the replicas from before
				p.replicas, p.orig, p.adding, p.removing = p.orig, nil, nil, nil
				if !slices.Contains(p.replicas, p.leader) {
					p.leader = p.replicas[0]
				}
			case slices.ContainsFunc(rp.Replicas, func(b int32) bool { return !slices.Contains(fakeBrokers, b) }):
				code = kerr.InvalidReplicaAssignment.Code
			default:
				base := p.replicas
				if p.orig != nil {
					base = p.orig
				}
				p.orig, p.adding, p.removing, p.steps = base, nil, nil, 0
				p.replicas = slices.Clone(rp.Replicas)
				for _, b := range rp.Replicas {
					if !slices.Contains(base, b) {
						p.adding = append(p.adding, b)
					}
				}
				for _, b := range base {
					if !slices.Contains(rp.Replicas, b) {
						p.removing = append(p.removing, b)
						p.replicas = append(p.replicas, b)
					}
				}
				if p.adding == nil && p.removing == nil {
					p.replicas, p.orig = slices.Clone(rp.Replicas), nil // nothing to move
				}
			}
			rt.Partitions = append(rt.Partitions, kmsg.AlterPartitionAssignmentsResponseTopicPartition{Partition: rp.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (f *fakeCluster) listLocked(req *kmsg.ListPartitionReassignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	list := func(topic string, partition int32) {
		p, err := f.partitionLocked(topic, partition)
		if err != nil || p.orig == nil {
			return
		}
		if p.steps++; p.steps >= f.mu.stepsToFinish { // the move is done
			p.replicas = p.replicas[:len(p.replicas)-len(p.removing)]
			p.orig, p.adding, p.removing = nil, nil, nil
			if !slices.Contains(p.replicas, p.leader) {
				p.leader = p.replicas[0]
			}
			return
		}
		i := slices.IndexFunc(resp.Topics, func(t kmsg.ListPartitionReassignmentsResponseTopic) bool { return t.Topic == topic })
		if i < 0 {
			resp.Topics = append(resp.Topics, kmsg.ListPartitionReassignmentsResponseTopic{Topic: topic})
			i = len(resp.Topics) - 1
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, kmsg.ListPartitionReassignmentsResponseTopicPartition{
			Partition: partition, Replicas: p.replicas, AddingReplicas: p.adding, RemovingReplicas: p.removing})
	}
	if req.Topics == nil {
		for _, name := range sortedKeys(f.mu.topics) {
			for i := range f.mu.topics[name] {
				list(name, int32(i))
			}
		}
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			list(t.Topic, p)
		}
	}
	return resp
}
