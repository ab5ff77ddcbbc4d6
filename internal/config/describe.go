package config

import (
	"sort"
	"strings"
)

// Entry is one config in a DescribeConfigs answer.
type Entry struct {
	Name      string
	Value     string
	Null      bool // Kafka's null value (unset, no default); Value is ""
	Source    int8 // Source* constants (kmsg.ConfigSource values)
	ReadOnly  bool
	Sensitive bool // a password (ssl.keystore.password, ...): Value is "" and Null is true
	Type      int8 // Type* constants (kmsg.ConfigType values)
	Doc       string
	Synonyms  []Synonym // highest priority first; the first one is the Source
}

// Synonym is one place a config's value could come from.
type Synonym struct {
	Name   string
	Value  string
	Source int8
}

// synonymChain lists every configured value of the broker keys names, as
// Kafka's ConfigHelper does: per-broker dynamic, then cluster dynamic
// default, then static, then built-in default; within each source in the
// order of names.
func (b *Broker) synonymChain(names []string) []Synonym {
	var out []Synonym
	sources := []struct {
		m   map[string]string
		src int8
	}{
		{b.lay.dynBroker, SourceDynamicBroker},
		{b.lay.dynDefault, SourceDynamicDefaultBroker},
		{b.lay.static, SourceStaticBroker},
		{defaultValues, SourceDefault},
	}
	for _, s := range sources {
		for _, n := range names {
			if v, ok := s.m[n]; ok {
				out = append(out, Synonym{Name: n, Value: v, Source: s.src})
			}
		}
	}
	return out
}

// DescribeBroker describes every broker key, sorted by name.
//
// Value is the effective value (see Values). Synonyms follow Kafka: for a key
// in a synonym group, the configured values of the whole group (Kafka's
// brokerConfigSynonyms); for a secondary key of a group (log.retention.hours)
// the list starts at the key itself, as Kafka drops the entries before it.
// Deviation: for the first key of a group (log.retention.ms) Kafka applies
// the same cut, so an unset log.retention.ms reports null and no synonyms;
// Gregor reports the effective value and the whole chain, so Source shows
// where the value came from. ReadOnly is false when some key of the group can
// be changed with SetDynamic.
func (b *Broker) DescribeBroker() []Entry {
	c := b.Current()
	out := make([]Entry, 0, len(brokerDefList))
	for _, d := range brokerDefList {
		group := brokerSynonyms(d.name)
		syns := c.synonymChain(group)
		if d.name != group[0] {
			i := 0
			for i < len(syns) && syns[i].Name != d.name {
				i++
			}
			syns = syns[i:]
		}
		if len(syns) == 0 {
			syns = nil
		}
		readOnly := true
		for _, n := range group {
			if IsDynamic(n) {
				readOnly = false
			}
		}
		e := Entry{
			Name:     d.name,
			Value:    c.values[d.name],
			Null:     c.null[d.name],
			Source:   SourceDefault,
			ReadOnly: readOnly,
			Type:     d.vt.typ,
			Doc:      d.doc,
			Synonyms: syns,
		}
		if len(syns) > 0 {
			e.Source = syns[0].Source
		}
		if d.vt.typ == TypePassword {
			// As Kafka: a password is sensitive, described without its value anywhere.
			e.Sensitive, e.Value, e.Null = true, "", true
			for i := range e.Synonyms {
				e.Synonyms[i].Value = ""
			}
		}
		out = append(out, e)
	}
	out = append(out, c.describeListenerKeys()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// describeListenerKeys describes the listener.name.<listener>.* keys configured, statically
// or (the stores) for this broker at runtime, as Kafka describes a broker's originals: the
// dynamic value first (DYNAMIC_BROKER_CONFIG), then the static one. A password, inline
// key or certificate, or JAAS configuration is sensitive and shown without its value.
func (b *Broker) describeListenerKeys() []Entry {
	names := map[string]bool{}
	for _, m := range []map[string]string{b.lay.dynBroker, b.lay.dynDefault, b.lay.static} {
		for k := range m {
			if _, _, ok := splitListenerKey(k); ok {
				names[k] = true
			}
		}
	}
	var out []Entry
	for k := range names {
		_, key, _ := splitListenerKey(k)
		typ := TypeString
		if d := brokerDefs[key]; d != nil {
			typ = d.vt.typ
		} else if strings.HasSuffix(key, saslJaasSuffix) {
			typ = TypePassword // as Kafka's sasl.jaas.config
		}
		e := Entry{Name: k, ReadOnly: !IsDynamic(k), Type: typ}
		if v, ok := b.lay.dynBroker[k]; ok {
			e.Synonyms = append(e.Synonyms, Synonym{Name: k, Value: v, Source: SourceDynamicBroker})
		}
		if v, ok := b.lay.dynDefault[k]; ok {
			e.Synonyms = append(e.Synonyms, Synonym{Name: k, Value: v, Source: SourceDynamicDefaultBroker})
		}
		if v, ok := b.lay.static[k]; ok {
			e.Synonyms = append(e.Synonyms, Synonym{Name: k, Value: v, Source: SourceStaticBroker})
		}
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		if typ == TypePassword {
			e.Sensitive, e.Value, e.Null = true, "", true
			for i := range e.Synonyms {
				e.Synonyms[i].Value = ""
			}
		}
		out = append(out, e)
	}
	return out
}

// DescribeTopic describes every topic key for a topic with the given
// overrides, sorted by name. An overridden key has Source TOPIC_CONFIG and a
// first synonym naming itself; the rest of the synonyms are the broker
// synonyms' configured values (see synonymChain), and without an override
// the first of them is the Source (DEFAULT_CONFIG if there is none). A key
// without broker synonym (leader.replication.throttled.replicas) reports its
// own default with Source DEFAULT_CONFIG and no synonyms when not overridden.
// Deviation: Kafka cuts the broker synonyms before the first one named like
// the primary synonym, so retention.ms shows no synonyms when only
// log.retention.hours is configured; Gregor lists them all.
//
// Overrides are normally already validated; an override with an invalid
// value is still reported (its raw value, Source TOPIC_CONFIG), and unknown
// keys are skipped.
func (b *Broker) DescribeTopic(overrides map[string]string) []Entry {
	c := b.Current()
	t := c.TopicDefaults()
	out := make([]Entry, 0, len(topicDefList))
	for _, d := range topicDefList {
		e := Entry{Name: d.name, Type: d.vt.typ, Doc: d.doc, Source: SourceDefault}
		syns := c.synonymChain(d.synonyms)
		if raw, ok := overrides[d.name]; ok {
			v, norm, reason := d.vt.parse(strings.TrimSpace(raw))
			if reason == "" {
				assign(d.field(&t), v)
				e.Value = norm
			} else {
				e.Value = raw
			}
			syns = append([]Synonym{{Name: d.name, Value: e.Value, Source: SourceTopic}}, syns...)
		} else {
			e.Value = format(d.field(&t))
		}
		if len(syns) > 0 {
			e.Source = syns[0].Source
		}
		e.Synonyms = syns
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
