package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics v0-v6 (v6 names topics by name or id). Refused with TOPIC_DELETION_DISABLED
// when delete.topic.enable is false.

func handleDeleteTopics(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	targets := req.Topics
	if req.Version < 6 {
		for i := range req.TopicNames {
			targets = append(targets, kmsg.DeleteTopicsRequestTopic{Topic: &req.TopicNames[i]})
		}
	}
	for _, rt := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		} else if t := h.Meta.Image().TopicByID(rt.TopicID); t != nil {
			name = t.Name
			st.Topic = &t.Name
		} else {
			st.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, st)
			continue
		}
		if t := h.Meta.Image().Topic(name); t != nil {
			st.TopicID = t.ID
		}
		err := h.deleteTopic(name)
		st.ErrorCode = code(err)
		st.ErrorMessage = errMsg(err)
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}
