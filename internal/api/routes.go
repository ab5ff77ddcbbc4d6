package api

import "github.com/twmb/franz-go/pkg/kmsg"

// The API keys served only by forwarding to the controller, added to handler.go's table.
// This init must run after handler.go's, which builds the table: Go runs a package's init
// functions in the order of its file names, and "routes.go" sorts after "handler.go"
// (electleaders.go and alterpartitionreassignments.go sort before it). The lines can move
// into handler.go's table as they are.
func init() {
	apis[kmsg.ElectLeaders.Int16()] = api{0, 2, handleElectLeaders}
	apis[kmsg.AlterPartitionAssignments.Int16()] = api{0, 1, handleAlterPartitionReassignments}
	apis[kmsg.ListPartitionReassignments.Int16()] = api{0, 0, handleListPartitionReassignments}
	apis[kmsg.UnregisterBroker.Int16()] = api{0, 0, handleUnregisterBroker}
	apis[kmsg.DescribeQuorum.Int16()] = api{0, 2, handleDescribeQuorum}
}
