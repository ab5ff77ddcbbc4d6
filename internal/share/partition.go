package share

import (
	"errors"
	"fmt"
)

// State is the delivery state of one in-flight record.
type State uint8

const (
	Available    State = iota // may be acquired by the next fetch
	Acquired                  // held by one member until acknowledged or its lock expires
	Acknowledged              // ACCEPTed: never delivered again
	Archived                  // REJECTed, or past the delivery count limit: never delivered again
)

func (s State) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// AckType is an acknowledgement type of ShareFetch and ShareAcknowledge (KIP-932).
type AckType int8

const (
	AckGap     AckType = 0 // the offset holds no record (compacted, control record): archived
	AckAccept  AckType = 1 // processed: acknowledged
	AckRelease AckType = 2 // not processed: available again at once, delivery count kept
	AckReject  AckType = 3 // unprocessable: archived
)

// Sentinel errors, translated to Kafka codes in internal/api.
var (
	// ErrInvalidRecordState: an acknowledgement names an offset the member does not hold
	// (INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("record is not acquired by this member")
	// ErrInvalidAck: an unknown acknowledgement type or a malformed range (INVALID_REQUEST).
	ErrInvalidAck = errors.New("invalid acknowledgement")
)

// Config is what a Partition acts on; every field is a Kafka key.
type Config struct {
	MaxLocks       int   // group.share.partition.max.record.locks (2000)
	DeliveryLimit  int16 // group.share.delivery.count.limit (5)
	LockDurationMs int64 // group.share.record.lock.duration.ms (30000)
}

// record is the state of one in-flight offset.
type record struct {
	state      State
	deliveries int16  // times acquired
	owner      string // member holding it while Acquired
	deadline   int64  // lock expiry (ms) while Acquired
}

// Run is a run of consecutive offsets acquired together with one delivery count:
// ShareFetch's AcquiredRecords.
type Run struct {
	First, Last int64
	Deliveries  int16
}

// Partition is the state of one share-partition on the partition leader. It is not safe for
// concurrent use (Manager serializes it). recs[i] is the record at offset start+i.
type Partition struct {
	cfg   Config
	start int64
	recs  []record
}

// NewPartition starts a share-partition whose first record to deliver is at start (the log
// end offset for share.auto.offset.reset=latest, the log start offset for earliest).
func NewPartition(cfg Config, start int64) *Partition {
	return &Partition{cfg: cfg, start: start}
}

// SetConfig makes cfg what p acts on from now on (a group's share.record.lock.duration.ms
// and the broker's group.share.* settings may change at any time): locks taken later expire
// after the new LockDurationMs; locks already held keep their deadlines.
func (p *Partition) SetConfig(cfg Config) { p.cfg = cfg }

// Start is the share-partition start offset: every record below it is acknowledged or
// archived.
func (p *Partition) Start() int64 { return p.start }

// End is the first offset never acquired.
func (p *Partition) End() int64 { return p.start + int64(len(p.recs)) }

// Finished is the number of in-flight records acknowledged or archived (above Start, behind
// a record still in play): with Start it gives a share-partition's lag.
func (p *Partition) Finished() int64 {
	n := int64(0)
	for i := range p.recs {
		if st := p.recs[i].state; st == Acknowledged || st == Archived {
			n++
		}
	}
	return n
}

// StateOf reports the state and delivery count of an offset; below Start it is
// Acknowledged (or Archived, not distinguished once forgotten), at End and past it
// Available with no delivery.
func (p *Partition) StateOf(off int64) (State, int16) {
	switch {
	case off < p.start:
		return Acknowledged, 0
	case off >= p.End():
		return Available, 0
	}
	r := p.recs[off-p.start]
	return r.state, r.deliveries
}

// FirstAvailable is the lowest offset below limit that Acquire would give out now: the first
// Available record of the window, else End when the window has room; -1 when there is none.
// A fetch reads the log from it.
func (p *Partition) FirstAvailable(nowMs, limit int64) int64 {
	p.Expire(nowMs)
	for i := range p.recs {
		off := p.start + int64(i)
		if off >= limit {
			return -1
		}
		if p.recs[i].state == Available {
			return off
		}
	}
	if p.End() < limit && len(p.recs) < p.cfg.MaxLocks {
		return p.End()
	}
	return -1
}

// Acquire acquires for member up to max records of [.., limit) that are Available: first
// those released or expired inside the window, then new ones from End up to limit (the high
// watermark, or the end of the batches read), while the window stays within MaxLocks. Locks
// expire at nowMs + LockDurationMs. It returns the runs acquired, in offset order.
func (p *Partition) Acquire(member string, nowMs, limit int64, max int) []Run {
	return p.AcquireSkipping(member, nowMs, limit, max, nil)
}

