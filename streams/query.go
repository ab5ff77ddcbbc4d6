package streams

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/streams/serde"
)

// Interactive queries, as Kafka Streams': Store reads the instances of a key-value store
// that this App's tasks hold; MetadataForKey and AllMetadata tell which instance
// (Config.ApplicationServer) hosts a key or a store, from what every instance shared
// through the group's assignment, so an application can answer a lookup itself or forward
// it to the instance that can.

// ErrInvalidStateStore is Kafka Streams' InvalidStateStoreException: the store cannot be
// queried here now (the App is not running, the store's tasks are restoring, or no task of
// it runs on this instance: it may have migrated). Errors of Store and of a store's reads
// wrap it.
var ErrInvalidStateStore = errors.New("streams: invalid state store")

// ErrUnknownStateStore is Kafka Streams' UnknownStateStoreException: the topology has no
// store of that name. It wraps ErrInvalidStateStore.
var ErrUnknownStateStore = fmt.Errorf("%w: unknown state store", ErrInvalidStateStore)

// ErrMetadataNotAvailable is KeyQueryMetadata.NOT_AVAILABLE: the App has not been assigned
// its tasks yet (starting, or rebalancing), or has no ApplicationServer.
var ErrMetadataNotAvailable = errors.New("streams: metadata not available")

// queryState is the set of tasks whose stores may be queried.
//
// Lock rules: the stream thread holds the write lock while tasks process records (stores
// change only under it); a query holds the read lock while it reads. A task is published
// only once restored; restoring marks tasks being restored (their stores are written by the
// restore without the lock and must not be read). Order: App.mu, then query, then
// standbys.mu.
type queryState struct {
	sync.RWMutex
	tasks     map[TaskID]*task
	restoring map[TaskID]bool
}

func (a *App) queryRestoring(tasks []*task) {
	a.query.Lock()
	defer a.query.Unlock()
	for _, tk := range tasks {
		a.query.restoring[tk.id] = true
	}
}

// queryPublish makes restored tasks queryable.
func (a *App) queryPublish(tasks []*task) {
	a.query.Lock()
	defer a.query.Unlock()
	for _, tk := range tasks {
		delete(a.query.restoring, tk.id)
		a.query.tasks[tk.id] = tk
	}
}

// queryUnpublish removes task id from queries (it is being closed).
func (a *App) queryUnpublish(id TaskID) {
	a.query.Lock()
	defer a.query.Unlock()
	delete(a.query.restoring, id)
	delete(a.query.tasks, id)
}

// QueryOption narrows a store query, as Kafka Streams' StoreQueryParameters.
type QueryOption func(*queryOpts)

type queryOpts struct {
	stale     bool
	partition int32 // -1: every partition
}

// StaleStores lets a query read standby copies too (enableStaleStores): they may lag the
// active task.
func StaleStores() QueryOption { return func(o *queryOpts) { o.stale = true } }

// InPartition restricts a query to the store instance of one partition (withPartition).
func InPartition(p int32) QueryOption { return func(o *queryOpts) { o.partition = p } }

// ReadOnlyKeyValueStore is a query over the local instances of a key-value store (Kafka
// Streams' ReadOnlyKeyValueStore through a composite of this instance's tasks). Each call
// looks the instances up again: one whose task moved away or started restoring since is not
// read, and an error wrapping ErrInvalidStateStore says when none is left.
type ReadOnlyKeyValueStore[K, V any] interface {
	// Get is k's value and whether there is one.
	Get(k K) (V, bool, error)
	// Range is every entry whose serialized key is between from's and to's (both
	// included), store instance by store instance (partition order), each in key-byte order.
	Range(from, to K) ([]KeyValue[K, V], error)
	// All is every entry, store instance by store instance.
	All() ([]KeyValue[K, V], error)
	// ApproximateNumEntries is the number of entries.
	ApproximateNumEntries() (int64, error)
}

// Store returns a query over store name's instances held by this App's running tasks (and,
// with StaleStores, its standby tasks). K and V must be the store's key and value types.
func Store[K, V any](a *App, name string, o ...QueryOption) (ReadOnlyKeyValueStore[K, V], error) {
	q := &kvQuery[K, V]{a: a, name: name, o: queryOpts{partition: -1}}
	for _, f := range o {
		f(&q.o)
	}
	// Check now what can be checked: a wrong name or types fail here, not at the first read.
	err := q.each(func(KeyValueStore[K, V]) bool { return false })
	return q, err
}

