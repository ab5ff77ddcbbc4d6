package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// Publisher is the broker's follower of the metadata log. It applies committed batches (and
// snapshots) to a private state.Image, the same state machine the controllers run, and after
// each Apply or ApplyBatch publishes a new immutable Image.
//
// A publish rebuilds only what the applied records touched: the topics named by topic,
// partition, removal and topic-config records, the brokers named by broker records, the
// config maps named by broker-config records, the ACLs or the SCRAM credentials when a
// record of theirs applied. Everything else is shared with the previous
// Image, pointer for pointer (see Image). One ISR change of a topic with P partitions costs
// a copy of that topic's P Partition values and of the two topic maps (one pointer per
// topic), however many partitions the cluster has. A snapshot rebuilds everything, keeping
// the previous pointer of each topic and broker whose contents did not change.
//
// Lock rule: Apply and ApplyBatch are called from one goroutine (the broker's metadata
// loop); st and every Image under construction belong to it. Readers call Image without
// locking. mu guards the subscriber list and the wake-up channel of WaitForOffset.
//
// Order of a publish: the new Image is stored (Image returns it from then on), the
// subscribers run with (previous, new), and only then does WaitForOffset release waiters
// for the new offset. So a caller that waited for offset N sees an Image at N or later,
// and every subscriber has already seen that Image.
type Publisher struct {
	st      *state.Image // owned by the applying goroutine
	cur     atomic.Pointer[Image]
	settled atomic.Int64 // offset of the last Image whose subscribers have all run
	mu      struct {
		sync.Mutex
		subs    []func(prev, next *Image)
		changed chan struct{} // closed (and replaced) when settled moves
	}
}

// Entry is one committed entry of the metadata log: a batch of records at Offset or, when
// Snapshot is set, a state.Image snapshot (Records are then ignored) that replaces
// everything before it.
type Entry struct {
	Offset   int64
	Records  []state.Record
	Snapshot []byte
}

// NewPublisher returns a publisher of the empty image (offset -1).
func NewPublisher() *Publisher {
	p := &Publisher{st: state.NewImage()}
	p.cur.Store(&Image{
		Topics: map[string]*Topic{}, byID: map[TopicID]*Topic{},
		Brokers: map[int32]*Broker{}, NodeConfigs: map[int32]map[string]string{}, Offset: -1,
	})
	p.settled.Store(-1)
	p.mu.changed = make(chan struct{})
	return p
}

// Image returns the newest published image; never nil.
func (p *Publisher) Image() *Image { return p.cur.Load() }

// Subscribe registers fn to be called after every publish with the previous and the new
// image, synchronously on the applying goroutine, in publish order. fn must not block for
// long (it holds up the metadata loop) and must not wait for an offset not yet published.
func (p *Publisher) Subscribe(fn func(prev, next *Image)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.subs = append(p.mu.subs, fn)
}

// Apply applies one committed batch at offset and publishes the result. A record the state
// machine rejects (state.ErrRecordRejected) is skipped, the rest apply, the image is
// published all the same and the error is returned: every node skips the same records.
// The state image keeps references into recs (as the controller's does): they must not be
// modified afterwards.
func (p *Publisher) Apply(offset int64, recs []state.Record) error {
	return p.ApplyBatch([]Entry{{Offset: offset, Records: recs}})
}

