package api

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
)

// DescribeUserScramCredentials v0: the mechanisms and iteration counts (never the keys) of
// users' SCRAM credentials, from this broker's metadata image, as Kafka's ScramImage
// answers: a null or empty user list describes every user that has a credential (sorted);
// a user named twice is DUPLICATE_RESOURCE (once), a user without a credential
// RESOURCE_NOT_FOUND. Named users are answered in the order first named.

func handleDescribeUserSCRAMCredentials(h *Handler, _ context.Context, c *Conn, r kmsg.Request) Reply {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if err := h.clusterDenied(c, kmsg.ACLOperationDescribe); err != nil { // authorize.go
		resp.ErrorCode, resp.ErrorMessage = code(err), errMsg(err)
		return msg(resp)
	}
	im := h.Meta.Image()
	var users []string
	dup := map[string]bool{}
	if len(req.Users) == 0 {
		users = im.ScramUsers()
	} else {
		named := map[string]bool{}
		for _, u := range req.Users {
			if named[u.Name] {
				dup[u.Name] = true
				continue
			}
			named[u.Name] = true
			users = append(users, u.Name)
		}
	}
	for _, user := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		var err error
		if dup[user] {
			err = fmt.Errorf("%w: user %q is named more than once", kerr.DuplicateResource, user)
		} else if res.CredentialInfos = scramInfos(im, user); len(res.CredentialInfos) == 0 {
			err = fmt.Errorf("%w: user %q has no SCRAM credential", kerr.ResourceNotFound, user)
		}
		res.ErrorCode, res.ErrorMessage = code(err), errMsg(err)
		resp.Results = append(resp.Results, res)
	}
	return msg(resp)
}

// scramInfos lists user's mechanisms and iteration counts.
func scramInfos(im *metadata.Image, user string) []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
	var infos []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo
	for _, m := range []int8{state.ScramSHA256, state.ScramSHA512} {
		if c, ok := im.ScramCredential(user, m); ok {
			info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			info.Mechanism, info.Iterations = m, c.Iterations
			infos = append(infos, info)
		}
	}
	return infos
}