type kvQuery[K, V any] struct {
	a    *App
	name string
	o    queryOpts
}

// each calls f with each local instance (active ones first, by partition, then standby
// copies of partitions not active here) until f returns false.
func (q *kvQuery[K, V]) each(f func(KeyValueStore[K, V]) bool) error {
	return eachLocal(q.a, q.name, q.o, "a key-value store", func(s stateStore) (KeyValueStore[K, V], bool) {
		kv, ok := s.typed().(KeyValueStore[K, V])
		return kv, ok
	}, f)
}

// eachLocal calls f with each local instance of store name seen as an S by as (active ones
// first, by partition, then standby copies of partitions not active here, with
// o.stale) until f returns false. It fails with ErrInvalidStateStore when the store is not
// queryable here now or an instance is not an S (kind says what an S is). f runs under the
// query lock (and the standbys' lock when they are read), so the instances do not change
// during the call.
func eachLocal[S any](a *App, name string, o queryOpts, kind string, as func(stateStore) (S, bool), f func(S) bool) error {
	d, ok := a.topo.b.stores[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownStateStore, name)
	}
	if !a.running.Load() {
		return fmt.Errorf("%w: store %q: the application is not running", ErrInvalidStateStore, name)
	}
	sub := a.storeSub(name)
	want := func(id TaskID) bool {
		return id.Subtopology == sub && (o.partition < 0 || id.Partition == o.partition)
	}
	a.query.RLock()
	defer a.query.RUnlock()
	for id := range a.query.restoring {
		if want(id) && !o.stale {
			return fmt.Errorf("%w: store %q: task %s is restoring", ErrInvalidStateStore, name, id)
		}
	}
	var active []TaskID
	for id := range a.query.tasks {
		if want(id) {
			active = append(active, id)
		}
	}
	sortTasks(active)
	var stores []S
	for _, id := range active {
		s, ok := as(a.query.tasks[id].stores[name])
		if !ok {
			return fmt.Errorf("%w: store %q is not %s of %T", ErrInvalidStateStore, name, kind, stores)
		}
		stores = append(stores, s)
	}
	var standby func() // releases the standbys' lock, when taken
	if o.stale && d.changelog {
		a.standby.mu.Lock()
		standby = a.standby.mu.Unlock
		ids := slices.Collect(maps.Keys(a.standby.tasks))
		for _, id := range sortTasks(ids) {
			if !want(id) || slices.Contains(active, id) {
				continue
			}
			s, ok := as(a.standby.tasks[id].stores[name])
			if !ok {
				standby()
				return fmt.Errorf("%w: store %q is not %s of %T", ErrInvalidStateStore, name, kind, stores)
			}
			stores = append(stores, s)
		}
	}
	if standby != nil {
		defer standby()
	}
	if len(stores) == 0 {
		return fmt.Errorf("%w: store %q: no instance on this instance's tasks (it may have migrated)", ErrInvalidStateStore, name)
	}
	for _, s := range stores {
		if !f(s) {
			break
		}
	}
	return nil
}

func (q *kvQuery[K, V]) Get(k K) (V, bool, error) {
	var v V
	var found bool
	var gerr error
	err := q.each(func(s KeyValueStore[K, V]) bool {
		v, found, gerr = s.Get(k)
		return !found && gerr == nil
	})
	return v, found, errors.Join(err, gerr)
}

func (q *kvQuery[K, V]) All() ([]KeyValue[K, V], error) {
	var out []KeyValue[K, V]
	err := q.each(func(s KeyValueStore[K, V]) bool {
		for k, v := range s.All() {
			out = append(out, KV(k, v))
		}
		return true
	})
	return out, err
}

