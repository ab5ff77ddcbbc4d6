package streams

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/streams/serde"
)

// GlobalKTable is a table every instance of an application holds whole (Kafka Streams'
// GlobalKTable): its store reads every partition of its topic, is restored on start from
// the topic itself (it has no changelog: the topic is one) and kept up to date as the topic
// grows, apart from the tasks. A stream joins it by any key it derives from its records
// (JoinGlobal), with no repartition and no co-partitioning.
type GlobalKTable[K, V any] struct {
	b     *Builder
	store string
}

// StoreName is the name of the global store.
func (g GlobalKTable[K, V]) StoreName() string { return g.store }

// globalDef declares a global table: its topic and store, and the names of the two nodes
// Describe shows for it (a source and a KTABLE-SOURCE processor).
type globalDef struct {
	topic, store         string
	sourceName, procName string
	make                 func() stateStore
}

// globalStore is an instance's store of one global table. The test driver applies records
// on its one goroutine; the runtime's global thread applies them holding App.mu, which
// every reader (a task processing) holds too.
type globalStore struct {
	def   *globalDef
	store stateStore
}

// GlobalTable is the global table of topic, read with serdes ks and vs; a null value
// deletes its key. Named names the store (default <topic>-STATE-STORE-NNNNNNNNNN, as Kafka
// Streams).
func GlobalTable[K, V any](b *Builder, topic string, ks serde.Serde[K], vs serde.Serde[V], o ...Option) GlobalKTable[K, V] {
	op := opts(o)
	store := op.name
	if store == "" {
		store = b.newName(topic + "-STATE-STORE-")
	}
	def := newMemKV(store, ks, vs)
	for _, g := range b.globals {
		if g.topic == topic || g.store == store {
			b.errs = append(b.errs, fmt.Errorf("streams: global table %q of topic %q declared twice", store, topic))
		}
	}
	if _, ok := b.stores[store]; ok {
		b.errs = append(b.errs, fmt.Errorf("streams: two stores named %q", store))
	}
	g := &globalDef{topic: topic, store: store, sourceName: b.newName("KSTREAM-SOURCE-"), procName: b.newName("KTABLE-SOURCE-"),
		make: func() stateStore { return def.make(nil) }}
	b.globals = append(b.globals, g)
	return GlobalKTable[K, V]{b: b, store: store}
}

// makeGlobals makes an instance's empty global stores.
func (b *Builder) makeGlobals() map[string]*globalStore {
	m := map[string]*globalStore{}
	for _, g := range b.globals {
		m[g.store] = &globalStore{def: g, store: g.make()}
	}
	return m
}

// globalByTopic is the global store fed by topic, nil if none is.
func (t *topology) globalByTopic(topic string) *globalStore {
	for _, g := range t.globals {
		if g.def.topic == topic {
			return g
		}
	}
	return nil
}

// apply is one record of the global topic: a null key is skipped, a null value deletes.
func (g *globalStore) apply(key, value []byte) {
	if key == nil {
		return
	}
	g.store.restore(key, value)
}

func (b *Builder) describeGlobals(sb *strings.Builder, first int) {
	for i, g := range b.globals {
		fmt.Fprintf(sb, "   Sub-topology: %d for global store (will not generate tasks)\n", first+i)
		fmt.Fprintf(sb, "    Source: %s (topics: [%s])\n      --> %s\n", g.sourceName, g.topic, g.procName)
		fmt.Fprintf(sb, "    Processor: %s (stores: [%s])\n      --> none\n      <-- %s\n\n", g.procName, g.store, g.sourceName)
	}
}

// JoinGlobal enriches each record of s with the value that the global table g holds for
// the key f derives from the record (Kafka's KStream.join(GlobalKTable, KeyValueMapper,
// ValueJoiner)); records whose derived key is not in g, and records with a null value, are
// dropped. The lookup is into g as this instance holds it when the record is processed.
func JoinGlobal[K, V, KG, VG, VR any](s KStream[K, V], g GlobalKTable[KG, VG], f func(K, V) KG, joiner func(v V, vg VG) VR, o ...Option) KStream[K, VR] {
	return globalJoin(s, g, f, "KSTREAM-JOIN-", o, func(v V, vg VG, found bool) (VR, bool) {
		if !found {
			var z VR
			return z, false
		}
		return joiner(v, vg), true
	})
}

// LeftJoinGlobal is JoinGlobal keeping the records whose derived key is not in g: joiner
// gets found false and the zero value for them.
func LeftJoinGlobal[K, V, KG, VG, VR any](s KStream[K, V], g GlobalKTable[KG, VG], f func(K, V) KG, joiner func(v V, vg VG, found bool) VR, o ...Option) KStream[K, VR] {
	return globalJoin(s, g, f, "KSTREAM-LEFTJOIN-", o, func(v V, vg VG, found bool) (VR, bool) {
		return joiner(v, vg, found), true
	})
}