// ApplyBatch applies entries in order and publishes once at the end, so a start-up replay
// of many entries builds one Image. An Entry with a Snapshot restores it (state.Restore)
// and everything is rebuilt. Entries at or below the offset already applied are skipped
// (a catch-up read may overlap what was applied), as is a snapshot no newer than it. A
// snapshot that does not decode stops the batch: what applied before it is published and
// the error returned.
func (p *Publisher) ApplyBatch(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	var d delta
	var errs []error
	applied := false
	for _, e := range entries {
		if e.Snapshot != nil {
			st, err := state.Restore(e.Snapshot)
			if err != nil {
				errs = append(errs, fmt.Errorf("metadata: snapshot at offset %d: %w", e.Offset, err))
				break
			}
			if st.Offset() > p.st.Offset() {
				p.st, d, applied = st, delta{full: true}, true
			}
			continue
		}
		if e.Offset <= p.st.Offset() {
			continue
		}
		applied = true
		for _, r := range e.Records {
			d.note(r)
		}
		if err := p.st.Apply(e.Offset, e.Records); err != nil {
			errs = append(errs, fmt.Errorf("metadata: %w", err))
		}
	}
	if applied {
		p.publish(&d)
	}
	return errors.Join(errs...)
}

// WaitForOffset returns once an Image at offset or later is published and its subscribers
// have run, or with ctx's error.
func (p *Publisher) WaitForOffset(ctx context.Context, offset int64) error {
	for {
		p.mu.Lock()
		ch := p.mu.changed
		p.mu.Unlock()
		if p.settled.Load() >= offset { // read after ch: a later publish closes ch
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// publish builds the next Image from the previous one and d, stores it, runs the
// subscribers and wakes WaitForOffset.
func (p *Publisher) publish(d *delta) {
	prev := p.cur.Load()
	var next *Image
	if d.full {
		next = p.rebuild(prev)
	} else {
		next = p.patch(prev, d)
	}
	p.cur.Store(next)

	p.mu.Lock()
	subs := p.mu.subs
	p.mu.Unlock()
	for _, fn := range subs {
		fn(prev, next)
	}

	p.settled.Store(next.Offset)
	p.mu.Lock()
	ch := p.mu.changed
	p.mu.changed = make(chan struct{})
	p.mu.Unlock()
	close(ch)
}

// patch builds the Image that follows prev when d's records have applied to p.st.
func (p *Publisher) patch(prev *Image, d *delta) *Image {
	next := *prev
	next.Offset, next.NextProducerID = p.st.Offset(), p.st.NextProducerID()
	if d.empty() {
		return &next
	}
	if len(d.topics) > 0 || len(d.topicConfigs) > 0 {
		p.patchTopics(prev, &next, d)
	}
	if len(d.brokers) > 0 {
		next.Brokers = maps.Clone(prev.Brokers)
		for id := range d.brokers {
			if b := p.st.Broker(id); b != nil {
				next.Brokers[id] = newBroker(b)
			} else {
				delete(next.Brokers, id)
			}
		}
	}
	if d.clusterConfigs {
		next.BrokerConfigs = cloneConfigs(p.st.Configs(state.ConfigResource{Type: state.ResourceBroker}))
	}
	if d.acls {
		next.acls = newACLSet(p.st)
	}
	if d.scram {
		next.scram = newScramSet(p.st)
	}
	if d.tokens {
		next.tokens = newTokens(p.st)
	}
	if d.clientQuotas {
		next.ClientQuotas = clientQuotas(p.st)
	}
	if len(d.nodeConfigs) > 0 {
		next.NodeConfigs = maps.Clone(prev.NodeConfigs)
		for id := range d.nodeConfigs {
			if m := p.nodeConfigs(id); m != nil {
				next.NodeConfigs[id] = m
			} else {
				delete(next.NodeConfigs, id)
			}
		}
	}
	if len(d.groupConfigs) > 0 {
		next.GroupConfigs = maps.Clone(prev.GroupConfigs)
		if next.GroupConfigs == nil {
			next.GroupConfigs = map[string]map[string]string{}
		}
		for g := range d.groupConfigs {
			if m := cloneConfigs(p.st.Configs(state.ConfigResource{Type: state.ResourceGroup, Name: g})); m != nil {
				next.GroupConfigs[g] = m
			} else {
				delete(next.GroupConfigs, g)
			}
		}
	}
	return &next
}

// patchTopics replaces next's topic maps with copies in which every topic d names is
// rebuilt, added or removed.
func (p *Publisher) patchTopics(prev, next *Image, d *delta) {
	for name := range d.topicConfigs {
		if t := p.st.Topic(name); t != nil {
			d.topic(t.ID).configs = true
		}
	}
	next.Topics, next.byID = maps.Clone(prev.Topics), maps.Clone(prev.byID)
	// Removals first: a batch may delete a topic and create another of the same name.
	for id := range d.topics {
		if old := prev.byID[TopicID(id)]; old != nil {
			delete(next.byID, old.ID)
			if next.Topics[old.Name] == old {
				delete(next.Topics, old.Name)
			}
		}
	}
	for id, td := range d.topics {
		t := p.st.TopicByID(id)
		if t == nil {
			continue
		}
		var nt *Topic
		if old := prev.byID[TopicID(id)]; old != nil && !td.whole && old.Name == t.Name {
			nt = patchTopic(p.st, old, t, td.parts, td.configs)
		} else {
			nt = newTopic(p.st, t)
		}
		next.Topics[nt.Name], next.byID[nt.ID] = nt, nt
	}
}

// rebuild builds the whole Image from p.st after a snapshot, re-using prev's topic and
// broker pointers where the contents are unchanged (the broker then sees no change there).
func (p *Publisher) rebuild(prev *Image) *Image {
	st := p.st
	next := &Image{
		Topics: map[string]*Topic{}, byID: map[TopicID]*Topic{}, Brokers: map[int32]*Broker{},
		NodeConfigs: map[int32]map[string]string{},
		Offset:      st.Offset(), NextProducerID: st.NextProducerID(),
	}
	for _, name := range st.TopicNames() {
		nt := newTopic(st, st.Topic(name))
		if old := prev.Topics[name]; old != nil && equalTopic(old, nt) {
			nt = old
		}
		next.Topics[name], next.byID[nt.ID] = nt, nt
	}
	for _, b := range st.Brokers() {
		nb := newBroker(b)
		if old := prev.Brokers[b.ID]; old != nil && equalBroker(old, nb) {
			nb = old
		}
		next.Brokers[b.ID] = nb
	}
	next.BrokerConfigs = cloneConfigs(st.Configs(state.ConfigResource{Type: state.ResourceBroker}))
	if maps.Equal(next.BrokerConfigs, prev.BrokerConfigs) {
		next.BrokerConfigs = prev.BrokerConfigs
	}
	if next.acls = newACLSet(st); equalACLSets(next.acls, prev.acls) {
		next.acls = prev.acls
	}
	if next.scram = newScramSet(st); equalScramSets(next.scram, prev.scram) {
		next.scram = prev.scram
	}
	next.tokens = newTokens(st)
	next.ClientQuotas = clientQuotas(st)
	for _, r := range st.ConfigResources() {
		if r.Type == state.ResourceGroup {
			m := cloneConfigs(st.Configs(r))
			if old, ok := prev.GroupConfigs[r.Name]; ok && maps.Equal(old, m) {
				m = old
			}
			if next.GroupConfigs == nil {
				next.GroupConfigs = map[string]map[string]string{}
			}
			next.GroupConfigs[r.Name] = m
			continue
		}
		if r.Type != state.ResourceBroker || r.Name == "" {
			continue
		}
		if id, ok := nodeID(r.Name); ok {
			m := cloneConfigs(st.Configs(r))
			if old, ok := prev.NodeConfigs[id]; ok && maps.Equal(old, m) {
				m = old
			}
			next.NodeConfigs[id] = m
		}
	}
	return next
}

// nodeConfigs copies broker id's own overrides out of p.st (nil when it has none).
func (p *Publisher) nodeConfigs(id int32) map[string]string {
	return cloneConfigs(p.st.Configs(state.ConfigResource{Type: state.ResourceBroker, Name: strconv.Itoa(int(id))}))
}
