package broker

import (
	"fmt"
	"net"

	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/observe"
)

// The broker's metrics (internal/observe): the hot-path handles are given to the parts that
// count (listeners, api handler, partitions, log manager, controller, group coordinator) as
// they are built; the gauges are read from the parts at scrape time by snapshot. The
// http.listener serves them with /healthz and /readyz from the start of Start, so a probe
// sees the broker not ready while it recovers its logs and joins the cluster.

// startHTTP binds http.listener (nothing when it is empty).
func (b *Broker) startHTTP() error {
	addr := b.cfg.HTTPListener
	if addr == "" {
		return nil
	}
	s, err := observe.Listen(addr, b.metrics, b.ready, b.log)
	if err != nil {
		return fmt.Errorf("http.listener %s: %w", addr, err)
	}
	b.http = s
	b.log.Info("http listener serving /metrics, /healthz and /readyz", "addr", s.Addr().String())
	return nil
}

// HTTPAddr is the http.listener's bound address (nil when it is off).
func (b *Broker) HTTPAddr() net.Addr {
	if b.http == nil {
		return nil
	}
	return b.http.Addr()
}

// Metrics are the broker's metrics.
func (b *Broker) Metrics() *observe.Metrics { return b.metrics }

// ready is /readyz: a broker is ready once it serves clients, registered and unfenced, with
// the metadata log replayed; a controller-only node once its quorum has a leader. A node
// shutting down is not ready.
func (b *Broker) ready() (bool, string) {
	switch {
	case b.closing.Load():
		return false, "shutting down"
	case !b.cfg.IsBroker():
		if b.quorum == nil || b.quorum.Status().Leader < 0 {
			return false, "the controller quorum has no leader"
		}
		return true, ""
	case b.epoch.Load() < 0:
		return false, "not registered with the controller quorum"
	case !b.caughtUpOnce.Load():
		return false, "replaying the metadata log"
	case b.fenced.Load():
		return false, "fenced by the controller"
	case !b.serving.Load():
		return false, "listeners not serving yet"
	}
	return true, ""
}

// Snapshot is the broker's state for the scrape-time gauges (observe.Source).
func (b *Broker) Snapshot() observe.Snapshot {
	var s observe.Snapshot
	var im *metadata.Image
	if b.cfg.IsBroker() && b.replicas != nil && b.handler != nil {
		im = b.meta.Image()
		s.Broker = &observe.BrokerStats{MetadataOffset: im.Offset, MetadataLag: -1, FetchesWaiting: b.handler.FetchesWaiting()}
		if b.quorum != nil {
			s.Broker.MetadataLag = max(b.quorum.Status().Committed-im.Offset, 0)
		}
		hw := map[partitionKey]int64{}
		for _, p := range b.replicas.Partitions() {
			st := p.Stats()
			s.Partitions = append(s.Partitions, observe.PartitionStats{
				Topic: p.Topic, Partition: p.Index, Leader: st.Leader, Replicas: st.Replicas, ISR: st.ISR,
				MinISR: int(p.Settings().MinInsyncReplicas), Size: st.Size, Segments: st.Segments,
				LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset, HighWatermark: st.HighWatermark,
				WaitingProduces: st.WaitingProduces,
			})
			hw[partitionKey{p.Topic, p.Index}] = st.HighWatermark
		}
		for _, sv := range b.servers {
			s.Conns = append(s.Conns, observe.ListenerConn{Listener: sv.Name(), Connections: sv.Connections()})
		}
		if g := b.handler.Groups; g != nil {
			for _, gs := range g.Stats() {
				s.Groups = append(s.Groups, observe.GroupStats{Group: gs.ID, State: gs.State})
				for tp, off := range gs.Offsets {
					// The lag of a partition this broker has no replica of is left to no one:
					// its end is not known here (docs/metrics.md).
					if end, ok := hw[partitionKey{tp.Topic, tp.Partition}]; ok {
						s.Lags = append(s.Lags, observe.OffsetLag{Group: gs.ID, Topic: tp.Topic, Partition: tp.Partition, Committed: off, End: end})
					}
				}
			}
		}
	}
	if b.quorum != nil {
		st := b.quorum.Status()
		c := &observe.ControllerStats{Active: st.Active, LastAppliedOffset: st.Applied, LastCommittedOffset: st.Committed}
		if st.Active && im != nil {
			controllerCounts(im, c)
		}
		s.Controller = c
	}
	return s
}

type partitionKey struct {
	topic string
	part  int32
}

// controllerCounts fills the cluster-wide counts of the active controller from im.
func controllerCounts(im *metadata.Image, c *observe.ControllerStats) {
	for _, br := range im.Brokers {
		if br.Fenced {
			c.FencedBrokers++
		} else {
			c.ActiveBrokers++
		}
	}
	c.GlobalTopics = len(im.Topics)
	for _, t := range im.Topics {
		c.GlobalParts += int(t.Partitions)
		for i := range t.Parts {
			if t.Parts[i].Leader == metadata.NoLeader {
				c.OfflinePartitions++
			}
		}
	}
}