func globalJoin[K, V, KG, VG, VR any](s KStream[K, V], g GlobalKTable[KG, VG], f func(K, V) KG, prefix string, o []Option, join func(V, VG, bool) (VR, bool)) KStream[K, VR] {
	store := g.store
	n := s.b.add(&node{kind: processorNode, name: s.b.nameOr(opts(o), prefix), supplier: func() procInstance {
		return &funcProcInit{initf: func(c *nodeContext) (func(c *nodeContext, r rec) error, error) {
			gs, ok := c.task.topo.globals[store]
			if !ok {
				return nil, fmt.Errorf("streams: no global store %q", store)
			}
			kv, ok := gs.store.typed().(KeyValueStore[KG, VG])
			if !ok {
				return nil, fmt.Errorf("streams: global store %q is %T", store, gs.store.typed())
			}
			return func(c *nodeContext, r rec) error {
				if r.value == nil {
					return nil
				}
				vg, found, err := kv.Get(f(as[K](r.key), r.value.(V)))
				if err != nil {
					return err
				}
				vr, ok := join(r.value.(V), vg, found)
				if !ok {
					return nil
				}
				r.value = vr
				return c.forward(r)
			}, nil
		}}
	}}, s.n)
	return KStream[K, VR]{b: s.b, n: n, ks: s.ks, vs: keep[V, VR](s.vs), keyChanged: s.keyChanged}
}

// funcProcInit is a processor whose function is made at init, in its task.
type funcProcInit struct {
	initf func(c *nodeContext) (func(c *nodeContext, r rec) error, error)
	c     *nodeContext
	f     func(c *nodeContext, r rec) error
}

func (p *funcProcInit) init(c *nodeContext) error {
	f, err := p.initf(c)
	p.c, p.f = c, f
	return err
}
func (p *funcProcInit) process(r rec) error { return p.f(p.c, r) }
func (p *funcProcInit) close() error        { return nil }

// globalThread keeps an App's global stores: startGlobal reads every partition of every
// global topic from its start to the end it has when the App starts (the restore), then
// run applies what the topics get from then on, holding App.mu for each batch, until its
// context is done.
type globalThread struct {
	a      *App
	cl     *kgo.Client
	byName map[string]*globalStore // full topic name -> store
	wg     sync.WaitGroup
}

// startGlobal restores the global stores and starts keeping them; stop ends that.
func (a *App) startGlobal(ctx context.Context) (stop func(), err error) {
	if len(a.topo.globals) == 0 {
		return func() {}, nil
	}
	g := &globalThread{a: a, byName: map[string]*globalStore{}}
	var topics []string
	for _, gs := range a.topo.globals {
		g.byName[gs.def.topic] = gs
		topics = append(topics, gs.def.topic)
	}
	td, err := a.admin.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("streams: list global topics: %w", err)
	}
	for _, topic := range topics {
		if d, ok := td[topic]; !ok || d.Err != nil {
			return nil, fmt.Errorf("streams: global table topic %q: missing (%v)", topic, d.Err)
		}
	}
	isolation := kgo.ReadUncommitted()
	ends, err := a.admin.ListEndOffsets(ctx, topics...)
	if a.cfg.Guarantee == ExactlyOnceV2 {
		isolation = kgo.ReadCommitted()
		ends, err = a.admin.ListCommittedOffsets(ctx, topics...)
	}
	if err != nil {
		return nil, fmt.Errorf("streams: global topics' end offsets: %w", err)
	}
	starts, err := a.admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("streams: global topics' start offsets: %w", err)
	}
	end := map[string]map[int32]int64{}
	pending := 0
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		if o.Err == nil && s.Err == nil && s.Offset < o.Offset {
			if end[o.Topic] == nil {
				end[o.Topic] = map[int32]int64{}
			}
			end[o.Topic][o.Partition] = o.Offset
			pending++
		}
	})
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords()}, a.cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("streams: global client: %w", err)
	}
	g.cl = cl
	restored := 0
	for pending > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			cl.Close()
			return nil, err
		}
		a.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				g.byName[r.Topic].apply(r.Key, r.Value)
				restored++
			}
			if e, ok := end[r.Topic][r.Partition]; ok && r.Offset+1 >= e {
				delete(end[r.Topic], r.Partition)
				pending--
			}
		})
		a.mu.Unlock()
	}
	a.log.Info("streams: restored global stores", "records", restored)
	gctx, cancel := context.WithCancel(ctx)
	g.wg.Add(1)
	go g.run(gctx)
	return func() { cancel(); g.wg.Wait(); cl.Close() }, nil
}

func (g *globalThread) run(ctx context.Context) {
	defer g.wg.Done()
	for {
		fs := g.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			g.a.log.Warn("streams: global fetch error", "topic", topic, "partition", p, "err", err)
		})
		g.a.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				g.byName[r.Topic].apply(r.Key, r.Value)
			}
		})
		g.a.mu.Unlock()
	}
}
