// Package api answers Kafka requests: one file per API key, each stating the versions it
// serves. Handlers translate internal sentinel errors to Kafka error codes (errors.go) at this
// boundary and nowhere else.
package api

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/fetchsession"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/txn"
)

// Handler is the broker's request handler. It is safe for concurrent use by every connection.
type Handler struct {
	Cfg      *config.Broker
	Meta     *metadata.Publisher
	Replicas *replica.Manager
	Logs     *storage.Manager
	Log      *slog.Logger
	Now      func() time.Time
	Groups   *group.Coordinator
	// Txns is the transaction coordinator (internal/txn); nil answers every transactional
	// request COORDINATOR_NOT_AVAILABLE.
	Txns *txn.Coordinator
	// ShareStates is the share coordinator (internal/share StateCoordinator) over
	// __share_group_state; nil keeps share-partition state in memory only.
	ShareStates *share.StateCoordinator
	// Brokers reaches other brokers on the inter-broker listener (produce's transaction
	// verification asks a remote coordinator through it); nil when there are none to reach.
	Brokers BrokerChannel
	// Controller carries requests to the active controller of the quorum (admin requests
	// are forwarded there, AllocateProducerIds, ...). Nil only in tests of the single-node
	// paths that never reach it.
	Controller ControllerChannel

	// Listeners checks a change of this broker's dynamic listener stores before it is
	// forwarded (configs.go); nil: such changes are refused, nothing here can check them.
	Listeners ListenerStores

	NodeID    int32
	ClusterID string
	Rack      string
	// Topics are the per-topic BrokerTopicMetrics Produce and Fetch count into; nil: none.
	Topics *observe.Topics
	// fetchesWaiting is the Fetch requests parked (long poll) now: the Fetch purgatory's
	// size (FetchesWaiting).
	fetchesWaiting atomic.Int64
	// replicationQuota is the leader's replication quota (replicationquota.go).
	replicationQuota leaderQuota
	// autoCreation is Metadata's auto-creation of topics (autocreate.go).
	autoCreation autoCreator
	// clientQuotas are the client quota managers (clientquota.go), made on first use.
	clientQuotas clientQuotas
	// sessions is the fetch session cache (fetchsession.go), made on first use.
	sessions     *fetchsession.Cache
	sessionsOnce sync.Once
	// pids is the block of producer ids handed to idempotent producers (initproducerid.go),
	// made on first use.
	pids     *ProducerIDs
	pidsOnce sync.Once
	// shares are the share groups, share-partitions and share sessions (sharegroups.go),
	// made on first use.
	shares     *share.Manager
	sharesOnce sync.Once
	// authz is the standard authorizer of the last image asked about (authorize.go).
	authz atomic.Pointer[authzState]
}

// ListenerStores checks the listener key and trust stores a configuration names against
// the ones this broker's listeners serve (internal/broker): Kafka's
// SslFactory.validateReconfiguration, run before a dynamic change is stored.
type ListenerStores interface {
	CheckListenerStores(next *config.Broker) error
}

// ControllerChannel is the broker's channel to the active controller
// (internal/controller/client.Client): it finds the active controller and retries
// NOT_CONTROLLER and connection failures itself until ctx ends.
type ControllerChannel interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	ActiveController() int32 // node id, -1 when unknown
}

// BrokerChannel sends a request to another broker of the cluster on the inter-broker
// listener (internal/broker's pool of wire connections), at the version set on req.
type BrokerChannel interface {
	Request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)
}

// Versions reports the served version range of an API key.
func (h *Handler) Versions(key int16) (int16, int16, bool) {
	return apis.Versions(key)
}

// MaxRequestBytes is socket.request.max.bytes.
func (h *Handler) MaxRequestBytes() int32 { return h.Cfg.Current().SocketRequestMaxBytes }

// Handle answers one request whose key and version were checked against Versions.
func (h *Handler) Handle(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	return h.withRequestQuota(ctx, c, req, apis[req.Key()].Handle)
}

func msg(r kmsg.Response) Reply { return Reply{Msg: r} }

func (h *Handler) nowMs() int64 { return h.Now().UnixMilli() }
