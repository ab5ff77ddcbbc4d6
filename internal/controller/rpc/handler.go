// Package rpc is the controller's network face: the Kafka-protocol APIs a controller serves
// on its CONTROLLER listener, one file per API key (as package api does for brokers).
//
// Brokers register (BrokerRegistration), heartbeat (BrokerHeartbeat), report ISR changes
// (AlterPartition) and the replicas of a failed log dir (AssignReplicasToDirs), get producer
// id blocks (AllocateProducerIds) and forward admin requests
// (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs,
// ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, UnregisterBroker,
// CreateAcls, DeleteAcls, AlterUserScramCredentials) here; each becomes one command of the state machine (package state) run by the quorum on
// the active controller. Any other controller answers them with NOT_CONTROLLER in every error field of
// the response, and DescribeQuorum tells the client which controller is active.
//
// Every controller, active or not, serves the metadata log from its own applied state:
// Fetch of __cluster_metadata partition 0 and FetchSnapshot (see metadatalog.go for the
// format).
//
// Errors: the state machine returns errors wrapping kerr sentinels; they become error codes
// here (code) and nowhere else.
package rpc

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/server"
)

// Config configures a controller's handler.
type Config struct {
	Node *quorum.Node
	// ListenerName is the name of the controller listener (default CONTROLLER), reported
	// with the voters' addresses by DescribeQuorum v2.
	ListenerName string
	// MaxRequestBytes is socket.request.max.bytes (default 100 MiB).
	MaxRequestBytes int32
	// DeleteTopicDisabled is delete.topic.enable=false: DeleteTopics gets
	// TOPIC_DELETION_DISABLED.
	DeleteTopicDisabled bool
	// TopicConfigs describes a new topic's configs for CreateTopics v5+ from its overrides
	// (a broker's config.Broker.DescribeTopic, converted). Default: the overrides alone, as
	// DYNAMIC_TOPIC_CONFIG.
	TopicConfigs func(overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig
	// MayForward reports whether a connection's principal may send Envelopes, speaking for
	// other principals (Kafka checks CLUSTER_ACTION on the cluster; with an authorizer,
	// brokers are super users, KIP-801). nil: every connection the listener lets in.
	MayForward func(p authz.Principal) bool
	Logger     *slog.Logger // default slog.Default()
}

// Handler serves the controller APIs of one quorum node. It implements server.Handler and is
// safe for concurrent use.
type Handler struct {
	cfg  Config
	node *quorum.Node
	log  *slog.Logger
}

// New returns the handler for cfg.Node.
func New(cfg Config) *Handler {
	if cfg.ListenerName == "" {
		cfg.ListenerName = "CONTROLLER"
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.TopicConfigs == nil {
		cfg.TopicConfigs = overridesOnly
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg, node: cfg.Node, log: cfg.Logger}
}

// handlerFunc answers one request of the API key it is listed under.
type handlerFunc = func(h *Handler, ctx context.Context, req kmsg.Request) kmsg.Response

// apis lists every API key a controller serves, with the versions each file implements.
// It is assigned in init only because handleApiVersions reads it (an initialization cycle
// otherwise).
var apis server.APIs[handlerFunc]

func init() {
	apis = server.APIs[handlerFunc]{
		kmsg.ApiVersions.Int16():                {Min: 0, Max: 3, Handle: handleApiVersions},
		kmsg.DescribeQuorum.Int16():             {Min: 0, Max: 2, Handle: handleDescribeQuorum},
		kmsg.BrokerRegistration.Int16():         {Min: 0, Max: 4, Handle: handleBrokerRegistration},
		kmsg.BrokerHeartbeat.Int16():            {Min: 0, Max: 2, Handle: handleBrokerHeartbeat},
		kmsg.AlterPartition.Int16():             {Min: 0, Max: 3, Handle: handleAlterPartition},
		kmsg.AssignReplicasToDirs.Int16():       {Min: 0, Max: 0, Handle: handleAssignReplicasToDirs},
		kmsg.AllocateProducerIDs.Int16():        {Min: 0, Max: 0, Handle: handleAllocateProducerIDs},
		kmsg.CreateTopics.Int16():               {Min: 0, Max: 7, Handle: handleCreateTopics},
		kmsg.DeleteTopics.Int16():               {Min: 0, Max: 6, Handle: handleDeleteTopics},
		kmsg.CreatePartitions.Int16():           {Min: 0, Max: 3, Handle: handleCreatePartitions},
		kmsg.AlterConfigs.Int16():               {Min: 0, Max: 2, Handle: handleAlterConfigs},
		kmsg.IncrementalAlterConfigs.Int16():    {Min: 0, Max: 1, Handle: handleIncrementalAlterConfigs},
		kmsg.ElectLeaders.Int16():               {Min: 0, Max: 2, Handle: handleElectLeaders},
		kmsg.AlterPartitionAssignments.Int16():  {Min: 0, Max: 1, Handle: handleAlterPartitionAssignments},
		kmsg.ListPartitionReassignments.Int16(): {Min: 0, Max: 0, Handle: handleListPartitionReassignments},
		kmsg.UnregisterBroker.Int16():           {Min: 0, Max: 0, Handle: handleUnregisterBroker},
		kmsg.CreateACLs.Int16():                 {Min: 0, Max: 3, Handle: handleCreateACLs},
		kmsg.DeleteACLs.Int16():                 {Min: 0, Max: 3, Handle: handleDeleteACLs},
		kmsg.AlterUserSCRAMCredentials.Int16():  {Min: 0, Max: 0, Handle: handleAlterUserSCRAMCredentials},
		kmsg.AlterClientQuotas.Int16():          {Min: 0, Max: 1, Handle: handleAlterClientQuotas},
		kmsg.Fetch.Int16():                      {Min: 12, Max: 17, Handle: handleFetch},
		kmsg.FetchSnapshot.Int16():              {Min: 0, Max: 1, Handle: handleFetchSnapshot},
		kmsg.SASLHandshake.Int16():              {Min: 0, Max: 1, Handle: handleSaslHandshake},
		kmsg.SASLAuthenticate.Int16():           {Min: 0, Max: 2, Handle: handleSaslAuthenticate},
		kmsg.Envelope.Int16():                   {Min: 0, Max: 0, Handle: handleEnvelope},
	}
}

// Versions reports the served version range of an API key.
func (h *Handler) Versions(key int16) (int16, int16, bool) {
	return apis.Versions(key)
}

// MaxRequestBytes is socket.request.max.bytes.
func (h *Handler) MaxRequestBytes() int32 { return h.cfg.MaxRequestBytes }

// Handle answers one request whose key and version were checked against Versions.
func (h *Handler) Handle(ctx context.Context, c *server.Conn, req kmsg.Request) server.Reply {
	if req.Key() == kmsg.Envelope.Int16() && h.cfg.MayForward != nil && !h.cfg.MayForward(c.Principal) {
		h.log.Info("envelope refused: its sender may not speak for other principals", "principal", c.Principal.String())
		resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return server.Reply{Msg: resp}
	}
	return server.Reply{Msg: apis[req.Key()].Handle(h, ctx, req)}
}

// handleApiVersions is ApiVersions v0-v3.
func handleApiVersions(_ *Handler, _ context.Context, _ kmsg.Request) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = apis.ApiKeys()
	return resp
}

// UnsupportedApiVersions is the KIP-511 v0 answer with UNSUPPORTED_VERSION and the served
// ranges.
func (h *Handler) UnsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apis.ApiKeys()
	return resp
}

