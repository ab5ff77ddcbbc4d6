package config

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
)

// live is shared by every snapshot of one configuration.
//
// Concurrency: copy-on-write. Readers load cur without locking and read the
// snapshot's fields, which are never written after publication. Writers
// (SetDynamic, DeleteDynamic, SetDynamicDefault, DeleteDynamicDefault) hold mu
// while they copy the current layers, apply one change, build and validate a
// new snapshot, and publish it with cur.Store; a change that fails
// validation publishes nothing.
type live struct {
	mu  sync.Mutex // serializes writers; readers never take it
	cur atomic.Pointer[Broker]
}

// IsDynamic reports whether key may be changed at runtime with SetDynamic or
// SetDynamicDefault. These are the broker synonyms of topic configs that
// Kafka lets AlterConfigs change (log.retention.ms, log.retention.bytes,
// log.segment.bytes, log.roll.ms, message.max.bytes, log.flush.interval.*,
// log.index.*, min.insync.replicas, compression.type,
// log.message.timestamp.*, log.cleanup.policy, log.cleaner.* compaction
// settings, unclean.leader.election.enable, ...), the replication
// throttle rates leader.replication.throttled.rate,
// follower.replication.throttled.rate and
// replica.alter.log.dirs.io.max.bytes.per.second, and the log cleaner's own settings
// Kafka's LogCleaner reconfigures (log.cleaner.threads,
// log.cleaner.dedupe.buffer.size, log.cleaner.io.buffer.size,
// log.cleaner.io.buffer.load.factor, log.cleaner.io.max.bytes.per.second,
// log.cleaner.backoff.ms; log.cleaner.enable is static), and the connection
// limits Kafka's DynamicConnectionQuota reconfigures (max.connections,
// max.connections.per.ip, max.connections.per.ip.overrides,
// max.connection.creation.rate; their listener.name.<listener>. forms are
// static here), and, with SetDynamic only (PerBrokerOnly), where a
// listener's key and trust stores are (listener.name.<listener>.ssl.keystore.location,
// ..., see security.go). Secondary synonyms
// such as log.retention.hours are static only, as in Kafka.
func IsDynamic(key string) bool {
	if _, ok := listenerConnKey(key); ok || PerBrokerOnly(key) {
		return true
	}
	d := brokerDefs[key]
	return d != nil && d.dynamic
}

// SetDynamic sets a per-broker dynamic value for key (Kafka's AlterConfigs on
// this broker's resource). It takes precedence over every other source and
// is reported as DYNAMIC_BROKER_CONFIG. An unknown key is ErrUnknownConfig;
// a bad value, a key that cannot change at runtime, or a value that breaks a
// cross-key rule is ErrInvalidConfig. On error nothing changes.
func (b *Broker) SetDynamic(key, value string) error {
	return b.update(key, func(l *layers, norm string) { l.dynBroker[key] = norm }, value, true)
}

// DeleteDynamic removes this broker's dynamic value for key; deleting a key
// that has none is not an error.
func (b *Broker) DeleteDynamic(key string) error {
	return b.update(key, func(l *layers, _ string) { delete(l.dynBroker, key) }, "", false)
}

// SetDynamicDefault sets a cluster-wide dynamic default for key (AlterConfigs
// on the broker resource named ""). It beats static configuration but loses
// to SetDynamic, and is reported as DYNAMIC_DEFAULT_BROKER_CONFIG.
func (b *Broker) SetDynamicDefault(key, value string) error {
	if PerBrokerOnly(key) {
		return invalid(key, value, PerBrokerOnlyReason)
	}
	return b.update(key, func(l *layers, norm string) { l.dynDefault[key] = norm }, value, true)
}

// PerBrokerOnlyReason is why a PerBrokerOnly key is refused on the cluster-wide default
// resource, in Kafka's words.
const PerBrokerOnlyReason = "Cannot update these configs at default cluster level, broker id must be specified"

// DeleteDynamicDefault removes the cluster-wide dynamic default for key.
func (b *Broker) DeleteDynamicDefault(key string) error {
	return b.update(key, func(l *layers, _ string) { delete(l.dynDefault, key) }, "", false)
}

