package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The streams assignor's user data, carried in the consumer protocol's subscription
// (JoinGroup) and assignment (SyncGroup) as Kafka Streams carries its SubscriptionInfo and
// AssignmentInfo. Every encoding starts with a version byte; a reader refuses a version it
// does not know, so a rolling upgrade can change the layout behind a new version.
//
// Layout (big endian; a string is a uint16 length and bytes; a task list is a uint32 count
// and per task an int32 sub-topology and an int32 partition):
//
//	subscription v1: version, application.server (string), previous active tasks,
//	                 standby tasks held warm, error code (int32)
//	assignment v1:   version, active tasks, standby tasks, host count (uint32) and per host
//	                 its application.server (string), its active and its standby tasks,
//	                 error code (int32)
const userDataVersion = 1

// Assignor error codes, Kafka Streams' AssignorError.
const (
	assignorNone int32 = 0
	// assignorShutdownRequested asks every instance to shut down (KIP-671): a member sets it
	// in its subscription, the leader puts it in every assignment.
	assignorShutdownRequested int32 = 2
)

// subscriptionInfo is what a member tells the group leader when it joins.
type subscriptionInfo struct {
	server     string // application.server, "" when not set
	prevActive []TaskID
	standby    []TaskID // tasks whose state this member keeps warm
	errorCode  int32
}

// assignmentInfo is what the group leader tells one member.
type assignmentInfo struct {
	active, standby []TaskID
	hosts           []hostTasks // every member's tasks, by application.server
	errorCode       int32
}

// hostTasks are the tasks of the instance reachable at server.
type hostTasks struct {
	server          string
	active, standby []TaskID
}

func (s subscriptionInfo) encode() []byte {
	b := []byte{userDataVersion}
	b = appendString(b, s.server)
	b = appendTasks(b, s.prevActive)
	b = appendTasks(b, s.standby)
	return binary.BigEndian.AppendUint32(b, uint32(s.errorCode))
}

func decodeSubscription(b []byte) (subscriptionInfo, error) {
	var s subscriptionInfo
	r := reader{b: b}
	if v := r.byte(); r.err == nil && v != userDataVersion {
		return s, fmt.Errorf("streams: subscription user data version %d, know %d", v, userDataVersion)
	}
	s.server = r.string()
	s.prevActive = r.tasks()
	s.standby = r.tasks()
	s.errorCode = r.int32()
	return s, r.done("subscription")
}

func (a assignmentInfo) encode() []byte {
	b := []byte{userDataVersion}
	b = appendTasks(b, a.active)
	b = appendTasks(b, a.standby)
	b = binary.BigEndian.AppendUint32(b, uint32(len(a.hosts)))
	for _, h := range a.hosts {
		b = appendString(b, h.server)
		b = appendTasks(b, h.active)
		b = appendTasks(b, h.standby)
	}
	return binary.BigEndian.AppendUint32(b, uint32(a.errorCode))
}

func decodeAssignment(b []byte) (assignmentInfo, error) {
	var a assignmentInfo
	r := reader{b: b}
	if v := r.byte(); r.err == nil && v != userDataVersion {
		return a, fmt.Errorf("streams: assignment user data version %d, know %d", v, userDataVersion)
	}
	a.active = r.tasks()
	a.standby = r.tasks()
	n := r.uint32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		a.hosts = append(a.hosts, hostTasks{server: r.string(), active: r.tasks(), standby: r.tasks()})
	}
	a.errorCode = r.int32()
	return a, r.done("assignment")
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendTasks(b []byte, ts []TaskID) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ts)))
	for _, t := range ts {
		b = binary.BigEndian.AppendUint32(b, uint32(t.Subtopology))
		b = binary.BigEndian.AppendUint32(b, uint32(t.Partition))
	}
	return b
}

var errShortUserData = errors.New("streams: user data too short")

// reader decodes user data; the first error sticks and later reads return zeros.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b) < n {
		r.err = errShortUserData
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) byte() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) uint32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) int32() int32 { return int32(r.uint32()) }

func (r *reader) string() string {
	b := r.take(2)
	if b == nil {
		return ""
	}
	return string(r.take(int(binary.BigEndian.Uint16(b))))
}

func (r *reader) tasks() []TaskID {
	n := r.uint32()
	if r.err == nil && uint64(n)*8 > uint64(len(r.b)) {
		r.err = errShortUserData
	}
	var ts []TaskID
	for i := uint32(0); i < n && r.err == nil; i++ {
		ts = append(ts, TaskID{Subtopology: int(r.int32()), Partition: r.int32()})
	}
	return ts
}

func (r *reader) done(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("streams: %d bytes after the %s user data", len(r.b), what)
	}
	if r.err != nil {
		return fmt.Errorf("streams: %s user data: %w", what, r.err)
	}
	return nil
}

// sortTasks orders tasks by sub-topology, then partition.
func sortTasks(ts []TaskID) []TaskID {
	slices.SortFunc(ts, compareTasks)
	return ts
}

func compareTasks(x, y TaskID) int {
	if x.Subtopology != y.Subtopology {
		return x.Subtopology - y.Subtopology
	}
	return int(x.Partition - y.Partition)
}
