package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// autoCreateBound is the most topics one Metadata request has created (the api package's
// autoCreatePerRequest, and the burst of its rate bound).
const autoCreateBound = 100

// A Metadata request naming 100,000 unknown topics with auto-creation on is answered at
// once, every topic UNKNOWN_TOPIC_OR_PARTITION with no partitions (as a KRaft broker answers
// while the controller creates them), invalid names INVALID_TOPIC_EXCEPTION; at most the
// bound get created, and the broker goes on serving: CreateTopics, produce, and a client
// auto-creating a topic by retrying Metadata.
func TestMetadataAutoCreateBounded(t *testing.T) {
	b := testutil.StartBroker(t)
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	const n = 100_000
	for i := 0; i < n; i++ {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(fmt.Sprintf("flood-%d", i))})
	}
	req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr("bad name!")})
	start := time.Now()
	resp := request[*kmsg.MetadataResponse](t, cl, req)
	t.Logf("Metadata of %d unknown topics answered in %v", n, time.Since(start))
	if len(resp.Topics) != n+1 {
		t.Fatalf("%d topics answered, want %d", len(resp.Topics), n+1)
	}
	for i, mt := range resp.Topics[:n] {
		if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(mt.Partitions) != 0 {
			t.Fatalf("topic %d (%s): %v, %d partitions; want UNKNOWN_TOPIC_OR_PARTITION, none", i, *mt.Topic, kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
		}
	}
	if mt := resp.Topics[n]; mt.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %v", kerr.ErrorForCode(mt.ErrorCode))
	}

	adm := newAdmin(t, b.Addr())
	flood := func() int {
		td, err := adm.ListTopics(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for name := range td {
			if strings.HasPrefix(name, "flood-") {
				c++
			}
			if strings.Contains(name, " ") {
				t.Fatalf("invalid name %q created", name)
			}
		}
		return c
	}
	waitFor(t, 20*time.Second, "the first 100 topics to be created", func() bool { return flood() == autoCreateBound })

	createTopic(t, b.Addr(), "made", 1, nil)
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "made", Value: []byte("x")})
	// The bucket is spent; a client that retries still gets its topic as it refills.
	produceSync(t, newClient(t, b.Addr(), kgo.AllowAutoTopicCreation()), &kgo.Record{Topic: "after-flood", Value: []byte("x")})
	if c := flood(); c > autoCreateBound {
		t.Fatalf("%d topics of the flood created, bound %d", c, autoCreateBound)
	} else {
		t.Logf("%d topics of the flood created", c)
	}
}