// ValidateDynamic reports whether SetDynamic(key, value) would succeed,
// without changing anything (for validate-only AlterConfigs).
func (b *Broker) ValidateDynamic(key, value string) error {
	norm, err := checkDynamic(key, value, true)
	if err != nil {
		return err
	}
	cur := b.Current()
	lay := copyLayers(cur.lay)
	lay.dynBroker[key] = norm
	next, err := build(lay)
	if err != nil {
		return blame(err, key, value)
	}
	return checkReconfiguration(cur, next, key, value)
}

// checkReconfiguration applies the rules Kafka's reconfigurable components add to a change
// from cur to next (validateReconfiguration): the log cleaner's threads may change to no
// fewer than 1 nor half the current count, and to no more than double it; max.connections
// and max.connection.creation.rate may change to no less than 1 (Kafka's listener connection
// quotas, which take the broker's values, refuse 0 at runtime).
func checkReconfiguration(cur, next *Broker, key, value string) error {
	switch {
	case key == "max.connections" && next.MaxConnections <= 0:
		return invalid(key, value, fmt.Sprintf("Invalid max.connections %d", next.MaxConnections))
	case key == "max.connection.creation.rate" && next.MaxConnectionCreationRate <= 0:
		return invalid(key, value, fmt.Sprintf("Invalid max.connection.creation.rate %d", next.MaxConnectionCreationRate))
	}
	if base, ok := listenerConnKey(key); ok {
		// A listener's own limit, as Kafka's ListenerConnectionQuota refuses it.
		if n, err := strconv.ParseInt(value, 10, 32); err == nil && n <= 0 {
			return invalid(key, value, fmt.Sprintf("Invalid %s %d", base, n))
		}
	}
	if key == "log.cleaner.threads" && next.LogCleanerThreads != cur.LogCleanerThreads {
		n, c := next.LogCleanerThreads, cur.LogCleanerThreads
		switch {
		case n < 1:
			return invalid(key, value, "log cleaner threads should be at least 1")
		case n < c/2:
			return invalid(key, value, fmt.Sprintf("log cleaner threads cannot be reduced to less than half the current value %d", c))
		case n > c*2:
			return invalid(key, value, fmt.Sprintf("log cleaner threads cannot be increased to more than double the current value %d", c))
		}
	}
	return nil
}

// blame makes a cross-key error found while applying a change to key name
// key, so the caller sees which of its keys was refused.
func blame(err error, key, value string) error {
	ce, ok := err.(*Error)
	if !ok || ce.Key == key {
		return err
	}
	return invalid(key, value, "conflicts with "+ce.Key+": "+ce.Reason)
}

// Dynamic returns this broker's dynamic values (normalized).
func (b *Broker) Dynamic() map[string]string { return copyMap(b.Current().lay.dynBroker) }

// DynamicDefaults returns the cluster-wide dynamic defaults (normalized).
func (b *Broker) DynamicDefaults() map[string]string { return copyMap(b.Current().lay.dynDefault) }

func checkDynamic(key, value string, withValue bool) (string, error) {
	d := brokerDefs[key]
	if d == nil {
		if _, _, ok := splitListenerKey(key); ok {
			return checkDynamicListenerKey(key, value, withValue)
		}
		return "", unknown(key, "broker configuration")
	}
	if !d.dynamic {
		switch {
		case contains(dynamicListenerKeys, key):
			return "", invalid(key, value, "security configs can be updated dynamically only per listener, as listener.name.<listener>."+key)
		}
		return "", invalid(key, value, "cannot be updated dynamically")
	}
	if !withValue {
		return "", nil
	}
	return normalizeBroker(key, value)
}

func copyLayers(l layers) layers {
	return layers{static: l.static, dynDefault: copyMap(l.dynDefault), dynBroker: copyMap(l.dynBroker)}
}

func (b *Broker) update(key string, apply func(l *layers, norm string), value string, withValue bool) error {
	if b.live == nil {
		return invalid(key, value, "configuration was not created by Parse, Load or Default")
	}
	norm, err := checkDynamic(key, value, withValue)
	if err != nil {
		return err
	}
	b.live.mu.Lock()
	defer b.live.mu.Unlock()
	lay := copyLayers(b.live.cur.Load().lay)
	apply(&lay, norm)
	next, err := build(lay)
	if err != nil {
		return blame(err, key, value)
	}
	next.live = b.live
	b.live.cur.Store(next)
	return nil
}
