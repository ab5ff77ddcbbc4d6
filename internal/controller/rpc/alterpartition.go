package rpc

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// AlterPartition v0-v3 -> state.Controller.AlterPartition: a partition leader's ISR changes.
// v0-v1 name topics, v2+ use topic ids; v3 gives each ISR member with its broker epoch, and
// a member whose epoch is not its current registration's (a restarted broker) is
// INELIGIBLE_REPLICA for that partition, as in Kafka (-1 skips the check). Only the
// RECOVERED leader recovery state (0) is accepted: this cluster never elects a leader that
// must recover first. A stale or unknown sender is the top-level error.

func handleAlterPartition(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AlterPartitionRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionResponse)
	type result struct {
		topErr error
		items  [][]state.AlterPartitionResult // per request topic, per partition
		errs   [][]error                      // errors found here, before the state machine
	}
	res, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, result) {
		im := c.Image()
		out := result{items: make([][]state.AlterPartitionResult, len(req.Topics)), errs: make([][]error, len(req.Topics))}
		sreq := state.AlterPartitionRequest{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch}
		type at struct{ t, p int }
		var index []at
		for ti, rt := range req.Topics {
			out.errs[ti] = make([]error, len(rt.Partitions))
			out.items[ti] = make([]state.AlterPartitionResult, len(rt.Partitions))
			id := state.UUID(rt.TopicID)
			if req.Version < 2 {
				if t := im.Topic(rt.Topic); t != nil {
					id = t.ID
				} else {
					for pi := range rt.Partitions {
						out.errs[ti][pi] = fmt.Errorf("%w: topic %q does not exist", kerr.UnknownTopicOrPartition, rt.Topic)
					}
					continue
				}
			}
			for pi, rp := range rt.Partitions {
				item := state.AlterPartitionItem{TopicID: id, Partition: rp.Partition, LeaderEpoch: rp.LeaderEpoch, PartitionEpoch: rp.PartitionEpoch}
				if rp.LeaderRecoveryState != 0 {
					out.errs[ti][pi] = fmt.Errorf("%w: leader recovery state %d", kerr.InvalidRequest, rp.LeaderRecoveryState)
					continue
				}
				if req.Version >= 3 {
					for _, m := range rp.NewEpochISR {
						if b := im.Broker(m.BrokerID); m.BrokerEpoch != -1 && (b == nil || b.Epoch != m.BrokerEpoch) {
							out.errs[ti][pi] = fmt.Errorf("%w: broker %d of epoch %d is not registered", kerr.IneligibleReplica, m.BrokerID, m.BrokerEpoch)
						}
						item.NewISR = append(item.NewISR, m.BrokerID)
					}
					if out.errs[ti][pi] != nil {
						continue
					}
				} else {
					item.NewISR = rp.NewISR
				}
				sreq.Partitions = append(sreq.Partitions, item)
				index = append(index, at{ti, pi})
			}
		}
		recs, results, err := c.AlterPartition(sreq)
		if err != nil {
			out.topErr = err
			return nil, out
		}
		for i, r := range results {
			out.items[index[i].t][index[i].p] = r
		}
		return recs, out
	})
	if err == nil {
		err = res.topErr
	}
	resp.ErrorCode = code(err)
	for ti, rt := range req.Topics {
		t := kmsg.NewAlterPartitionResponseTopic()
		t.Topic, t.TopidID = rt.Topic, rt.TopicID
		for pi, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case err != nil:
				if code(err) == kerr.NotController.Code {
					p.ErrorCode = code(err)
				}
			case res.errs[ti][pi] != nil:
				p.ErrorCode = code(res.errs[ti][pi])
			default:
				it := res.items[ti][pi]
				p.ErrorCode = code(it.Err)
				p.LeaderID, p.LeaderEpoch, p.ISR, p.PartitionEpoch = it.Leader, it.LeaderEpoch, it.ISR, it.PartitionEpoch
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
