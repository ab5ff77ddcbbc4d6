package api

import (
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
)

// The cluster as clients see it, from this broker's metadata image: which brokers are alive,
// where each listens on the listener the client came in on (Kafka answers every broker's
// endpoint of the same listener name), and which node to name as the controller.

// liveBrokers returns the unfenced brokers with an endpoint on listener, by id.
func liveBrokers(im *metadata.Image, listener string) []liveBroker {
	var out []liveBroker
	for _, b := range im.SortedBrokers() {
		if b.Fenced {
			continue
		}
		host, port, ok := im.Endpoint(b.ID, listener)
		if !ok {
			continue
		}
		out = append(out, liveBroker{id: b.ID, host: host, port: port, rack: b.Rack})
	}
	return out
}

type liveBroker struct {
	id   int32
	host string
	port int32
	rack string
}

func (b liveBroker) rackPtr() *string {
	if b.rack == "" {
		return nil
	}
	r := b.rack
	return &r
}

// controllerID is the node id Metadata and DescribeCluster name as the controller: the
// active controller when it is also a live broker (a combined node, so an operator sees which
// one it is), otherwise this broker, which forwards controller requests (as Kafka's KRaft
// brokers answer, since clients cannot reach controller-only nodes).
func (h *Handler) controllerID(im *metadata.Image) int32 {
	if h.Controller != nil {
		if id := h.Controller.ActiveController(); id >= 0 {
			if b := im.Broker(id); b != nil && !b.Fenced {
				return id
			}
		}
	}
	return h.NodeID
}

// listenerOf is the listener a request came in on (the first broker listener for in-process
// callers that have no connection).
func (h *Handler) listenerOf(c *Conn) string {
	if c != nil && c.Listener != "" {
		return c.Listener
	}
	if len(h.Cfg.AdvertisedListeners) > 0 {
		return h.Cfg.AdvertisedListeners[0].Name
	}
	return "PLAINTEXT"
}

// offlineReplicas are the replicas whose broker is fenced or not registered.
func offlineReplicas(im *metadata.Image, p *metadata.Partition) []int32 {
	out := []int32{}
	for _, r := range p.Replicas {
		if b := im.Broker(r); b == nil || b.Fenced {
			out = append(out, r)
		}
	}
	return out
}

// TopicSettings resolves a topic's overrides into a partition's settings (for the broker's
// metadata loop, which opens partitions as the image assigns them).
func (h *Handler) TopicSettings(t *metadata.Topic) (replica.Settings, error) {
	return h.topicSettings(t)
}