func (q *kvQuery[K, V]) Range(from, to K) ([]KeyValue[K, V], error) {
	var out []KeyValue[K, V]
	var rerr error
	err := q.each(func(s KeyValueStore[K, V]) bool {
		r, ok := s.(interface {
			queryRange(from, to K) ([]KeyValue[K, V], error)
		})
		if !ok {
			rerr = fmt.Errorf("%w: store %q has no range reads", ErrInvalidStateStore, q.name)
			return false
		}
		kvs, err := r.queryRange(from, to)
		out = append(out, kvs...)
		rerr = err
		return err == nil
	})
	return out, errors.Join(err, rerr)
}

func (q *kvQuery[K, V]) ApproximateNumEntries() (int64, error) {
	var n int64
	err := q.each(func(s KeyValueStore[K, V]) bool {
		n += int64(s.Len())
		return true
	})
	return n, err
}

// queryRange is the entries with serialized keys in [from, to], in key-byte order.
func (s *kvStore[K, V]) queryRange(from, to K) ([]KeyValue[K, V], error) {
	fb, err := s.ks.Serialize(s.topic, from)
	if err != nil {
		return nil, fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	tb, err := s.ks.Serialize(s.topic, to)
	if err != nil {
		return nil, fmt.Errorf("streams: store %q key: %w", s.name, err)
	}
	var out []KeyValue[K, V]
	var derr error
	err = s.b.scan(func(kb, vb []byte) bool {
		if bytes.Compare(kb, fb) < 0 {
			return true
		}
		if bytes.Compare(kb, tb) > 0 {
			return false
		}
		k, err := s.ks.Deserialize(s.topic, append([]byte{}, kb...))
		if err != nil {
			derr = fmt.Errorf("streams: store %q key: %w", s.name, err)
			return false
		}
		_, vb = s.value(vb)
		v, err := s.vs.Deserialize(s.topic, append([]byte{}, vb...))
		if err != nil {
			derr = fmt.Errorf("streams: store %q value: %w", s.name, err)
			return false
		}
		out = append(out, KV(k, v))
		return true
	})
	if err != nil {
		return out, fmt.Errorf("streams: store %q: %w", s.name, err)
	}
	return out, derr
}

// storeSub is the sub-topology owning store name (-1 when none does).
func (a *App) storeSub(name string) int {
	for _, s := range a.topo.subs {
		if slices.Contains(s.stores, name) {
			return s.id
		}
	}
	return -1
}

// HostInfo is an instance's application.server.
type HostInfo struct {
	Host string
	Port int
}

func (h HostInfo) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(h.Port)) }

// parseHostInfo checks an application.server value, host:port.
func parseHostInfo(s string) (HostInfo, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return HostInfo{}, fmt.Errorf("streams: application.server %q: %w", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || host == "" {
		return HostInfo{}, fmt.Errorf("streams: application.server %q: not host:port", s)
	}
	return HostInfo{Host: host, Port: p}, nil
}

// KeyQueryMetadata is where a key of a store lives (Kafka Streams' KeyQueryMetadata): the
// instance running the active task of the key's partition, those with standby copies of
// it, and the partition.
type KeyQueryMetadata struct {
	Active    HostInfo
	Standbys  []HostInfo
	Partition int32
}

// StreamsMetadata is one instance of the application (Kafka Streams' StreamsMetadata): its
// application.server, the stores and source partitions of its active tasks, and those of
// its standby tasks.
type StreamsMetadata struct {
	Host                   HostInfo
	StateStoreNames        []string
	TopicPartitions        map[string][]int32
	StandbyStateStoreNames []string
	StandbyTopicPartitions map[string][]int32
}

// MetadataForKey is where key of store lives: its partition is the one the key's bytes
// (serialized by ks) hash to with murmur2 over the store's task count, as the sinks
// partition a record by key, and its hosts are the instances the current assignment gave
// that partition's task.
func MetadataForKey[K any](a *App, store string, key K, ks serde.Serde[K]) (KeyQueryMetadata, error) {
	sub := a.storeSub(store)
	if sub < 0 {
		return KeyQueryMetadata{}, fmt.Errorf("%w %q", ErrUnknownStateStore, store)
	}
	hosts, err := a.hosts()
	if err != nil {
		return KeyQueryMetadata{}, err
	}
	topic, n, err := a.widestSource(sub)
	if err != nil {
		return KeyQueryMetadata{}, err
	}
	kb, err := ks.Serialize(topic, key)
	if err != nil {
		return KeyQueryMetadata{}, fmt.Errorf("streams: key: %w", err)
	}
	p := int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Topic: topic, Key: kb}, n))
	id := TaskID{Subtopology: sub, Partition: p}
	md := KeyQueryMetadata{Partition: p}
	found := false
	for _, h := range hosts {
		hi, err := parseHostInfo(h.server)
		if err != nil {
			return KeyQueryMetadata{}, err
		}
		if slices.Contains(h.active, id) {
			md.Active, found = hi, true
		}
		if slices.Contains(h.standby, id) {
			md.Standbys = append(md.Standbys, hi)
		}
	}
	if !found {
		return KeyQueryMetadata{}, fmt.Errorf("%w: no instance runs task %s", ErrMetadataNotAvailable, id)
	}
	return md, nil
}

