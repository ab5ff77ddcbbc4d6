package api

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/metadata"
)

// The broker side of forwarding, against a controller channel the test plays: what is
// refused here never reaches the controller, the answers are merged back in request order
// with the controller's codes and messages, and a controller that does not answer is
// REQUEST_TIMED_OUT by the request's deadline, never a hang. (The round trips against a
// real controller are in admin_cluster_test.go.)

// fakeController answers each request with answer(req), or, when answer is nil, blocks
// until the request's context ends.
type fakeController struct {
	mu     sync.Mutex
	seen   []kmsg.Request
	answer func(kmsg.Request) kmsg.Response
}

func (f *fakeController) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	f.seen = append(f.seen, req)
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return answer(req), nil
}

func (f *fakeController) ActiveController() int32 { return 1 }

func (f *fakeController) requests() []kmsg.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]kmsg.Request(nil), f.seen...)
}

// testHandler is a handler with an empty metadata image and ctl as its controller channel.
func testHandler(t *testing.T, ctl ControllerChannel) *Handler {
	t.Helper()
	return &Handler{Cfg: config.Default(), Meta: metadata.NewPublisher(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now, NodeID: 1, Controller: ctl}
}

func codes[T any](items []T, code func(T) int16) []*kerr.Error {
	var out []*kerr.Error
	for _, it := range items {
		out = append(out, kerr.TypedErrorForCode(code(it)))
	}
	return out
}

func TestForwardUnansweredIsRequestTimedOut(t *testing.T) {
	ctl := &fakeController{}
	h := testHandler(t, ctl)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 100
	for _, n := range []string{"ok", "bad/name", "dup", "dup", "ok2"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 1, 1
		req.Topics = append(req.Topics, rt)
	}
	start := time.Now()
	resp := h.Handle(context.Background(), &Conn{}, req).Msg.(*kmsg.CreateTopicsResponse)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answered after %v; the request's timeout is 100ms", d)
	}
	got := codes(resp.Topics, func(t kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
	want := []*kerr.Error{kerr.RequestTimedOut, kerr.InvalidTopicException, kerr.InvalidRequest, kerr.InvalidRequest, kerr.RequestTimedOut}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	seen := ctl.requests()
	if len(seen) != 1 {
		t.Fatalf("%d requests forwarded, want 1", len(seen))
	}
	var fwd []string
	for _, rt := range seen[0].(*kmsg.CreateTopicsRequest).Topics {
		fwd = append(fwd, rt.Topic)
	}
	if !reflect.DeepEqual(fwd, []string{"ok", "ok2"}) {
		t.Fatalf("forwarded %v, want only the topics that passed the broker's checks", fwd)
	}

	// The requests without a timeout of their own end with the client's context.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "ok"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
	rr.Configs = append(rr.Configs, c)
	ia.Resources = append(ia.Resources, rr)
	iresp := h.Handle(ctx, &Conn{}, ia).Msg.(*kmsg.IncrementalAlterConfigsResponse)
	if iresp.Resources[0].ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("IncrementalAlterConfigs: %v", kerr.ErrorForCode(iresp.Resources[0].ErrorCode))
	}
}

func TestForwardWithoutControllerChannel(t *testing.T) {
	h := testHandler(t, nil)
	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 1}
	el.Topics = append(el.Topics, rt)
	resp := h.Handle(context.Background(), &Conn{}, el).Msg.(*kmsg.ElectLeadersResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("answer %+v", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ipr := h.Handle(context.Background(), &Conn{}, ip).Msg.(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode != kerr.CoordinatorLoadInProgress.Code || ipr.ProducerID != -1 {
		t.Fatalf("InitProducerId without a block: %v id %d", kerr.ErrorForCode(ipr.ErrorCode), ipr.ProducerID)
	}
}

func TestForwardMergesAnswersInRequestOrder(t *testing.T) {
	ctl := &fakeController{answer: func(r kmsg.Request) kmsg.Response {
		req := r.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		// Answer in reverse order: the broker matches by name.
		for i := len(req.Topics) - 1; i >= 0; i-- {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = req.Topics[i].Topic
			if st.Topic == "taken" {
				st.ErrorCode, st.ErrorMessage = kerr.TopicAlreadyExists.Code, kmsg.StringPtr(`topic "taken" already exists`)
			} else {
				st.TopicID, st.NumPartitions, st.ReplicationFactor = [16]byte{1}, 4, 1
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}}
	h := testHandler(t, ctl)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	req.ValidateOnly = true
	for _, n := range []string{"fresh", "..", "taken"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, -1, -1
		if n == "fresh" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1234")
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := h.Handle(context.Background(), &Conn{}, req).Msg.(*kmsg.CreateTopicsResponse)
	got := codes(resp.Topics, func(t kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
	want := []*kerr.Error{nil, kerr.InvalidTopicException, kerr.TopicAlreadyExists}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if m := resp.Topics[2].ErrorMessage; m == nil || *m != `topic "taken" already exists` {
		t.Fatalf("the controller's message is not passed on: %v", m)
	}
	fresh := resp.Topics[0]
	if fresh.Topic != "fresh" || fresh.NumPartitions != 4 || fresh.ReplicationFactor != 1 {
		t.Fatalf("fresh: %+v", fresh)
	}
	found := false
	for _, c := range fresh.Configs {
		if c.Name == "retention.ms" {
			found = c.Value != nil && *c.Value == "1234" && c.Source == int8(kmsg.ConfigSourceDynamicTopicConfig)
		}
	}
	if !found {
		t.Fatal("v5 answer lacks the created topic's retention.ms override")
	}
	fwd := ctl.requests()[0].(*kmsg.CreateTopicsRequest)
	if !fwd.ValidateOnly || len(fwd.Topics) != 2 || fwd.Topics[0].NumPartitions != -1 {
		t.Fatalf("forwarded %+v", fwd)
	}
}

// A created topic is answered only once this broker's image has it; one the image never
// shows is REQUEST_TIMED_OUT at the request's deadline.
func TestForwardAnswersOnceTheImageShowsTheTopic(t *testing.T) {
	var pub *metadata.Publisher
	applied := make(chan error, 1)
	ctl := &fakeController{answer: func(r kmsg.Request) kmsg.Response {
		req := r.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.NumPartitions, st.ReplicationFactor = rt.Topic, 1, 1
			st.TopicID = [16]byte{byte(len(rt.Topic))}
			resp.Topics = append(resp.Topics, st)
			if rt.Topic == "shown" {
				// The metadata log reaches this broker after the controller has answered.
				go func() {
					applied <- pub.Apply(1, []state.Record{
						&state.TopicRecord{Name: "shown", TopicID: state.UUID(st.TopicID)},
						&state.PartitionRecord{TopicID: state.UUID(st.TopicID), Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
					})
				}()
			}
		}
		return resp
	}}
	h := testHandler(t, ctl)
	pub = h.Meta
	create := func(name string, timeoutMs int32) *kmsg.CreateTopicsResponseTopic {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = timeoutMs
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, rt)
		return &h.Handle(context.Background(), &Conn{}, req).Msg.(*kmsg.CreateTopicsResponse).Topics[0]
	}
	// A long timeout: the answer comes as soon as the image shows the topic, and on a loaded
	// machine the goroutine that applies it may first wait longer than a short one.
	st := create("shown", 30_000)
	if st.ErrorCode != 0 {
		t.Fatalf("shown: %v", kerr.ErrorForCode(st.ErrorCode))
	}
	if h.Meta.Image().Topic("shown") == nil {
		t.Fatal("CreateTopics answered before this broker's image has the topic")
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if st := create("never", 300); st.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("a topic the image never shows: %v", kerr.ErrorForCode(st.ErrorCode))
	}
}
