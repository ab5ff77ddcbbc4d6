package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/txn"
)

// ApiVersions v0-v3. A request of a newer version is answered by UnsupportedApiVersions
// (KIP-511) from the connection loop.
//
// From v3 the answer carries the broker's features (KIP-584) as Kafka 4.x does: the one
// feature Gregor versions is transaction.version, supported 0-2 and finalized at
// txn.TransactionVersion (2), which tells clients that check it (Kafka 4.x's, franz-go) to
// run transactions of KIP-890 part 2: Produce v12 and TxnOffsetCommit v5 add their
// partitions to the transaction themselves, and EndTxn v5 bumps the epoch. Clients that do
// not look at it go on with transaction version 0/1 (AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn v4 and older), which every broker still serves. The finalized level is the same on
// every broker (it is the binary's), and its epoch is the metadata offset the broker has
// applied, as Kafka's is, so it only grows.

// transactionVersionFeature is Kafka's name of the transaction protocol's feature.
const transactionVersionFeature = "transaction.version"

func handleApiVersions(h *Handler, _ context.Context, _ *Conn, _ kmsg.Request) Reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = apis.ApiKeys()
	resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{
		Name: transactionVersionFeature, MinVersion: 0, MaxVersion: txn.TransactionVersion,
	}}
	resp.FinalizedFeaturesEpoch = 0
	if im := h.Meta.Image(); im.Offset > 0 {
		resp.FinalizedFeaturesEpoch = im.Offset
	}
	resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{
		Name: transactionVersionFeature, MinVersionLevel: txn.TransactionVersion, MaxVersionLevel: txn.TransactionVersion,
	}}
	return msg(resp)
}

// UnsupportedApiVersions is the v0 answer with UNSUPPORTED_VERSION and the served ranges.
func (h *Handler) UnsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apis.ApiKeys()
	return resp
}