// AllMetadata is every instance of the application that has an ApplicationServer, as the
// last assignment this instance received describes them.
func (a *App) AllMetadata() ([]StreamsMetadata, error) {
	hosts, err := a.hosts()
	if err != nil {
		return nil, err
	}
	var out []StreamsMetadata
	for _, h := range hosts {
		hi, err := parseHostInfo(h.server)
		if err != nil {
			return nil, err
		}
		md := StreamsMetadata{Host: hi, TopicPartitions: map[string][]int32{}, StandbyTopicPartitions: map[string][]int32{}}
		if md.StateStoreNames, err = a.describeTasks(h.active, md.TopicPartitions); err != nil {
			return nil, err
		}
		if md.StandbyStateStoreNames, err = a.describeTasks(h.standby, md.StandbyTopicPartitions); err != nil {
			return nil, err
		}
		out = append(out, md)
	}
	return out, nil
}

// AllMetadataForStore is the instances running a task of store.
func (a *App) AllMetadataForStore(store string) ([]StreamsMetadata, error) {
	if a.storeSub(store) < 0 {
		return nil, fmt.Errorf("%w %q", ErrUnknownStateStore, store)
	}
	all, err := a.AllMetadata()
	var out []StreamsMetadata
	for _, md := range all {
		if slices.Contains(md.StateStoreNames, store) || slices.Contains(md.StandbyStateStoreNames, store) {
			out = append(out, md)
		}
	}
	return out, err
}

// hosts is the last assignment's instances.
func (a *App) hosts() ([]hostTasks, error) {
	if a.cfg.ApplicationServer == "" {
		return nil, fmt.Errorf("%w: Config.ApplicationServer is not set", ErrMetadataNotAvailable)
	}
	a.group.Lock()
	defer a.group.Unlock()
	if !a.running.Load() || !a.group.assigned {
		return nil, fmt.Errorf("%w: the application has no assignment yet", ErrMetadataNotAvailable)
	}
	return a.group.info.hosts, nil
}

// widestSource is the source topic of sub with the most partitions and that count, the
// sub-topology's number of tasks.
func (a *App) widestSource(sub int) (string, int, error) {
	best, n := "", 0
	for _, logical := range slices.Sorted(maps.Keys(a.topo.subs[sub].sources)) {
		full := a.topo.topicName(a.cfg.ApplicationID, logical)
		c, err := a.partitionCount(full)
		if err != nil {
			return "", 0, err
		}
		if c > n {
			best, n = full, c
		}
	}
	return best, n, nil
}

// describeTasks adds the source partitions of tasks to parts and returns their stores.
func (a *App) describeTasks(tasks []TaskID, parts map[string][]int32) ([]string, error) {
	var stores []string
	for _, id := range tasks {
		if id.Subtopology < 0 || id.Subtopology >= len(a.topo.subs) {
			continue
		}
		s := a.topo.subs[id.Subtopology]
		for _, name := range s.stores {
			if !slices.Contains(stores, name) {
				stores = append(stores, name)
			}
		}
		for logical := range s.sources {
			full := a.topo.topicName(a.cfg.ApplicationID, logical)
			n, err := a.partitionCount(full)
			if err != nil {
				return nil, err
			}
			if int(id.Partition) < n {
				parts[full] = append(parts[full], id.Partition)
			}
		}
	}
	slices.Sort(stores)
	for t := range parts {
		slices.Sort(parts[t])
	}
	return stores, nil
}
