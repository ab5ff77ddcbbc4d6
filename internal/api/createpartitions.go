package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions v0-v3: raise a topic's partition count (never lower it), with an optional
// assignment for the new partitions, or just validate.

func handleCreatePartitions(h *Handler, _ context.Context, _ *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	// One record per new partition, bounded per request as in Kafka.
	var records int64
	for _, rt := range req.Topics {
		if t := h.Meta.Image().Topic(rt.Topic); t != nil && rt.Count > t.Partitions {
			records += int64(rt.Count - t.Partitions)
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		err := errExcessiveBatch
		if records <= maxRecordsPerUserOp {
			err = h.createPartitions(rt, req.ValidateOnly)
		}
		st.ErrorCode = code(err)
		st.ErrorMessage = errMsg(err)
		resp.Topics = append(resp.Topics, st)
	}
	return msg(resp)
}

func (h *Handler) createPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	t := h.Meta.Image().Topic(rt.Topic)
	if t == nil {
		return fmt.Errorf("%w: %s", errUnknownPartition, rt.Topic)
	}
	if rt.Count <= t.Partitions {
		return fmt.Errorf("%w: topic %s has %d partitions; the new count %d must be larger", errInvalidPartitions, t.Name, t.Partitions, rt.Count)
	}
	if rt.Assignment != nil {
		if len(rt.Assignment) != int(rt.Count-t.Partitions) {
			return fmt.Errorf("%w: %d assignments for %d new partitions", errInvalidAssignment, len(rt.Assignment), rt.Count-t.Partitions)
		}
		a := map[int32][]int32{}
		for i, ra := range rt.Assignment {
			if len(ra.Replicas) != int(t.ReplicationFactor) {
				return fmt.Errorf("%w: %d replicas for replication factor %d", errInvalidAssignment, len(ra.Replicas), t.ReplicationFactor)
			}
			a[t.Partitions+int32(i)] = ra.Replicas
		}
		if err := h.checkAssignment(a, t.Partitions, rt.Count); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	nt, err := h.Meta.SetPartitions(t.Name, rt.Count)
	if err != nil {
		return err
	}
	return h.OpenPartitions(nt, t.Partitions)
}