// MaxVersion is the highest version of key a controller serves (-1 if unserved).
func MaxVersion(key int16) int16 { return apis.MaxVersion(key) }

// maxRecordsPerUserOp bounds the records one admin request may produce (Kafka's
// QuorumController.MAX_RECORDS_PER_USER_OP); a request over it is refused whole with
// POLICY_VIOLATION and Kafka's message.
const maxRecordsPerUserOp = 10000

var errExcessiveBatch = errors.New("Unable to perform excessively large batch operation.") //nolint:staticcheck // Kafka's message, verbatim

// do runs cmd on the active controller, within timeoutMs when it is positive.
func do[R any](ctx context.Context, h *Handler, timeoutMs int32, cmd func(c *state.Controller, now int64) ([]state.Record, R)) (R, error) {
	if timeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
		defer cancel()
	}
	return quorum.Do(ctx, h.node, cmd)
}

// code translates an error to its Kafka error code: the kerr sentinel it wraps; a stopped
// controller is NOT_CONTROLLER (the client looks for another), a command that ran out of
// time REQUEST_TIMED_OUT.
func code(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, quorum.ErrStopped):
		return kerr.NotController.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, errExcessiveBatch):
		return kerr.PolicyViolation.Code
	}
	return state.ErrorCode(err)
}

// errMsg is the message for a response's ErrorMessage field (nil when err is nil).
func errMsg(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

func overridesOnly(overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(keys))
	for _, k := range keys {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		v := overrides[k]
		c.Name, c.Value, c.Source = k, &v, int8(kmsg.ConfigSourceDynamicTopicConfig)
		out = append(out, c)
	}
	return out
}
