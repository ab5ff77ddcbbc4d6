package streams

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Builder assembles a topology: the DSL functions (Stream, Table, MapValues, GroupBy, ...)
// and the Processor API (Process, AddKeyValueStore) add nodes to it. A Builder is not safe
// for concurrent use, and is not changed once handed to New or to a test driver.
//
// Nodes are named as Kafka Streams names them (KSTREAM-SOURCE-0000000000, ...), numbered in
// the order they are added, unless an operator is given Named.
type Builder struct {
	nodes    []*node
	stores   map[string]*storeDef
	internal map[string]bool // logical names of internal topics (repartition, changelog)
	counter  int
	errs     []error
	// copartitioned are groups of nodes whose source topics must have the same number of
	// partitions (the two sides of a join), checked when the application starts.
	copartitioned [][]*node
	// globals are the global tables, each read whole by every instance (global.go).
	globals []*globalDef
	// sendOld are the table nodes asked to forward each update's old value (rec.old).
	sendOld map[*node]bool
}

// NewBuilder returns an empty topology builder.
func NewBuilder() *Builder {
	return &Builder{stores: map[string]*storeDef{}, internal: map[string]bool{}}
}

type nodeKind int

const (
	sourceNode nodeKind = iota
	processorNode
	sinkNode
)

// node is one vertex of the topology. Topic names are logical: an internal topic
// (b.internal) gets the application.id as a prefix when it runs.
type node struct {
	kind     nodeKind
	name     string
	idx      int
	parents  []*node
	children []*node

	// source
	topics       []string
	keyDe, valDe func(topic string, b []byte) (any, error)
	// timestamp, when set, gives a source record its timestamp (ms) from the deserialized
	// record and the task's stream time; a negative result drops the record.
	timestamp func(r rec, streamTime int64) int64

	// processor
	supplier func() procInstance
	stores   []string

	// sink
	topic          string
	keySer, valSer func(topic string, v any) ([]byte, error)
	// partition picks the partition of a record among n; nil leaves it to the producer's
	// default partitioner (murmur2 of the key bytes, as Kafka's).
	partition func(topic string, r rec, n int) int
}

// Option configures one DSL operator.
type Option func(*options)

type options struct {
	name string
	// storeType is the type of an operator's store (WithStoreType); "" is the App's default.
	storeType StoreType
	// store and storeSerde are from Materialized: the store a derived table is kept in, and
	// the serde of its values (nil to use the table's own).
	store      string
	storeSerde any
}

// Named names an operator's processor node, and the store and internal topics of a stateful
// one (as Kafka Streams' Named and Materialized.as): Count(g, Named("counts")) keeps its
// state in store "counts", changelog "<application.id>-counts-changelog".
func Named(name string) Option { return func(o *options) { o.name = name } }

func opts(os []Option) options {
	var o options
	for _, f := range os {
		f(&o)
	}
	return o
}

// newName returns the next generated node name with Kafka's prefix, e.g. KSTREAM-FILTER-.
func (b *Builder) newName(prefix string) string {
	n := fmt.Sprintf("%s%010d", prefix, b.counter)
	b.counter++
	return n
}

// nameOr is name when given, else a generated one.
func (b *Builder) nameOr(o options, prefix string) string {
	if o.name != "" {
		return o.name
	}
	return b.newName(prefix)
}

func (b *Builder) add(n *node, parents ...*node) *node {
	for _, m := range b.nodes {
		if m.name == n.name {
			b.errs = append(b.errs, fmt.Errorf("streams: two nodes named %q", n.name))
		}
	}
	n.idx = len(b.nodes)
	b.nodes = append(b.nodes, n)
	for _, p := range parents {
		n.parents = append(n.parents, p)
		p.children = append(p.children, n)
	}
	return n
}

func (b *Builder) addStore(d storeDef) {
	if _, ok := b.stores[d.name]; ok {
		b.errs = append(b.errs, fmt.Errorf("streams: two stores named %q", d.name))
		return
	}
	b.stores[d.name] = &d
	if d.changelog {
		b.internal[d.name+"-changelog"] = true
	}
}

// subtopology is a connected part of the topology: nodes linked by edges or sharing a store.
// Internal repartition topics cut the graph, so the part upstream of a repartition and the
// part downstream are separate sub-topologies, as in Kafka Streams.
type subtopology struct {
	id      int
	nodes   []*node          // sources first, then the rest, each in the order added
	sources map[string]*node // logical topic -> source node
	stores  []string
}

