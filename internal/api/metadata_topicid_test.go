package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Metadata by topic id (v12) as clients send it: Kafka's Java client (Admin.describeTopics of
// a TopicCollection of ids, and a consumer resolving the topics the broker assigned it) sends
// the name's default, "", beside the id; franz-go sends null. Both are asked for by id, and
// an unknown id is UNKNOWN_TOPIC_ID naming that id, which the Java client keys its answer by.
func TestMetadataByTopicID(t *testing.T) {
	b := testutil.StartBroker(t)
	createTopic(t, b.Addr(), "by-id", 2, nil)
	cl := newClient(t, b.Addr())
	id := metadataTopics(t, cl, "by-id")["by-id"].TopicID
	if id == ([16]byte{}) {
		t.Fatal("the topic has no id")
	}
	unknown := [16]byte{1, 2, 3}
	for _, c := range []struct {
		label string
		name  *string
	}{{`name ""`, kmsg.StringPtr("")}, {"name null", nil}} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		for _, tid := range [][16]byte{id, unknown} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic, rt.TopicID = c.name, tid
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 2 {
			t.Fatalf("%s: %d topics answered, want 2", c.label, len(resp.Topics))
		}
		got, miss := resp.Topics[0], resp.Topics[1]
		if got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "by-id" || got.TopicID != id || len(got.Partitions) != 2 {
			t.Errorf("%s: by id: error %v, topic %v, id %v, %d partitions; want by-id, its id, 2 partitions",
				c.label, kerr.ErrorForCode(got.ErrorCode), got.Topic, got.TopicID, len(got.Partitions))
		}
		if miss.ErrorCode != kerr.UnknownTopicID.Code || miss.TopicID != unknown {
			t.Errorf("%s: unknown id: error %v, id %v; want UNKNOWN_TOPIC_ID naming the id",
				c.label, kerr.ErrorForCode(miss.ErrorCode), miss.TopicID)
		}
	}
}
