package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/quota"
)

// AlterClientQuotas v0-v1 (KIP-546): forwarded to the controller, which validates each
// entity and its keys as Kafka's ClientQuotaControlManager does and answers each entry alone
// (INVALID_REQUEST with Kafka's message). Unless validate_only, the broker then waits, at most
// configVisibleTimeout, until its own image shows every change the controller accepted, so
// a DescribeClientQuotas sent here next sees it and the next request is measured against it.

func handleAlterClientQuotas(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	errs := make([]error, len(req.Entries))
	fwd, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationAlterConfigs, req) // ALTER_CONFIGS on the cluster, as Kafka
	var answers []kmsg.AlterClientQuotasResponseEntry
	if err == nil {
		answers = fwd.(*kmsg.AlterClientQuotasResponse).Entries
	}
	var wants []quotaWant
	for i := range req.Entries {
		switch {
		case err != nil:
			errs[i] = err
		case i >= len(answers):
			errs[i] = fmt.Errorf("api: the controller answered %d of %d client quota entries", len(answers), len(req.Entries))
		default:
			errs[i] = controllerError(answers[i].ErrorCode, answers[i].ErrorMessage)
			if errs[i] == nil && !req.ValidateOnly {
				wants = append(wants, wantQuotas(req.Entries[i])...)
			}
		}
	}
	if len(wants) > 0 {
		// The controller has the change; a slow image only delays a describe here.
		if err := h.awaitMetadata(ctx, func(im *metadata.Image) bool { return showsQuotas(im, wants) }, configVisibleTimeout); err != nil {
			h.Log.Info("client quota change not yet in this broker's image", "err", err)
		}
	}
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			rp := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rp.Type, rp.Name = p.Type, p.Name
			re.Entity = append(re.Entity, rp)
		}
		re.ErrorCode, re.ErrorMessage = code(errs[i]), errMsg(errs[i])
		resp.Entries = append(resp.Entries, re)
	}
	return msg(resp)
}

// quotaWant is one key of one entity as an accepted alteration leaves it.
type quotaWant struct {
	entity quota.Entity
	key    string
	value  float64
	remove bool
}

// wantQuotas lists what the accepted entry e leaves in the image.
func wantQuotas(e kmsg.AlterClientQuotasRequestEntry) []quotaWant {
	parts := make([]quota.Part, len(e.Entity))
	for i, p := range e.Entity {
		parts[i] = quota.Part{Type: p.Type, Name: p.Name}
	}
	ent, err := quota.ParseEntity(parts)
	if err != nil {
		return nil // the controller accepted it: it parses; nothing to wait for otherwise
	}
	ws := make([]quotaWant, len(e.Ops))
	for i, op := range e.Ops {
		ws[i] = quotaWant{entity: ent, key: op.Key, value: op.Value, remove: op.Remove}
	}
	return ws
}

func showsQuotas(im *metadata.Image, wants []quotaWant) bool {
	for _, w := range wants {
		v, ok := im.ClientQuotas[w.entity][w.key]
		if ok == w.remove || (ok && v != w.value) {
			return false
		}
	}
	return true
}