// topology is a Builder's graph cut into sub-topologies, ready to run.
type topology struct {
	b       *Builder
	subs    []*subtopology
	byTopic map[string]*subtopology // logical source topic -> its sub-topology
	// state is the App's state directory; nil (the test driver) keeps every store in memory.
	state *stateDirectory
	// globals are this instance's global stores, by store name (global.go).
	globals map[string]*globalStore
}

// build checks the graph and cuts it into sub-topologies.
func (b *Builder) build() (*topology, error) {
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	if len(b.nodes) == 0 {
		return nil, errors.New("streams: empty topology")
	}
	parent := make([]int, len(b.nodes))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, c int) {
		ra, rc := find(a), find(c)
		if ra < rc {
			parent[rc] = ra
		} else {
			parent[ra] = rc
		}
	}
	byStore := map[string]int{}
	for _, n := range b.nodes {
		for _, c := range n.children {
			union(n.idx, c.idx)
		}
		for _, s := range n.stores {
			if _, ok := b.stores[s]; !ok {
				return nil, fmt.Errorf("streams: node %q uses store %q, which is not in the topology", n.name, s)
			}
			if o, ok := byStore[s]; ok {
				union(n.idx, o)
			} else {
				byStore[s] = n.idx
			}
		}
	}
	t := &topology{b: b, byTopic: map[string]*subtopology{}}
	byRoot := map[int]*subtopology{}
	for _, n := range b.nodes {
		r := find(n.idx)
		s, ok := byRoot[r]
		if !ok {
			s = &subtopology{id: len(t.subs), sources: map[string]*node{}}
			byRoot[r] = s
			t.subs = append(t.subs, s)
		}
		s.nodes = append(s.nodes, n)
		for _, st := range n.stores {
			if !slices.Contains(s.stores, st) {
				s.stores = append(s.stores, st)
			}
		}
		for _, topic := range n.topics {
			if _, dup := t.byTopic[topic]; dup {
				return nil, fmt.Errorf("streams: topic %q is read by two source nodes", topic)
			}
			t.byTopic[topic] = s
			s.sources[topic] = n
		}
	}
	for _, s := range t.subs {
		slices.SortStableFunc(s.nodes, func(a, c *node) int {
			return boolInt(a.kind != sourceNode) - boolInt(c.kind != sourceNode)
		})
		if len(s.sources) == 0 {
			return nil, fmt.Errorf("streams: sub-topology %d has no source topic", s.id)
		}
	}
	t.globals = b.makeGlobals()
	return t, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// topicName is the topic a logical name stands for when application appID runs: internal
// topics get the application.id as prefix.
func (t *topology) topicName(appID, logical string) string {
	if t.b.internal[logical] {
		return appID + "-" + logical
	}
	return logical
}

// Describe prints the topology as Kafka Streams' TopologyDescription does: each
// sub-topology with its Source, Processor and Sink nodes, arrows to children (-->) and from
// parents (<--). Internal topics appear by their names without the application.id.
func (b *Builder) Describe() string {
	t, err := b.build()
	if err != nil {
		return "invalid topology: " + err.Error()
	}
	var sb strings.Builder
	sb.WriteString("Topologies:\n")
	for _, s := range t.subs {
		fmt.Fprintf(&sb, "   Sub-topology: %d\n", s.id)
		for _, n := range s.nodes {
			switch n.kind {
			case sourceNode:
				fmt.Fprintf(&sb, "    Source: %s (topics: [%s])\n", n.name, strings.Join(n.topics, ", "))
			case processorNode:
				fmt.Fprintf(&sb, "    Processor: %s (stores: [%s])\n", n.name, strings.Join(n.stores, ", "))
			case sinkNode:
				fmt.Fprintf(&sb, "    Sink: %s (topic: %s)\n", n.name, n.topic)
			}
			if n.kind != sinkNode {
				sb.WriteString("      --> " + names(n.children) + "\n")
			}
			if n.kind != sourceNode {
				sb.WriteString("      <-- " + names(n.parents) + "\n")
			}
		}
		sb.WriteString("\n")
	}
	b.describeGlobals(&sb, len(t.subs))
	return sb.String()
}

func names(ns []*node) string {
	if len(ns) == 0 {
		return "none"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = n.name
	}
	return strings.Join(s, ", ")
}
