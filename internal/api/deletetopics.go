package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
)

// DeleteTopics v0-v6 (v6 names topics by name or id), decided by the controller
// (forward.go). Refused here with TOPIC_DELETION_DISABLED when delete.topic.enable is false,
// and with INVALID_REQUEST for an entry naming both a name and an id or a topic named twice
// (Kafka deletes neither entry of a duplicate). Once the controller has deleted a topic, the
// answer waits until this broker's image no longer has it; the replica manager removes the
// partitions' files as it follows the image.

func handleDeleteTopics(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	targets := req.Topics
	if req.Version < 6 {
		targets = nil
		for i := range req.TopicNames {
			targets = append(targets, kmsg.DeleteTopicsRequestTopic{Topic: &req.TopicNames[i]})
		}
	}
	names, ids := map[string]int{}, map[metadata.TopicID]int{}
	for _, rt := range targets {
		if rt.Topic != nil {
			names[*rt.Topic]++
		} else {
			ids[rt.TopicID]++
		}
	}
	errs := make([]error, len(targets))
	fwd := kmsg.NewPtrDeleteTopicsRequest()
	fwd.SetVersion(apis.MaxVersion(kmsg.DeleteTopics.Int16())) // the answer then carries names and ids
	fwd.TimeoutMillis = req.TimeoutMillis
	var fwdIdx []int
	// Authorization (authorize.go): DELETE on the cluster, else DELETE on each topic
	// (which implies DESCRIBE). A topic named by an id resolves to its name first; an
	// unknown id stays the controller's UNKNOWN_TOPIC_ID.
	clusterDelete := h.authorizedCluster(c, kmsg.ACLOperationDelete)
	deletable := h.authorizedNames(c, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic)
	describable := h.authorizedNames(c, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic)
	im := h.Meta.Image()
	denied := func(rt kmsg.DeleteTopicsRequestTopic) bool {
		if clusterDelete {
			return false
		}
		if rt.Topic != nil {
			return !deletable.ok(*rt.Topic)
		}
		t := im.TopicByID(rt.TopicID)
		return t != nil && !deletable.ok(t.Name)
	}
	var revealed map[int]string // names of topics given by id the principal may describe
	for i, rt := range targets {
		switch {
		case !h.Cfg.Current().DeleteTopicEnable:
			errs[i] = errDeleteDisabled
		case rt.Topic != nil && rt.TopicID != (metadata.TopicID{}):
			errs[i] = fmt.Errorf("%w: give a topic name or a topic id, not both", errInvalidRequest)
		case rt.Topic == nil && rt.TopicID == (metadata.TopicID{}):
			errs[i] = fmt.Errorf("%w: neither a topic name nor a topic id given", errInvalidRequest)
		case rt.Topic != nil && names[*rt.Topic] > 1:
			errs[i] = fmt.Errorf("%w: topic %q is named more than once", errInvalidRequest, *rt.Topic)
		case rt.Topic == nil && ids[rt.TopicID] > 1:
			errs[i] = fmt.Errorf("%w: topic id %s is named more than once", errInvalidRequest, metadata.TopicID(rt.TopicID))
		case denied(rt):
			errs[i] = kerr.TopicAuthorizationFailed
			if t := im.TopicByID(rt.TopicID); rt.Topic == nil && t != nil && describable.ok(t.Name) {
				if revealed == nil {
					revealed = map[int]string{}
				}
				revealed[i] = t.Name
			}
		default:
			fwd.Topics = append(fwd.Topics, kmsg.DeleteTopicsRequestTopic{Topic: rt.Topic, TopicID: rt.TopicID})
			fwdIdx = append(fwdIdx, i)
		}
	}
	answers := make([]kmsg.DeleteTopicsResponseTopic, len(targets))
	for i, rt := range targets {
		answers[i] = kmsg.NewDeleteTopicsResponseTopic()
		answers[i].Topic, answers[i].TopicID = rt.Topic, rt.TopicID
		if name, ok := revealed[i]; ok {
			answers[i].Topic = &name
		}
	}
	if len(fwdIdx) > 0 {
		h.forwardDeleteTopics(ctx, fwd, fwdIdx, answers, errs)
	}
	for i := range targets {
		st := answers[i]
		st.ErrorCode, st.ErrorMessage = code(errs[i]), errMsg(errs[i])
		if req.Version < 6 && st.Topic == nil {
			st.Topic = targets[i].Topic
		}
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}

// forwardDeleteTopics sends fwd to the controller, fills answers[fwdIdx[j]] and
// errs[fwdIdx[j]] with its answer for fwd.Topics[j], and waits until every deleted topic is
// gone from this broker's image (REQUEST_TIMED_OUT for those still there at the deadline).
func (h *Handler) forwardDeleteTopics(ctx context.Context, fwd *kmsg.DeleteTopicsRequest, fwdIdx []int, answers []kmsg.DeleteTopicsResponseTopic, errs []error) {
	r, err := h.forward(ctx, fwd)
	if err != nil {
		for _, i := range fwdIdx {
			errs[i] = err
		}
		return
	}
	results := r.(*kmsg.DeleteTopicsResponse).Topics
	used := make([]bool, len(results))
	var deleted []int
	for j, ft := range fwd.Topics {
		i := fwdIdx[j]
		k := matchDeleted(results, used, ft)
		if k < 0 {
			errs[i] = fmt.Errorf("api: the controller did not answer for topic %s", deleteTarget(ft))
			continue
		}
		used[k] = true
		st := results[k]
		if st.Topic != nil {
			answers[i].Topic = st.Topic
		}
		if st.TopicID != [16]byte{} {
			answers[i].TopicID = st.TopicID
		}
		if errs[i] = controllerError(st.ErrorCode, st.ErrorMessage); errs[i] == nil {
			deleted = append(deleted, i)
			h.Log.Info("deleted topic", "topic", deleteTarget(kmsg.DeleteTopicsRequestTopic{Topic: answers[i].Topic, TopicID: answers[i].TopicID}))
		}
	}
	gone := func(im *metadata.Image, a kmsg.DeleteTopicsResponseTopic) bool {
		if a.TopicID != [16]byte{} {
			return im.TopicByID(a.TopicID) == nil
		}
		return a.Topic == nil || im.Topic(*a.Topic) == nil
	}
	err = h.awaitMetadata(ctx, func(im *metadata.Image) bool {
		for _, i := range deleted {
			if !gone(im, answers[i]) {
				return false
			}
		}
		return true
	}, 0)
	if err != nil {
		im := h.Meta.Image()
		for _, i := range deleted {
			if !gone(im, answers[i]) {
				errs[i] = fmt.Errorf("%w: the topic was deleted but broker %d still sees it", errTimedOut, h.NodeID)
			}
		}
	}
}

// matchDeleted returns the index of the first unused answer for target ft (by name when it
// names one, else by id), or -1.
func matchDeleted(results []kmsg.DeleteTopicsResponseTopic, used []bool, ft kmsg.DeleteTopicsRequestTopic) int {
	for k, st := range results {
		if used[k] {
			continue
		}
		if ft.Topic != nil && st.Topic != nil && *st.Topic == *ft.Topic ||
			ft.Topic == nil && st.TopicID == ft.TopicID {
			return k
		}
	}
	return -1
}

func deleteTarget(t kmsg.DeleteTopicsRequestTopic) string {
	if t.Topic != nil {
		return fmt.Sprintf("%q", *t.Topic)
	}
	return metadata.TopicID(t.TopicID).String()
}
