package rpc

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// DeleteTopics v0-v6 -> state.Controller.DeleteTopics, by name (v0-v5, and v6 entries with a
// name) or by topic id (v6 entries without one). With delete.topic.enable=false every topic
// gets TOPIC_DELETION_DISABLED. Answers list names first, then ids, as the state machine
// does.

func handleDeleteTopics(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var sreq state.DeleteTopicsRequest
	if req.Version < 6 {
		sreq.Names = req.TopicNames
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				sreq.Names = append(sreq.Names, *t.Topic)
			} else {
				sreq.IDs = append(sreq.IDs, state.UUID(t.TopicID))
			}
		}
	}
	fail := func(err error) kmsg.Response {
		for _, n := range sreq.Names {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = &n, code(err), errMsg(err)
			resp.Topics = append(resp.Topics, t)
		}
		for _, id := range sreq.IDs {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.TopicID, t.ErrorCode, t.ErrorMessage = id, code(err), errMsg(err)
			resp.Topics = append(resp.Topics, t)
		}
		return resp
	}
	if h.cfg.DeleteTopicDisabled {
		return fail(fmt.Errorf("%w: delete.topic.enable is false", kerr.TopicDeletionDisabled))
	}
	results, err := do(ctx, h, req.TimeoutMillis, func(c *state.Controller, _ int64) ([]state.Record, []state.DeleteTopicResult) {
		return c.DeleteTopics(sreq)
	})
	if err != nil {
		return fail(err)
	}
	for _, res := range results {
		t := kmsg.NewDeleteTopicsResponseTopic()
		if res.Name != "" {
			name := res.Name
			t.Topic = &name
		}
		t.TopicID = res.ID
		t.ErrorCode, t.ErrorMessage = code(res.Err), errMsg(res.Err)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
