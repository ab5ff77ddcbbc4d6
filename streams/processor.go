package streams

import (
	"fmt"
	"time"
)

// Processor is the Processor API beneath the DSL (Kafka Streams' api.Processor): one instance
// per task, created by the supplier given to Process. Init is called once before the first
// record, Process for every record reaching the node, Close when the task closes. The
// methods of one instance are never called concurrently.
type Processor[KIn, VIn, KOut, VOut any] interface {
	Init(ctx ProcessorContext[KOut, VOut]) error
	Process(r Record[KIn, VIn]) error
	Close() error
}

// PunctuationType chooses the clock a punctuator follows.
type PunctuationType int

const (
	// StreamTime punctuators fire as the task's stream time (the largest record timestamp it
	// has seen) passes each interval; no records, no punctuation.
	StreamTime PunctuationType = iota
	// WallClockTime punctuators fire as the system clock (the test driver's clock in
	// streamstest) passes each interval.
	WallClockTime
)

func (p PunctuationType) String() string {
	if p == WallClockTime {
		return "WALL_CLOCK_TIME"
	}
	return "STREAM_TIME"
}

// Cancellable stops a scheduled punctuator.
type Cancellable interface{ Cancel() }

// RecordMetadata is where the record being processed came from.
type RecordMetadata struct {
	Topic     string
	Partition int32
	Offset    int64
}

// TaskID names a task: a sub-topology and the partition of its source topics it processes.
type TaskID struct {
	Subtopology int
	Partition   int32
}

func (id TaskID) String() string { return fmt.Sprintf("%d_%d", id.Subtopology, id.Partition) }

// ProcessorContext is what a Processor reaches its task through.
type ProcessorContext[K, V any] interface {
	// Forward passes r to every child of this node, in order, before returning.
	Forward(r Record[K, V]) error
	// ForwardTo passes r to the named child only.
	ForwardTo(child string, r Record[K, V]) error
	// Schedule calls f every interval of the clock typ chooses, with that clock's time.
	Schedule(interval time.Duration, typ PunctuationType, f func(now time.Time) error) Cancellable
	// StateStore returns the task's instance of a store connected to this node; assert it to
	// its type (KeyValueStore[K, V] for the key-value stores), or use GetKeyValueStore.
	StateStore(name string) (any, error)
	// TaskID is the task this processor instance runs in.
	TaskID() TaskID
	// ApplicationID is the application's application.id.
	ApplicationID() string
	// RecordMetadata is the source record being processed, false inside a punctuator.
	RecordMetadata() (RecordMetadata, bool)
	// StreamTime is the task's stream time (zero before its first record).
	StreamTime() time.Time
	// WallClockTime is the task's clock: the system clock, or the driver's in tests.
	WallClockTime() time.Time
}

// GetKeyValueStore returns the key-value store name from ctx, typed.
func GetKeyValueStore[K, V, KO, VO any](ctx ProcessorContext[KO, VO], name string) (KeyValueStore[K, V], error) {
	s, err := ctx.StateStore(name)
	if err != nil {
		return nil, err
	}
	kv, ok := s.(KeyValueStore[K, V])
	if !ok {
		return nil, fmt.Errorf("streams: store %q is %T, not a KeyValueStore of these types", name, s)
	}
	return kv, nil
}

// procInstance is a node's processor inside one task, untyped: the DSL's operators implement
// it directly, a user's Processor through procAdapter.
type procInstance interface {
	init(c *nodeContext) error
	process(r rec) error
	close() error
}

// funcProc is a stateless operator: process calls f with the node's context.
type funcProc struct {
	c *nodeContext
	f func(c *nodeContext, r rec) error
}

func (p *funcProc) init(c *nodeContext) error { p.c = c; return nil }
func (p *funcProc) process(r rec) error       { return p.f(p.c, r) }
func (p *funcProc) close() error              { return nil }

// procAdapter runs a typed Processor as a procInstance.
type procAdapter[KIn, VIn, KOut, VOut any] struct {
	p Processor[KIn, VIn, KOut, VOut]
}

func (a *procAdapter[KIn, VIn, KOut, VOut]) init(c *nodeContext) error {
	return a.p.Init(typedContext[KOut, VOut]{c})
}
func (a *procAdapter[KIn, VIn, KOut, VOut]) process(r rec) error {
	return a.p.Process(typed[KIn, VIn](r))
}
func (a *procAdapter[KIn, VIn, KOut, VOut]) close() error { return a.p.Close() }

// typedContext is a nodeContext seen through a ProcessorContext's types.
type typedContext[K, V any] struct{ c *nodeContext }

func (t typedContext[K, V]) Forward(r Record[K, V]) error { return t.c.forward(untyped(r)) }
func (t typedContext[K, V]) ForwardTo(child string, r Record[K, V]) error {
	return t.c.forwardTo(child, untyped(r))
}
func (t typedContext[K, V]) Schedule(iv time.Duration, typ PunctuationType, f func(time.Time) error) Cancellable {
	return t.c.schedule(iv, typ, f)
}
func (t typedContext[K, V]) StateStore(name string) (any, error) { return t.c.store(name) }
func (t typedContext[K, V]) TaskID() TaskID                      { return t.c.task.id }
func (t typedContext[K, V]) ApplicationID() string               { return t.c.task.appID }
func (t typedContext[K, V]) RecordMetadata() (RecordMetadata, bool) {
	return t.c.task.meta, t.c.task.inRecord
}
func (t typedContext[K, V]) StreamTime() time.Time {
	if t.c.task.streamTime < 0 {
		return time.Time{}
	}
	return fromMillis(t.c.task.streamTime)
}
func (t typedContext[K, V]) WallClockTime() time.Time { return t.c.task.clock() }
