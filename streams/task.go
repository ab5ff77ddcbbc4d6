package streams

import (
	"errors"
	"fmt"
	"time"
)

// emitFunc sends one record to a topic (its full name). partition is -1 to leave the choice
// to the producer's partitioner.
type emitFunc func(topic string, partition int32, key, value []byte, ts int64, headers []Header) error

// task runs one sub-topology for one partition of its source topics: its processor
// instances, its stores and its stream time. It is a deterministic core: records, a clock
// reading and an emit function go in, records come out through emit; it starts no
// goroutine and is driven by one goroutine at a time (the test driver or a stream thread).
//
// Invariants: streamTime never decreases (-1 until the first record); every punctuator
// fires at most once per call to punctuate, with the time that triggered it.
type task struct {
	id         TaskID
	appID      string
	topo       *topology
	sub        *subtopology
	nodes      map[*node]*nodeContext
	stores     map[string]stateStore
	streamTime int64
	meta       RecordMetadata
	inRecord   bool
	curTS      int64 // timestamp of the record being processed, for changelog writes
	clock      func() time.Time
	emit       emitFunc
	partitions func(topic string) (int, error) // partition count of a topic, for partitioners
	puncts     []*punctuator
	dropped    int64 // records dropped as late (past every window's grace period)
	// badRecord decides about a source record that does not deserialize: nil skips it (it
	// is counted in skipped), an error stops processing. nil fails every such record.
	badRecord func(err error) error
	skipped   int64
	// state is the task's directory and persistent stores, nil when all are in memory
	// (statetask.go).
	state *taskState
	// shared is state the nodes of one operator share within the task (a stream-stream
	// join's time tracker), by a name of the operator's; see sharedState.
	shared map[string]any
}

// nodeContext is one node inside one task.
type nodeContext struct {
	task     *task
	n        *node
	proc     procInstance
	children []*nodeContext
}

type punctuator struct {
	interval  int64
	typ       PunctuationType
	next      int64
	f         func(time.Time) error
	cancelled bool
}

func (p *punctuator) Cancel() { p.cancelled = true }

// newTask makes and initialises a task: stores are created (empty; the caller restores them
// before the first record), then every processor's Init runs, parents before children.
func newTask(t *topology, id TaskID, appID string, clock func() time.Time, emit emitFunc, partitions func(string) (int, error)) (*task, error) {
	sub := t.subs[id.Subtopology]
	tk := &task{id: id, appID: appID, topo: t, sub: sub, nodes: map[*node]*nodeContext{},
		stores: map[string]stateStore{}, streamTime: -1, curTS: -1, clock: clock, emit: emit, partitions: partitions}
	for _, name := range sub.stores {
		d := t.b.stores[name]
		var log changelogWriter
		if d.changelog {
			topic := t.topicName(appID, name+"-changelog")
			log = func(k, v []byte, ts int64) error {
				if ts < 0 {
					ts = tk.curTS
				}
				if ts < 0 {
					ts = clock().UnixMilli()
				}
				return tk.emit(topic, id.Partition, k, v, ts, nil)
			}
		}
		st, err := tk.makeStore(d, log)
		if err != nil {
			return nil, errors.Join(err, tk.closeState())
		}
		tk.stores[name] = st
	}
	for _, n := range sub.nodes {
		tk.nodes[n] = &nodeContext{task: tk, n: n}
	}
	for _, n := range sub.nodes {
		c := tk.nodes[n]
		for _, ch := range n.children {
			c.children = append(c.children, tk.nodes[ch])
		}
		if n.supplier != nil {
			c.proc = n.supplier()
		}
	}
	for _, n := range sub.nodes {
		if c := tk.nodes[n]; c.proc != nil {
			if err := c.proc.init(c); err != nil {
				return nil, errors.Join(fmt.Errorf("streams: task %s: init %s: %w", id, n.name, err), tk.closeState())
			}
		}
	}
	return tk, nil
}

// close closes every processor, then the persistent stores (releasing the task's
// directory), returning their errors joined.
func (tk *task) close() error {
	var errs []error
	for _, n := range tk.sub.nodes {
		if c := tk.nodes[n]; c.proc != nil {
			if err := c.proc.close(); err != nil {
				errs = append(errs, fmt.Errorf("streams: task %s: close %s: %w", tk.id, n.name, err))
			}
		}
	}
	errs = append(errs, tk.closeState())
	return errors.Join(errs...)
}

