package client

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// notController reports whether a controller answered NOT_CONTROLLER anywhere in resp:
// the top-level error where the response has one, else any item's.
func notController(resp kmsg.Response) bool {
	nc := kerr.NotController.Code
	switch r := resp.(type) {
	case *kmsg.BrokerRegistrationResponse:
		return r.ErrorCode == nc
	case *kmsg.BrokerHeartbeatResponse:
		return r.ErrorCode == nc
	case *kmsg.AllocateProducerIDsResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionResponse:
		return r.ErrorCode == nc
	case *kmsg.AlterPartitionAssignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.ListPartitionReassignmentsResponse:
		return r.ErrorCode == nc
	case *kmsg.ElectLeadersResponse:
		if r.ErrorCode == nc {
			return true
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == nc {
					return true
				}
			}
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.CreatePartitionsResponse:
		for _, t := range r.Topics {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.AlterConfigsResponse:
		for _, t := range r.Resources {
			if t.ErrorCode == nc {
				return true
			}
		}
	case *kmsg.IncrementalAlterConfigsResponse:
		for _, t := range r.Resources {
			if t.ErrorCode == nc {
				return true
			}
		}
	}
	return false
}
