package api

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch may name a partition more than once. Kafka reads the request into an
// insertion-ordered map (FetchRequest.fetchData), so each partition is read and answered
// once: at the place of its first mention, with the parameters of its last, and consecutive
// partitions of one topic make one topic of the answer. Without this a request naming one
// partition N times was read and answered N times, each copy counted against nothing, and
// the answer could outgrow any frame a client can take.

// wantKey names a partition of a request: by topic name before v13, by topic id from it.
type wantKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// wantSeen is a partition's last mention, and whether the answer holds it yet.
type wantSeen struct {
	last   *kmsg.FetchRequestTopicPartition
	placed bool
}

// maxQuickTopics bounds the topics of a request that unique checks for repeats pairwise;
// a request of more goes through the map.
const maxQuickTopics = 16

// unique returns want with each partition named once. The common request, whose topics are
// distinct and whose partitions ascend within each topic, is returned as is without a map.
func (f *fetch) unique(want []kmsg.FetchRequestTopic) []kmsg.FetchRequestTopic {
	byID := f.req.Version >= 13
	if !mayRepeat(want, byID) {
		return want
	}
	if f.seen == nil {
		f.seen = make(map[wantKey]wantSeen)
	}
	n, repeats := 0, false
	for ti := range want {
		rt := &want[ti]
		for pi := range rt.Partitions {
			k := keyOf(rt, rt.Partitions[pi].Partition, byID)
			if _, ok := f.seen[k]; ok {
				repeats = true
			} else {
				n++
			}
			f.seen[k] = wantSeen{last: &rt.Partitions[pi]}
		}
	}
	if !repeats {
		return want
	}
	// The answer's topics share one array of n partitions: each topic's slice starts where
	// the array ends when the topic is opened and grows with it, and only the last one grows.
	out := make([]kmsg.FetchRequestTopic, 0, len(want))
	parts := make([]kmsg.FetchRequestTopicPartition, 0, n)
	for ti := range want {
		rt := &want[ti]
		for pi := range rt.Partitions {
			k := keyOf(rt, rt.Partitions[pi].Partition, byID)
			s := f.seen[k]
			if s.placed {
				continue
			}
			f.seen[k] = wantSeen{last: s.last, placed: true}
			if len(out) == 0 || !sameTopic(&out[len(out)-1], rt, byID) {
				out = append(out, kmsg.FetchRequestTopic{Topic: rt.Topic, TopicID: rt.TopicID, Partitions: parts[len(parts):len(parts)]})
			}
			parts = append(parts, *s.last)
			last := &out[len(out)-1]
			last.Partitions = last.Partitions[:len(last.Partitions)+1]
		}
	}
	return out
}

// mayRepeat is false when no partition of want can be named twice: at most maxQuickTopics
// distinct topics, partitions strictly ascending within each.
func mayRepeat(want []kmsg.FetchRequestTopic, byID bool) bool {
	if len(want) > maxQuickTopics {
		return true
	}
	for i := range want {
		ps := want[i].Partitions
		for j := 1; j < len(ps); j++ {
			if ps[j].Partition <= ps[j-1].Partition {
				return true
			}
		}
		for j := 0; j < i; j++ {
			if sameTopic(&want[i], &want[j], byID) {
				return true
			}
		}
	}
	return false
}

func keyOf(rt *kmsg.FetchRequestTopic, partition int32, byID bool) wantKey {
	if byID {
		return wantKey{id: rt.TopicID, partition: partition}
	}
	return wantKey{topic: rt.Topic, partition: partition}
}

func sameTopic(a, b *kmsg.FetchRequestTopic, byID bool) bool {
	if byID {
		return a.TopicID == b.TopicID
	}
	return a.Topic == b.Topic
}