// AcquireSkipping is Acquire where the Available offsets skip reports (records of aborted
// transactions, for a read_committed share group) are archived instead of acquired, as
// Kafka's share-partition archives them: never delivered, not counted against max.
func (p *Partition) AcquireSkipping(member string, nowMs, limit int64, max int, skip func(off int64) bool) []Run {
	p.Expire(nowMs)
	defer p.advance()
	var out []Run
	take := func(off int64, r *record) {
		if skip != nil && skip(off) {
			r.state, r.owner, r.deadline = Archived, "", 0
			return
		}
		r.state, r.owner, r.deadline = Acquired, member, nowMs+p.cfg.LockDurationMs
		r.deliveries++
		if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].Deliveries == r.deliveries {
			out[n-1].Last = off
		} else {
			out = append(out, Run{First: off, Last: off, Deliveries: r.deliveries})
		}
		max--
	}
	for i := range p.recs {
		if max <= 0 || p.start+int64(i) >= limit {
			return out
		}
		if p.recs[i].state == Available {
			take(p.start+int64(i), &p.recs[i])
		}
	}
	for max > 0 && p.End() < limit && len(p.recs) < p.cfg.MaxLocks {
		p.recs = append(p.recs, record{})
		take(p.End()-1, &p.recs[len(p.recs)-1])
	}
	return out
}

// Acknowledge applies one acknowledgement of [first, last] by member. Every offset must be
// Acquired by member, or nothing changes and the error is ErrInvalidRecordState.
func (p *Partition) Acknowledge(member string, first, last int64, t AckType, nowMs int64) error {
	if last < first || t < AckGap || t > AckReject {
		return ErrInvalidAck
	}
	p.Expire(nowMs)
	if first < p.start || last >= p.End() {
		return ErrInvalidRecordState
	}
	for off := first; off <= last; off++ {
		if r := p.recs[off-p.start]; r.state != Acquired || r.owner != member {
			return ErrInvalidRecordState
		}
	}
	for off := first; off <= last; off++ {
		r := &p.recs[off-p.start]
		switch t {
		case AckAccept:
			r.state = Acknowledged
		case AckGap, AckReject:
			r.state = Archived
		case AckRelease:
			p.releaseLocked(r)
		}
		r.owner, r.deadline = "", 0
	}
	p.advance()
	return nil
}

// ReleaseMember makes every record member holds available again (the member left, or its
// share session closed), as a RELEASE of each would.
func (p *Partition) ReleaseMember(member string) {
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.owner == member {
			p.releaseLocked(r)
			r.owner, r.deadline = "", 0
		}
	}
	p.advance()
}

// Expire ends every acquisition lock whose deadline is at or before nowMs: the record is
// available again, or archived once its delivery count reached DeliveryLimit.
func (p *Partition) Expire(nowMs int64) {
	expired := false
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.deadline <= nowMs {
			p.releaseLocked(r)
			r.owner, r.deadline = "", 0
			expired = true
		}
	}
	if expired {
		p.advance()
	}
}

// NextDeadline is the earliest lock deadline, or -1 when nothing is acquired.
func (p *Partition) NextDeadline() int64 {
	next := int64(-1)
	for i := range p.recs {
		if r := p.recs[i]; r.state == Acquired && (next < 0 || r.deadline < next) {
			next = r.deadline
		}
	}
	return next
}

// SkipTo moves the window to begin no earlier than off (the log start offset moved past it
// by retention or DeleteRecords): records below off are forgotten whatever their state.
func (p *Partition) SkipTo(off int64) {
	if off <= p.start {
		return
	}
	if n := off - p.start; n >= int64(len(p.recs)) {
		p.recs = p.recs[:0]
	} else {
		p.recs = append(p.recs[:0], p.recs[n:]...)
	}
	p.start = off
}

// releaseLocked makes an acquired record available again, or archives it when its
// delivery count reached the limit.
func (p *Partition) releaseLocked(r *record) {
	if r.deliveries >= p.cfg.DeliveryLimit {
		r.state = Archived
	} else {
		r.state = Available
	}
}

// advance moves start past the acknowledged and archived records at the window's head.
func (p *Partition) advance() {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) {
		n++
	}
	if n > 0 {
		p.recs = append(p.recs[:0], p.recs[n:]...)
		p.start += int64(n)
	}
}
