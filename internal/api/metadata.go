package api

import (
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/txn"
)

// Metadata v0-v12. Topics nil (or, in v0, empty) means every topic. A topic named by its id
// (v12; a non-zero id, whatever the name beside it) is answered with its name and id, or
// UNKNOWN_TOPIC_ID with the id. An unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name Kafka does not allow); when
// the request allows it (always before v4) and auto.create.topics.enable is true, its
// creation is also sent to the controller, within bounds, without waiting (autocreate.go),
// when the principal may create it (CREATE on the cluster or the topic).

// authorizedOpsUnset is what Kafka answers when authorized operations were not requested.
const authorizedOpsUnset = math.MinInt32

func handleMetadata(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	im := h.Meta.Image()
	listener := h.listenerOf(c)
	for _, lb := range liveBrokers(im, listener) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = lb.id, lb.host, lb.port, lb.rackPtr()
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ClusterID = &h.ClusterID
	resp.ControllerID = h.controllerID(im)
	resp.AuthorizedOperations = authorizedOpsUnset
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = 0
		if h.authorizedCluster(c, kmsg.ACLOperationDescribe) {
			resp.AuthorizedOperations = h.authorizedOps(c, kmsg.ACLResourceTypeCluster, authz.ClusterName)
		}
	}
	// Authorization (authorize.go): a topic the principal may not describe is never
	// revealed: left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED when named.
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	withOps := func(mt kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
		if req.IncludeTopicAuthorizedOperations && mt.Topic != nil {
			mt.AuthorizedOperations = h.authorizedOps(c, kmsg.ACLResourceTypeTopic, *mt.Topic)
		}
		return mt
	}
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, n := range im.TopicNames() {
			if describable.ok(n) {
				resp.Topics = append(resp.Topics, withOps(h.topicMetadata(im, im.Topic(n), listener)))
			}
		}
		return msg(resp)
	}
	autoCreate := h.Cfg.Current().AutoCreateTopicsEnable && (req.Version < 4 || req.AllowAutoTopicCreation)
	var mayCreate *authorizedSet // CREATE TOPIC, asked when CREATE CLUSTER is not allowed
	var create []string
	for _, rt := range req.Topics {
		var t *metadata.Topic
		// A topic with an id is asked for by id, whatever its name says, as Kafka decides:
		// Kafka's Java client sends the name's default, "", beside the id.
		if rt.Topic == nil || rt.TopicID != ([16]byte{}) {
			t = im.TopicByID(rt.TopicID)
			if t == nil || !describable.ok(t.Name) {
				// Topic ids are not secret: an unauthorized one is named as such, without
				// its name.
				mt := kmsg.NewMetadataResponseTopic()
				mt.ErrorCode = kerr.UnknownTopicID.Code
				if t != nil {
					mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				}
				mt.TopicID = rt.TopicID
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		} else if !describable.ok(*rt.Topic) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			mt.IsInternal = *rt.Topic == group.TopicName || *rt.Topic == txn.TopicName || *rt.Topic == share.StateTopic
			resp.Topics = append(resp.Topics, mt)
			continue
		} else if t = im.Topic(*rt.Topic); t == nil {
			err := validTopicName(*rt.Topic)
			if err == nil {
				err = errUnknownPartition
				if autoCreate {
					if mayCreate == nil && !h.authorizedCluster(c, kmsg.ACLOperationCreate) {
						mayCreate = h.authorizedNames(c, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic)
					}
					if mayCreate == nil || mayCreate.ok(*rt.Topic) {
						create = append(create, *rt.Topic)
					} else {
						err = kerr.TopicAuthorizationFailed
					}
				}
			}
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.ErrorCode = code(err)
			mt.IsInternal = *rt.Topic == group.TopicName || *rt.Topic == txn.TopicName || *rt.Topic == share.StateTopic
			if err != kerr.TopicAuthorizationFailed {
				mt = withOps(mt)
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, withOps(h.topicMetadata(im, t, listener)))
	}
	if len(create) > 0 {
		h.autoCreate(create)
	}
	return msg(resp)
}

// topicMetadata describes a topic's partitions as the image has them. A partition without a
// leader is LEADER_NOT_AVAILABLE; one whose leader has no endpoint on the client's listener
// is LISTENER_NOT_FOUND; one led here whose log went offline after an I/O error is
// KAFKA_STORAGE_ERROR with this replica offline; this replica is listed offline too where
// another broker (or none) leads.
func (h *Handler) topicMetadata(im *metadata.Image, t *metadata.Topic, listener string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	mt.AuthorizedOperations = authorizedOpsUnset
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.Parts))
	for i := range mt.Partitions {
		mp := &mt.Partitions[i]
		pp := &t.Parts[i]
		mp.Default()
		mp.Partition = int32(i)
		mp.Leader = pp.Leader
		mp.LeaderEpoch = pp.LeaderEpoch
		mp.Replicas = pp.Replicas
		mp.ISR = pp.ISR
		mp.OfflineReplicas = offlineReplicas(im, pp)
		switch {
		case pp.Leader < 0:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case pp.Leader == h.NodeID:
			if part := h.Replicas.Get(t.Name, int32(i)); part == nil || part.Log().Offline() {
				mp.ErrorCode = kerr.KafkaStorageError.Code
				mp.OfflineReplicas = append(mp.OfflineReplicas, h.NodeID)
			}
		default:
			if _, _, ok := im.Endpoint(pp.Leader, listener); !ok {
				mp.ErrorCode = kerr.ListenerNotFound.Code
			}
		}
		if pp.Leader != h.NodeID && slices.Contains(pp.Replicas, h.NodeID) && !slices.Contains(mp.OfflineReplicas, h.NodeID) {
			// This broker's replica on a failed log dir (KIP-858): offline wherever it leads.
			if part := h.Replicas.Get(t.Name, int32(i)); part != nil && part.Log().Offline() {
				mp.OfflineReplicas = append(mp.OfflineReplicas, h.NodeID)
			}
		}
	}
	return mt
}
