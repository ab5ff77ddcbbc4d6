package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one served API key: its version range and handler.
type api struct {
	min, max int16
	handle   func(h *Handler, ctx context.Context, c *Conn, req kmsg.Request) Reply
}

// apis lists every API key the broker serves, with the versions each file implements; one
// literal, so the served keys are read in one place. Handler.Versions and Handle read it,
// and ApiVersions answers from it.
var apis map[int16]api

// The table is assigned in init rather than in its declaration only because some handlers
// read it (ApiVersions lists it, forwarded requests take their version from it), which Go
// reports as an initialization cycle. This is the package's only init touching the table.
func init() {
	apis = map[int16]api{
		kmsg.ApiVersions.Int16():                  {0, 3, handleApiVersions},
		kmsg.Metadata.Int16():                     {0, 12, handleMetadata},
		kmsg.Produce.Int16():                      {0, 12, handleProduce},
		kmsg.Fetch.Int16():                        {0, 17, handleFetch},
		kmsg.ListOffsets.Int16():                  {0, 9, handleListOffsets},
		kmsg.OffsetForLeaderEpoch.Int16():         {0, 4, handleOffsetForLeaderEpoch},
		kmsg.CreateTopics.Int16():                 {0, 7, handleCreateTopics},
		kmsg.DeleteTopics.Int16():                 {0, 6, handleDeleteTopics},
		kmsg.CreatePartitions.Int16():             {0, 3, handleCreatePartitions},
		kmsg.DescribeConfigs.Int16():              {0, 4, handleDescribeConfigs},
		kmsg.AlterConfigs.Int16():                 {0, 2, handleAlterConfigs},
		kmsg.IncrementalAlterConfigs.Int16():      {0, 1, handleIncrementalAlterConfigs},
		kmsg.DeleteRecords.Int16():                {0, 2, handleDeleteRecords},
		kmsg.DescribeCluster.Int16():              {0, 1, handleDescribeCluster},
		kmsg.DescribeLogDirs.Int16():              {0, 4, handleDescribeLogDirs},
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
		// Served only by forwarding to the controller.
		kmsg.ElectLeaders.Int16():               {0, 2, handleElectLeaders},
		kmsg.AlterPartitionAssignments.Int16():  {0, 1, handleAlterPartitionReassignments},
		kmsg.ListPartitionReassignments.Int16(): {0, 0, handleListPartitionReassignments},
		kmsg.UnregisterBroker.Int16():           {0, 0, handleUnregisterBroker},
	}
}
