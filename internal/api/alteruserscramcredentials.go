package api

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
)

// AlterUserScramCredentials v0: decided by the controller, with one result per user named
// (UNACCEPTABLE_CREDENTIAL for an empty name or iterations outside 4096-16384,
// UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND for deleting a credential that does not
// exist, DUPLICATE_RESOURCE for a user altered twice in one request), then answered once
// this broker's image shows every change that succeeded, at most configVisibleTimeout later
// (another client's change meanwhile may hide it; it is answered as the controller
// answered). Kafka serves it with or without an authorizer; so does this broker.

func handleAlterUserSCRAMCredentials(h *Handler, ctx context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	ctx, cancel := adminContext(ctx, req)
	defer cancel()
	resp, err := h.forwardIfAuthorized(ctx, c, kmsg.ACLOperationAlter, req) // authorize.go
	if err != nil {
		out := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(user string) {
			if !seen[user] {
				seen[user] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode, res.ErrorMessage = user, code(err), errMsg(err)
				out.Results = append(out.Results, res)
			}
		}
		for _, d := range req.Deletions {
			add(d.Name)
		}
		for _, u := range req.Upsertions {
			add(u.Name)
		}
		return msg(out)
	}
	ok := map[string]bool{}
	for _, res := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if res.ErrorCode == 0 {
			ok[res.User] = true
		}
	}
	// What the image must show: no credential for each deletion that succeeded, and for
	// each upsertion the credential the controller derived.
	type want struct {
		user       string
		mechanism  int8
		gone       bool
		salt       []byte
		storedKey  []byte
		iterations int32
	}
	var wants []want
	for _, d := range req.Deletions {
		if ok[d.Name] {
			wants = append(wants, want{user: d.Name, mechanism: d.Mechanism, gone: true})
		}
	}
	for _, u := range req.Upsertions {
		if ok[u.Name] && state.ScramMechanismName(u.Mechanism) != "" {
			stored, _ := state.DeriveScramKeys(u.Mechanism, u.SaltedPassword)
			wants = append(wants, want{user: u.Name, mechanism: u.Mechanism, salt: u.Salt, storedKey: stored, iterations: u.Iterations})
		}
	}
	if err := h.awaitMetadata(ctx, func(im *metadata.Image) bool {
		for _, w := range wants {
			c, has := im.ScramCredential(w.user, w.mechanism)
			if w.gone {
				if has {
					return false
				}
				continue
			}
			if !has || c.Iterations != w.iterations || !bytes.Equal(c.Salt, w.salt) || !bytes.Equal(c.StoredKey, w.storedKey) {
				return false
			}
		}
		return true
	}, configVisibleTimeout); err != nil {
		h.Log.Warn("SCRAM credential changes not shown in this broker's metadata in time", "err", err)
	}
	return msg(resp)
}
