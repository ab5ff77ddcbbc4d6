package group

import (
	"maps"
	"regexp"
	"slices"
)

// Subscriptions: what each member subscribes to (topic names and a regular expression),
// resolved against the current Topics view into the group's subscription metadata.
//
// Kafka resolves a member's SubscribedTopicRegex (RE2 syntax, matched against whole topic
// names) asynchronously and persists the result; here it is resolved when the group's
// subscription metadata is computed, from a cache invalidated by every new Topics view.

// regexCache holds compiled expressions and their matches in one Topics view.
type regexCache struct {
	view     Topics
	compiled map[string]*regexp.Regexp
	matches  map[string][]string
}

// compileRegex compiles a subscription regex as Kafka matches it: against the whole name.
func compileRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// setTopics installs the Topics view of the request being handled.
func (s *Shard) setTopics(t Topics) {
	if t == nil {
		return
	}
	s.topics = t
}

// resolveRegex returns the topics matching expr in the current view, sorted (nil if the
// expression does not compile; requests are validated before it gets here).
func (s *Shard) resolveRegex(expr string) []string {
	rc := &s.regexes
	if rc.view != s.topics {
		rc.view = s.topics
		rc.matches = map[string][]string{}
	}
	if ts, ok := rc.matches[expr]; ok {
		return ts
	}
	if rc.compiled == nil {
		rc.compiled = map[string]*regexp.Regexp{}
	}
	re, ok := rc.compiled[expr]
	if !ok {
		var err error
		if re, err = compileRegex(expr); err != nil {
			return nil
		}
		if len(rc.compiled) > 1024 {
			clear(rc.compiled) // bounded: expressions of long-gone members go
		}
		rc.compiled[expr] = re
	}
	var ts []string
	for _, n := range s.topics.Names() {
		if re.MatchString(n) {
			ts = append(ts, n)
		}
	}
	rc.matches[expr] = ts
	return ts
}

// memberTopics is every topic name m subscribes to, existing or not, sorted.
func (s *Shard) memberTopics(m *ConsumerMember) []string {
	if m.SubscribedRegex == "" {
		return m.SubscribedTopics
	}
	return sortedStrings(append(slices.Clone(m.SubscribedTopics), s.resolveRegex(m.SubscribedRegex)...))
}

// computeSubMeta is the subscription metadata of cg's members with old replaced by m (either
// may be nil): every subscribed topic that exists, with its id and partition count.
func (s *Shard) computeSubMeta(cg *consumerGroup, old, m *ConsumerMember) map[string]topicMeta {
	meta := map[string]topicMeta{}
	add := func(x *ConsumerMember) {
		for _, name := range s.memberTopics(x) {
			if _, done := meta[name]; done {
				continue
			}
			if id, n, ok := s.topics.Topic(name); ok {
				meta[name] = topicMeta{ID: id, Partitions: n}
			}
		}
	}
	for _, x := range cg.members {
		if old != nil && x.ID == old.ID {
			continue
		}
		add(x)
	}
	if m != nil {
		add(m)
	}
	return meta
}

func sameSubMeta(a, b map[string]topicMeta) bool { return maps.Equal(a, b) }

// subscribedIDs is the set of topic ids m subscribes to that the group's subscription
// metadata knows (topics that exist).
func (s *Shard) subscribedIDs(cg *consumerGroup, m *ConsumerMember) map[TopicID]bool {
	ids := map[TopicID]bool{}
	for _, name := range s.memberTopics(m) {
		if t, ok := cg.subMeta[name]; ok {
			ids[t.ID] = true
		}
	}
	return ids
}

// updateSubscribed keeps the classic bookkeeping (subscribed topics, for OffsetDelete and
// offset expiry) in step with the subscription metadata.
func (g *Group) updateSubscribed() {
	g.subscribed = make(map[string]struct{}, len(g.cons.subMeta))
	for name := range g.cons.subMeta {
		g.subscribed[name] = struct{}{}
	}
	g.subscribedKnown = true
}
