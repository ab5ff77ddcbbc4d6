package rpc

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
)

// AlterUserScramCredentials v0 -> state.Controller.AlterUserScramCredentials: one result
// per user named, with Kafka's codes (UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM,
// RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE; see the state machine). The salt and salted
// password are copied out of the request buffer, which the records outlive.

func handleAlterUserSCRAMCredentials(h *Handler, ctx context.Context, r kmsg.Request) kmsg.Response {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var sreq state.AlterScramRequest
	for _, d := range req.Deletions {
		sreq.Deletions = append(sreq.Deletions, state.ScramDeletion{User: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range req.Upsertions {
		sreq.Upsertions = append(sreq.Upsertions, state.ScramUpsertion{
			User: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations,
			Salt: bytes.Clone(u.Salt), SaltedPassword: bytes.Clone(u.SaltedPassword),
		})
	}
	results, err := do(ctx, h, 0, func(c *state.Controller, _ int64) ([]state.Record, []state.AlterScramResult) {
		return c.AlterUserScramCredentials(sreq)
	})
	if err != nil {
		// Every user named gets the error, once.
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				results = append(results, state.AlterScramResult{User: user, Err: err})
			}
		}
		for _, d := range sreq.Deletions {
			add(d.User)
		}
		for _, u := range sreq.Upsertions {
			add(u.User)
		}
	}
	for _, res := range results {
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User, rr.ErrorCode, rr.ErrorMessage = res.User, code(res.Err), errMsg(res.Err)
		resp.Results = append(resp.Results, rr)
	}
	return resp
}
