package rpc

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/quota"
)

// AlterClientQuotas v0-v1 -> state.Controller.AlterClientQuotas: sets and removes client
// quotas (KIP-546), each entity succeeding or failing alone with INVALID_REQUEST and Kafka's
// message; validate_only checks and writes nothing. The response names each entity as the
// request did.

func handleAlterClientQuotas(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	sreq := state.AlterClientQuotasRequest{ValidateOnly: req.ValidateOnly}
	for _, e := range req.Entries {
		a := state.ClientQuotaAlteration{}
		for _, p := range e.Entity {
			a.Entity = append(a.Entity, quota.Part{Type: p.Type, Name: p.Name})
		}
		for _, op := range e.Ops {
			a.Ops = append(a.Ops, state.ClientQuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		sreq.Alterations = append(sreq.Alterations, a)
	}
	errs, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, []error) {
		return c.AlterClientQuotas(sreq)
	})
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			rp := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rp.Type, rp.Name = p.Type, p.Name
			re.Entity = append(re.Entity, rp)
		}
		ierr := err
		if ierr == nil {
			ierr = errs[i]
		}
		re.ErrorCode, re.ErrorMessage = code(ierr), errMsg(ierr)
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}
