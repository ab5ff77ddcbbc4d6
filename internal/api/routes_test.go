package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// TestApiVersionsAdvertisesRoutes checks ApiVersions over TCP against the dispatch table:
// the keys once added to it from other files (OffsetForLeaderEpoch and the keys served by
// forwarding to the controller) are advertised at their versions beside the core ones, each
// key once and in key order, and reach their handlers.
func TestApiVersionsAdvertisesRoutes(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	resp := request[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions error %d", resp.ErrorCode)
	}
	got := map[int16][2]int16{}
	for i, k := range resp.ApiKeys {
		if _, dup := got[k.ApiKey]; dup {
			t.Fatalf("key %d advertised twice", k.ApiKey)
		}
		if i > 0 && resp.ApiKeys[i-1].ApiKey >= k.ApiKey {
			t.Fatalf("keys out of order at %d: %d after %d", i, k.ApiKey, resp.ApiKeys[i-1].ApiKey)
		}
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[kmsg.Key][2]int16{
		kmsg.ApiVersions:                {0, 3},
		kmsg.Produce:                    {0, 12},
		kmsg.Fetch:                      {0, 17},
		kmsg.OffsetForLeaderEpoch:       {0, 4},
		kmsg.ElectLeaders:               {0, 2},
		kmsg.AlterPartitionAssignments:  {0, 1},
		kmsg.ListPartitionReassignments: {0, 0},
		kmsg.UnregisterBroker:           {0, 0},
	}
	for k, r := range want {
		if got[k.Int16()] != r {
			t.Errorf("%s: advertised %v, want %v", k.Name(), got[k.Int16()], r)
		}
	}
	// The keys added from other files reach their handlers.
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.ReplicaID = -1
	request[*kmsg.OffsetForLeaderEpochResponse](t, cl, oe)
	lr := kmsg.NewPtrListPartitionReassignmentsRequest()
	if r := request[*kmsg.ListPartitionReassignmentsResponse](t, cl, lr); r.ErrorCode != 0 {
		t.Fatalf("ListPartitionReassignments error %d", r.ErrorCode)
	}
}
