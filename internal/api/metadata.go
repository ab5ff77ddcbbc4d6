package api

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
)

// Metadata v0-v12. Topics nil (or, in v0, empty) means every topic. Unknown topics are created
// when the request allows it (always before v4) and auto.create.topics.enable is true.

// authorizedOpsUnset is what Kafka answers when authorized operations were not requested.
const authorizedOpsUnset = math.MinInt32

func handleMetadata(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = []kmsg.MetadataResponseBroker{h.broker()}
	resp.ClusterID = &h.ClusterID
	resp.ControllerID = h.NodeID
	resp.AuthorizedOperations = authorizedOpsUnset

	im := h.Meta.Image()
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, n := range im.TopicNames() {
			resp.Topics = append(resp.Topics, h.topicMetadata(im.Topic(n)))
		}
		return msg(resp)
	}
	autoCreate := h.Cfg.Current().AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		var t *metadata.Topic
		if rt.Topic == nil {
			if t = im.TopicByID(rt.TopicID); t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode = kerr.UnknownTopicID.Code
				mt.TopicID = rt.TopicID
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		} else if t = im.Topic(*rt.Topic); t == nil {
			err := validTopicName(*rt.Topic)
			if err == nil {
				if !autoCreate {
					err = errUnknownPartition
				} else if t, err = h.createTopic(topicSpec{name: *rt.Topic, partitions: -1, rf: -1}, false); errors.Is(err, metadata.ErrTopicExists) {
					t, err = h.Meta.Image().Topic(*rt.Topic), nil // created concurrently
				}
			}
			if err != nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = code(err)
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		resp.Topics = append(resp.Topics, h.topicMetadata(t))
	}
	return msg(resp)
}

func (h *Handler) broker() kmsg.MetadataResponseBroker {
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = h.NodeID
	b.Host = h.AdvertisedHost
	b.Port = h.AdvertisedPort
	if h.Rack != "" {
		b.Rack = &h.Rack
	}
	return b
}

func (h *Handler) topicMetadata(t *metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	mt.AuthorizedOperations = authorizedOpsUnset
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
	for i := range mt.Partitions {
		p := &mt.Partitions[i]
		p.Default()
		p.Partition = int32(i)
		p.Leader = h.NodeID
		p.LeaderEpoch = 0
		p.Replicas = []int32{h.NodeID}
		p.ISR = []int32{h.NodeID}
		p.OfflineReplicas = []int32{}
		// A partition that could not be opened, or whose log went offline after an I/O
		// error, has its only replica offline.
		if part := h.Replicas.Get(t.Name, int32(i)); part == nil || part.Log().Offline() {
			p.ErrorCode = kerr.KafkaStorageError.Code
			p.OfflineReplicas = []int32{h.NodeID}
		}
	}
	return mt
}
