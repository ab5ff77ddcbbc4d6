package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/share"
)

// FindCoordinator v0-v6: the broker coordinating a group (key type 0) is the leader of its
// __consumer_offsets partition, and the one coordinating a transactional id (key type 1) the
// leader of its __transaction_state partition (txn.PartitionFor), whichever broker that is;
// each topic is created on first use with its coordinator's settings
// (COORDINATOR_NOT_AVAILABLE meanwhile: the client retries). v4+ asks for a batch of keys.
// v6+ also finds share coordinators (key type 2, between brokers, CLUSTER_ACTION): the key
// "group:topic-id:partition" names a share-partition, whose share coordinator is the leader
// of the __share_group_state partition its key hashes to (share.StatePartitionFor, as Kafka's
// ShareCoordinatorService.partitionFor); a malformed key is INVALID_REQUEST. Other key types
// are INVALID_REQUEST.

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
	coordinatorShare       = 2
)

func handleFindCoordinator(h *Handler, _ context.Context, conn *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		var err *kerr.Error
		var node int32
		// Authorization (authorize.go): DESCRIBE on the group or the transactional id.
		switch req.CoordinatorType {
		case coordinatorGroup:
			if !h.authorized(conn, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key) {
				err = kerr.GroupAuthorizationFailed
				break
			}
			node, err = h.groupCoordinator(key)
		case coordinatorTransaction:
			if !h.authorized(conn, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key) {
				err = kerr.TransactionalIDAuthorizationFailed
				break
			}
			node, err = h.txnCoordinator(key)
		case coordinatorShare:
			if req.Version < 6 {
				err = kerr.InvalidRequest
				break
			}
			if !h.authorizedCluster(conn, kmsg.ACLOperationClusterAction) {
				err = kerr.ClusterAuthorizationFailed
				break
			}
			node, err = h.shareCoordinator(key)
		default:
			err = kerr.InvalidRequest
		}
		if err == nil {
			if host, port, ok := h.Meta.Image().Endpoint(node, h.listenerOf(conn)); ok {
				c.NodeID, c.Host, c.Port = node, host, port
			} else {
				err = kerr.CoordinatorNotAvailable
			}
		}
		if err != nil {
			c.ErrorCode, c.ErrorMessage = err.Code, &err.Message
			c.NodeID, c.Host, c.Port = -1, "", -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return msg(resp)
}

// groupCoordinator returns the node leading the group's __consumer_offsets partition,
// creating the topic on first use.
func (h *Handler) groupCoordinator(groupID string) (int32, *kerr.Error) {
	t := h.Meta.Image().Topic(group.TopicName)
	if t == nil {
		if _, err := h.EnsureOffsetsTopic(true); err != nil {
			h.Log.Warn("creating "+group.TopicName+" failed", "err", err)
			return -1, kerr.CoordinatorNotAvailable
		}
		if t = h.Meta.Image().Topic(group.TopicName); t == nil {
			return -1, kerr.CoordinatorNotAvailable
		}
	}
	pp := t.Partition(group.PartitionFor(groupID, int32(len(t.Parts))))
	if pp == nil || pp.Leader < 0 {
		return -1, kerr.CoordinatorNotAvailable
	}
	return pp.Leader, nil
}

// shareCoordinator returns the node leading the __share_group_state partition of the
// share-partition key names, creating the topic on first use.
func (h *Handler) shareCoordinator(key string) (int32, *kerr.Error) {
	k, perr := share.ParseStateKey(key)
	if perr != nil {
		return -1, kerr.InvalidRequest
	}
	node, err := h.shareStateLeader(k)
	if err != nil {
		h.Log.Debug("no share coordinator", "key", key, "err", err)
		return -1, kerr.CoordinatorNotAvailable
	}
	return node, nil
}