// process runs one record of the logical source topic through the task, then fires the
// stream-time punctuators it made due. A nil key or value is null.
func (tk *task) process(topic string, offset int64, key, value []byte, ts int64, headers []Header) error {
	src, ok := tk.sub.sources[topic]
	if !ok {
		return fmt.Errorf("streams: task %s reads no topic %q", tk.id, topic)
	}
	full := tk.topo.topicName(tk.appID, topic)
	r := rec{ts: ts, headers: headers}
	var err error
	if key != nil {
		if r.key, err = src.keyDe(full, key); err != nil {
			return tk.bad(fmt.Errorf("streams: %s partition %d offset %d: key: %w", full, tk.id.Partition, offset, err))
		}
	}
	if value != nil {
		if r.value, err = src.valDe(full, value); err != nil {
			return tk.bad(fmt.Errorf("streams: %s partition %d offset %d: value: %w", full, tk.id.Partition, offset, err))
		}
	}
	if src.timestamp != nil {
		if ts = src.timestamp(r, tk.streamTime); ts < 0 {
			tk.skipped++
			return nil
		}
		r.ts = ts
	}
	if ts > tk.streamTime {
		tk.streamTime = ts
	}
	tk.meta = RecordMetadata{Topic: full, Partition: tk.id.Partition, Offset: offset}
	tk.inRecord, tk.curTS = true, ts
	err = tk.nodes[src].forward(r)
	tk.inRecord, tk.curTS = false, -1
	if err != nil {
		return err
	}
	return tk.punctuate(StreamTime, tk.streamTime)
}

// bad is a source record that did not deserialize, as the deserialization handler decides.
func (tk *task) bad(err error) error {
	if tk.badRecord == nil {
		return err
	}
	if err := tk.badRecord(err); err != nil {
		return err
	}
	tk.skipped++
	return nil
}

// punctuate fires the punctuators of typ due at now. A punctuator that missed several
// intervals fires once, and its next time is the first interval boundary after now (as
// Kafka Streams' PunctuationSchedule).
func (tk *task) punctuate(typ PunctuationType, now int64) error {
	if now < 0 {
		return nil
	}
	for _, p := range tk.puncts {
		if p.cancelled || p.typ != typ || p.next > now {
			continue
		}
		missed := (now - p.next) / p.interval
		p.next += (missed + 1) * p.interval
		tk.curTS = now
		err := p.f(fromMillis(now))
		tk.curTS = -1
		if err != nil {
			return fmt.Errorf("streams: task %s: punctuator: %w", tk.id, err)
		}
	}
	return nil
}

func (c *nodeContext) forward(r rec) error {
	for _, ch := range c.children {
		if err := ch.receive(r); err != nil {
			return err
		}
	}
	return nil
}

func (c *nodeContext) forwardTo(child string, r rec) error {
	for _, ch := range c.children {
		if ch.n.name == child {
			return ch.receive(r)
		}
	}
	return fmt.Errorf("streams: %s has no child %q", c.n.name, child)
}

// receive is a record reaching this node from a parent.
func (c *nodeContext) receive(r rec) error {
	switch c.n.kind {
	case processorNode:
		if err := c.proc.process(r); err != nil {
			return fmt.Errorf("%s: %w", c.n.name, err)
		}
		return nil
	case sinkNode:
		return c.sink(r)
	default:
		return c.forward(r)
	}
}

func (c *nodeContext) sink(r rec) error {
	tk := c.task
	topic := tk.topo.topicName(tk.appID, c.n.topic)
	var kb, vb []byte
	var err error
	if r.key != nil {
		if kb, err = c.n.keySer(topic, r.key); err != nil {
			return fmt.Errorf("streams: %s: key: %w", c.n.name, err)
		}
	}
	if r.value != nil {
		if vb, err = c.n.valSer(topic, r.value); err != nil {
			return fmt.Errorf("streams: %s: value: %w", c.n.name, err)
		}
	}
	part := int32(-1)
	if c.n.partition != nil {
		n, err := tk.partitions(topic)
		if err != nil {
			return fmt.Errorf("streams: %s: %w", c.n.name, err)
		}
		p := c.n.partition(topic, r, n)
		if p < 0 || p >= n {
			return fmt.Errorf("streams: %s: partitioner chose partition %d of %d", c.n.name, p, n)
		}
		part = int32(p)
	}
	return tk.emit(topic, part, kb, vb, r.ts, r.headers)
}

func (c *nodeContext) schedule(iv time.Duration, typ PunctuationType, f func(time.Time) error) Cancellable {
	ms := iv.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	p := &punctuator{interval: ms, typ: typ, f: f}
	if typ == WallClockTime {
		p.next = c.task.clock().UnixMilli() + ms
	} else if c.task.streamTime >= 0 {
		p.next = c.task.streamTime + ms
	}
	c.task.puncts = append(c.task.puncts, p)
	return p
}

func (c *nodeContext) store(name string) (any, error) {
	for _, s := range c.n.stores {
		if s == name {
			return c.task.stores[name].typed(), nil
		}
	}
	return nil, fmt.Errorf("streams: processor %q is not connected to store %q", c.n.name, name)
}
