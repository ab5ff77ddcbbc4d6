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
	"github.com/gregor-project/gregor/internal/replica"
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
	// replicationQuota is the leader's replication quota (replicationquota.go).
	replicationQuota leaderQuota
	// autoCreation is Metadata's auto-creation of topics (autocreate.go).
	autoCreation autoCreator
	// clientQuotas are the client quota managers (clientquota.go), made on first use.
	clientQuotas clientQuotas
	// sessions is the fetch session cache (fetchsession.go), made on first use.
	sessions     *fetchsession.Cache
	sessionsOnce sync.Once
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

// api is one served API key: its version range and handler.
type api struct {
	min, max int16
	handle   func(h *Handler, ctx context.Context, c *Conn, req kmsg.Request) Reply
}

// apis lists every API key served, with the versions each file implements.
var apis map[int16]api

func init() {
	apis = map[int16]api{
		kmsg.ApiVersions.Int16():                  {0, 3, handleApiVersions},
		kmsg.Metadata.Int16():                     {0, 12, handleMetadata},
		kmsg.Produce.Int16():                      {0, 12, handleProduce},
		kmsg.Fetch.Int16():                        {0, 17, handleFetch},
		kmsg.ListOffsets.Int16():                  {0, 9, handleListOffsets},
		kmsg.CreateTopics.Int16():                 {0, 7, handleCreateTopics},
		kmsg.DeleteTopics.Int16():                 {0, 6, handleDeleteTopics},
		kmsg.CreatePartitions.Int16():             {0, 3, handleCreatePartitions},
		kmsg.DescribeConfigs.Int16():              {0, 4, handleDescribeConfigs},
		kmsg.AlterConfigs.Int16():                 {0, 2, handleAlterConfigs},
		kmsg.IncrementalAlterConfigs.Int16():      {0, 1, handleIncrementalAlterConfigs},
		kmsg.DeleteRecords.Int16():                {0, 2, handleDeleteRecords},
		kmsg.DescribeCluster.Int16():              {0, 1, handleDescribeCluster},
		kmsg.DescribeLogDirs.Int16():              {0, 4, handleDescribeLogDirs},
		kmsg.AlterReplicaLogDirs.Int16():          {0, 2, handleAlterReplicaLogDirs},
		kmsg.InitProducerID.Int16():               {0, 5, handleInitProducerID},
		kmsg.FindCoordinator.Int16():              {0, 6, handleFindCoordinator},
		kmsg.JoinGroup.Int16():                    {0, 9, handleJoinGroup},
		kmsg.SyncGroup.Int16():                    {0, 5, handleSyncGroup},
		kmsg.Heartbeat.Int16():                    {0, 4, handleHeartbeat},
		kmsg.LeaveGroup.Int16():                   {0, 5, handleLeaveGroup},
		kmsg.OffsetCommit.Int16():                 {0, 9, handleOffsetCommit},
		kmsg.OffsetFetch.Int16():                  {0, 9, handleOffsetFetch},
		kmsg.TxnOffsetCommit.Int16():              {0, 5, handleTxnOffsetCommit},
		kmsg.OffsetDelete.Int16():                 {0, 0, handleOffsetDelete},
		kmsg.DescribeGroups.Int16():               {0, 5, handleDescribeGroups},
		kmsg.ListGroups.Int16():                   {0, 5, handleListGroups},
		kmsg.DeleteGroups.Int16():                 {0, 2, handleDeleteGroups},
		kmsg.ConsumerGroupHeartbeat.Int16():       {0, 1, handleConsumerGroupHeartbeat},
		kmsg.ConsumerGroupDescribe.Int16():        {0, 1, handleConsumerGroupDescribe},
		kmsg.AddPartitionsToTxn.Int16():           {0, 5, handleAddPartitionsToTxn},
		kmsg.AddOffsetsToTxn.Int16():              {0, 4, handleAddOffsetsToTxn},
		kmsg.EndTxn.Int16():                       {0, 5, handleEndTxn},
		kmsg.WriteTxnMarkers.Int16():              {0, 2, handleWriteTxnMarkers},
		kmsg.DescribeTransactions.Int16():         {0, 0, handleDescribeTransactions},
		kmsg.ListTransactions.Int16():             {0, 2, handleListTransactions},
		kmsg.DescribeProducers.Int16():            {0, 0, handleDescribeProducers},
		kmsg.DescribeACLs.Int16():                 {0, 3, handleDescribeACLs},
		kmsg.CreateACLs.Int16():                   {0, 3, handleCreateACLs},
		kmsg.DeleteACLs.Int16():                   {0, 3, handleDeleteACLs},
		kmsg.DescribeUserSCRAMCredentials.Int16(): {0, 0, handleDescribeUserSCRAMCredentials},
		kmsg.AlterUserSCRAMCredentials.Int16():    {0, 0, handleAlterUserSCRAMCredentials},
		kmsg.SASLHandshake.Int16():                {0, 1, handleSaslHandshake},
		kmsg.SASLAuthenticate.Int16():             {0, 2, handleSaslAuthenticate},
		kmsg.DescribeClientQuotas.Int16():         {0, 1, handleDescribeClientQuotas},
		kmsg.AlterClientQuotas.Int16():            {0, 1, handleAlterClientQuotas},
	}
}

// Versions reports the served version range of an API key.
func (h *Handler) Versions(key int16) (int16, int16, bool) {
	a, ok := apis[key]
	return a.min, a.max, ok
}

// MaxRequestBytes is socket.request.max.bytes.
func (h *Handler) MaxRequestBytes() int32 { return h.Cfg.Current().SocketRequestMaxBytes }

// Handle answers one request whose key and version were checked against Versions.
func (h *Handler) Handle(ctx context.Context, c *Conn, req kmsg.Request) Reply {
	return h.withRequestQuota(ctx, c, req, apis[req.Key()].handle)
}

func msg(r kmsg.Response) Reply { return Reply{Msg: r} }

func (h *Handler) nowMs() int64 { return h.Now().UnixMilli() }
