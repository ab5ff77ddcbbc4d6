package api

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/server"
)

// handlerFunc answers one request of the API key it is listed under.
type handlerFunc = func(h *Handler, ctx context.Context, c *Conn, req kmsg.Request) Reply

// apis lists every API key the broker serves, with the versions each file implements; one
// literal, so the served keys are read in one place. Handler.Versions and Handle read it,
// and ApiVersions answers from it.
var apis server.APIs[handlerFunc]

// The table is assigned in init rather than in its declaration only because some handlers
// read it (ApiVersions lists it, forwarded requests take their version from it), which Go
// reports as an initialization cycle. This is the package's only init touching the table.
func init() {
	apis = server.APIs[handlerFunc]{
		kmsg.ApiVersions.Int16():                  {Min: 0, Max: 3, Handle: handleApiVersions},
		kmsg.CreateDelegationToken.Int16():        {Min: 0, Max: 3, Handle: handleCreateDelegationToken},
		kmsg.RenewDelegationToken.Int16():         {Min: 0, Max: 2, Handle: handleRenewDelegationToken},
		kmsg.ExpireDelegationToken.Int16():        {Min: 0, Max: 2, Handle: handleExpireDelegationToken},
		kmsg.DescribeDelegationToken.Int16():      {Min: 0, Max: 3, Handle: handleDescribeDelegationToken},
		kmsg.Metadata.Int16():                     {Min: 0, Max: 12, Handle: handleMetadata},
		kmsg.Produce.Int16():                      {Min: 0, Max: 12, Handle: handleProduce},
		kmsg.Fetch.Int16():                        {Min: 0, Max: 17, Handle: handleFetch},
		kmsg.ListOffsets.Int16():                  {Min: 0, Max: 9, Handle: handleListOffsets},
		kmsg.OffsetForLeaderEpoch.Int16():         {Min: 0, Max: 4, Handle: handleOffsetForLeaderEpoch},
		kmsg.CreateTopics.Int16():                 {Min: 0, Max: 7, Handle: handleCreateTopics},
		kmsg.DeleteTopics.Int16():                 {Min: 0, Max: 6, Handle: handleDeleteTopics},
		kmsg.CreatePartitions.Int16():             {Min: 0, Max: 3, Handle: handleCreatePartitions},
		kmsg.DescribeConfigs.Int16():              {Min: 0, Max: 4, Handle: handleDescribeConfigs},
		kmsg.AlterConfigs.Int16():                 {Min: 0, Max: 2, Handle: handleAlterConfigs},
		kmsg.IncrementalAlterConfigs.Int16():      {Min: 0, Max: 1, Handle: handleIncrementalAlterConfigs},
		kmsg.DeleteRecords.Int16():                {Min: 0, Max: 2, Handle: handleDeleteRecords},
		kmsg.DescribeCluster.Int16():              {Min: 0, Max: 1, Handle: handleDescribeCluster},
		kmsg.DescribeLogDirs.Int16():              {Min: 0, Max: 4, Handle: handleDescribeLogDirs},
		kmsg.AlterReplicaLogDirs.Int16():          {Min: 0, Max: 2, Handle: handleAlterReplicaLogDirs},
		kmsg.InitProducerID.Int16():               {Min: 0, Max: 5, Handle: handleInitProducerID},
		kmsg.FindCoordinator.Int16():              {Min: 0, Max: 6, Handle: handleFindCoordinator},
		kmsg.JoinGroup.Int16():                    {Min: 0, Max: 9, Handle: handleJoinGroup},
		kmsg.SyncGroup.Int16():                    {Min: 0, Max: 5, Handle: handleSyncGroup},
		kmsg.Heartbeat.Int16():                    {Min: 0, Max: 4, Handle: handleHeartbeat},
		kmsg.LeaveGroup.Int16():                   {Min: 0, Max: 5, Handle: handleLeaveGroup},
		kmsg.OffsetCommit.Int16():                 {Min: 0, Max: 9, Handle: handleOffsetCommit},
		kmsg.OffsetFetch.Int16():                  {Min: 0, Max: 9, Handle: handleOffsetFetch},
		kmsg.TxnOffsetCommit.Int16():              {Min: 0, Max: 5, Handle: handleTxnOffsetCommit},
		kmsg.OffsetDelete.Int16():                 {Min: 0, Max: 0, Handle: handleOffsetDelete},
		kmsg.DescribeGroups.Int16():               {Min: 0, Max: 6, Handle: handleDescribeGroups},
		kmsg.ListGroups.Int16():                   {Min: 0, Max: 5, Handle: handleListGroups},
		kmsg.DeleteGroups.Int16():                 {Min: 0, Max: 2, Handle: handleDeleteGroups},
		kmsg.ConsumerGroupHeartbeat.Int16():       {Min: 0, Max: 1, Handle: handleConsumerGroupHeartbeat},
		kmsg.ConsumerGroupDescribe.Int16():        {Min: 0, Max: 1, Handle: handleConsumerGroupDescribe},
		kmsg.ShareGroupHeartbeat.Int16():          {Min: 1, Max: 1, Handle: handleShareGroupHeartbeat},
		kmsg.ShareGroupDescribe.Int16():           {Min: 1, Max: 1, Handle: handleShareGroupDescribe},
		kmsg.ShareFetch.Int16():                   {Min: 1, Max: 1, Handle: handleShareFetch},
		kmsg.ShareAcknowledge.Int16():             {Min: 1, Max: 1, Handle: handleShareAcknowledge},
		kmsg.DescribeShareGroupOffsets.Int16():    {Min: 0, Max: 1, Handle: handleDescribeShareGroupOffsets},
		kmsg.AlterShareGroupOffsets.Int16():       {Min: 0, Max: 0, Handle: handleAlterShareGroupOffsets},
		kmsg.DeleteShareGroupOffsets.Int16():      {Min: 0, Max: 0, Handle: handleDeleteShareGroupOffsets},
		kmsg.AddPartitionsToTxn.Int16():           {Min: 0, Max: 5, Handle: handleAddPartitionsToTxn},
		kmsg.AddOffsetsToTxn.Int16():              {Min: 0, Max: 4, Handle: handleAddOffsetsToTxn},
		kmsg.EndTxn.Int16():                       {Min: 0, Max: 5, Handle: handleEndTxn},
		kmsg.WriteTxnMarkers.Int16():              {Min: 0, Max: 2, Handle: handleWriteTxnMarkers},
		kmsg.ReadShareGroupState.Int16():          {Min: 0, Max: 0, Handle: handleReadShareGroupState},
		kmsg.WriteShareGroupState.Int16():         {Min: 0, Max: 0, Handle: handleWriteShareGroupState},
		kmsg.DeleteShareGroupState.Int16():        {Min: 0, Max: 0, Handle: handleDeleteShareGroupState},
		kmsg.InitializeShareGroupState.Int16():    {Min: 0, Max: 0, Handle: handleInitializeShareGroupState},
		kmsg.ReadShareGroupStateSummary.Int16():   {Min: 0, Max: 0, Handle: handleReadShareGroupStateSummary},
		kmsg.DescribeTransactions.Int16():         {Min: 0, Max: 0, Handle: handleDescribeTransactions},
		kmsg.ListTransactions.Int16():             {Min: 0, Max: 2, Handle: handleListTransactions},
		kmsg.DescribeProducers.Int16():            {Min: 0, Max: 0, Handle: handleDescribeProducers},
		kmsg.DescribeACLs.Int16():                 {Min: 0, Max: 3, Handle: handleDescribeACLs},
		kmsg.CreateACLs.Int16():                   {Min: 0, Max: 3, Handle: handleCreateACLs},
		kmsg.DeleteACLs.Int16():                   {Min: 0, Max: 3, Handle: handleDeleteACLs},
		kmsg.DescribeUserSCRAMCredentials.Int16(): {Min: 0, Max: 0, Handle: handleDescribeUserSCRAMCredentials},
		kmsg.AlterUserSCRAMCredentials.Int16():    {Min: 0, Max: 0, Handle: handleAlterUserSCRAMCredentials},
		kmsg.SASLHandshake.Int16():                {Min: 0, Max: 1, Handle: handleSaslHandshake},
		kmsg.SASLAuthenticate.Int16():             {Min: 0, Max: 2, Handle: handleSaslAuthenticate},
		kmsg.DescribeClientQuotas.Int16():         {Min: 0, Max: 1, Handle: handleDescribeClientQuotas},
		kmsg.AlterClientQuotas.Int16():            {Min: 0, Max: 1, Handle: handleAlterClientQuotas},
		// Served only by forwarding to the controller.
		kmsg.ElectLeaders.Int16():               {Min: 0, Max: 2, Handle: handleElectLeaders},
		kmsg.AlterPartitionAssignments.Int16():  {Min: 0, Max: 1, Handle: handleAlterPartitionReassignments},
		kmsg.ListPartitionReassignments.Int16(): {Min: 0, Max: 0, Handle: handleListPartitionReassignments},
		kmsg.UnregisterBroker.Int16():           {Min: 0, Max: 0, Handle: handleUnregisterBroker},
		kmsg.DescribeQuorum.Int16():             {Min: 0, Max: 2, Handle: handleDescribeQuorum},
	}
}
