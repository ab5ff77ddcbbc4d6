package broker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/console"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/group"
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
	b.log.Info("http listener serving /metrics, /healthz and /readyz (and the web console once the listeners are up)", "addr", s.Addr().String())
	return nil
}

// mountConsole serves the web console (internal/console) under /console/ on the http
// listener, as a client of this broker's first client listener that needs no TLS: the
// console is a Kafka client like the tools and sees the cluster through Kafka requests
// only. On a SASL listener every user logs in with their own credentials (the first of
// PLAIN, SCRAM-SHA-512, SCRAM-SHA-256 the listener enables), so the console acts with their
// ACLs and never as the broker. A broker whose client listeners all need TLS (or only
// mechanisms a login form cannot take) mounts none: `gregor console --command-config`
// serves it with the client's TLS settings.
func (b *Broker) mountConsole() {
	if b.http == nil {
		return
	}
	for _, l := range b.cfg.Listeners {
		sec, ok := b.listenerSec[l.Name]
		addr := b.bound[l.Name]
		if !ok || addr == nil || sec.TLS() != nil {
			continue
		}
		cfg := console.Config{Seeds: func() ([]string, error) { return []string{addr.String()}, nil },
			Prefix: "/console", Logger: b.log}
		if sec.SASL() {
			for _, m := range []string{"PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"} {
				if slices.Contains(sec.Mechanisms(), m) {
					cfg.Login, cfg.Mechanism = true, m
					break
				}
			}
			if !cfg.Login {
				continue
			}
		}
		c, err := console.New(cfg)
		if err != nil {
			b.log.Warn("web console not served", "err", err)
			return
		}
		b.console = c
		b.http.Mount("/console/", c.Handler())
		b.log.Info("web console serving", "url", "http://"+b.http.Addr().String()+"/console/", "listener", l.Name, "login", cfg.Login)
		return
	}
	b.log.Info("web console not served on the http listener: no client listener without TLS takes PLAIN or SCRAM logins; run gregor console --command-config")
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
		if !b.quorumUp.Load() || b.quorum.Status().Leader < 0 {
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

// metricsSource reads the broker's state for the scrape-time gauges (observe.Source).
type metricsSource struct{ b *Broker }

func (m metricsSource) Snapshot() observe.Snapshot { return m.b.metricsSnapshot() }

// metricsSnapshot is the broker's state now, for a scrape.
func (b *Broker) metricsSnapshot() observe.Snapshot {
	var s observe.Snapshot
	var im *metadata.Image
	if b.cfg.IsBroker() && b.serving.Load() {
		im = b.meta.Image()
		s.Broker = &observe.BrokerStats{MetadataOffset: im.Offset, MetadataLag: -1, FetchesWaiting: b.handler.FetchesWaiting()}
		if hw := b.metaLog.HighWatermark(); hw >= 0 {
			s.Broker.MetadataLag = max(hw-im.Offset, 0)
		}
		led := map[partitionKey]int64{}     // high watermarks of the partitions this broker leads
		follows := map[partitionKey]int64{} // and of those it follows
		for _, p := range b.replicas.Partitions() {
			st := p.Stats()
			s.Partitions = append(s.Partitions, observe.PartitionStats{
				Topic: p.Topic, Partition: p.Index, Leader: st.Leader, Replicas: st.Replicas, ISR: st.ISR,
				MinISR: int(p.Settings().MinInsyncReplicas), Size: st.Size, Segments: st.Segments,
				LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset, HighWatermark: st.HighWatermark,
				WaitingProduces: st.WaitingProduces,
			})
			if st.Leader {
				led[partitionKey{p.Topic, p.Index}] = st.HighWatermark
			} else {
				follows[partitionKey{p.Topic, p.Index}] = st.HighWatermark
			}
		}
		for _, sv := range b.servers {
			s.Conns = append(s.Conns, observe.ListenerConn{Listener: sv.Name(), Connections: sv.Connections()})
		}
		if g := b.handler.Groups; g != nil {
			groups := g.Stats()
			ends := b.groupEnds(im, groups, led, follows)
			for _, gs := range groups {
				s.Groups = append(s.Groups, observe.GroupStats{Group: gs.ID, State: gs.State})
				for tp, off := range gs.Offsets {
					if end, ok := ends[partitionKey{tp.Topic, tp.Partition}]; ok {
						s.Lags = append(s.Lags, observe.OffsetLag{Group: gs.ID, Topic: tp.Topic, Partition: tp.Partition, Committed: off, End: end})
					}
				}
			}
		}
	}
	if b.quorumUp.Load() {
		st := b.quorum.Status()
		c := &observe.ControllerStats{Active: st.Active, LastAppliedOffset: st.Applied, LastCommittedOffset: st.Committed}
		switch {
		case !st.Active:
		case im != nil:
			controllerCounts(im, c) // this node's broker image: no need to stop the raft loop
		default:
			// A controller-only node counts on its raft loop, bounded: without an answer the
			// cluster-wide gauges are left out rather than reported as 0.
			ctx, cancel := context.WithTimeout(b.ctx, lagLookupTimeout)
			err := b.quorum.Read(ctx, func(ctl *state.Controller) { stateCounts(ctl.Image(), c) })
			cancel()
			if err != nil {
				c.Uncounted = true
			}
		}
		s.Controller = c
	}
	return s
}

// lagLookupTimeout bounds a scrape's questions to other brokers for the ends of the
// partitions whose groups this broker coordinates.
const lagLookupTimeout = 2 * time.Second

// groupEnds is the end (high watermark) of every partition the groups have committed offsets
// for: this broker's own for the partitions it leads; the leader's, asked with one ListOffsets
// (latest) per leader, for the others; a follower's own when its leader does not answer in
// time. A partition whose end is not known is left out (no lag reported for it).
func (b *Broker) groupEnds(im *metadata.Image, groups []group.GroupStats, led, follows map[partitionKey]int64) map[partitionKey]int64 {
	ends := make(map[partitionKey]int64, len(led))
	remote := map[int32]map[string][]int32{} // leader -> topic -> partitions
	for _, gs := range groups {
		for tp := range gs.Offsets {
			k := partitionKey{tp.Topic, tp.Partition}
			if _, done := ends[k]; done {
				continue
			}
			if hw, ok := led[k]; ok {
				ends[k] = hw
				continue
			}
			t := im.Topic(tp.Topic)
			if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Parts) || t.Parts[tp.Partition].Leader == metadata.NoLeader || b.peers == nil {
				if hw, ok := follows[k]; ok {
					ends[k] = hw
				}
				continue
			}
			ends[k] = -1 // asked below
			leader := t.Parts[tp.Partition].Leader
			if remote[leader] == nil {
				remote[leader] = map[string][]int32{}
			}
			remote[leader][tp.Topic] = append(remote[leader][tp.Topic], tp.Partition)
		}
	}
	if len(remote) > 0 {
		ctx, cancel := context.WithTimeout(b.ctx, lagLookupTimeout)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for leader, topics := range remote {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := b.highWatermarks(ctx, leader, topics)
				mu.Lock()
				defer mu.Unlock()
				for k, hw := range got {
					ends[k] = hw
				}
			}()
		}
		wg.Wait()
	}
	for k, end := range ends {
		if end >= 0 {
			continue
		}
		if hw, ok := follows[k]; ok {
			ends[k] = hw
		} else {
			delete(ends, k)
		}
	}
	return ends
}

// highWatermarks asks broker leader for the high watermarks of topics' partitions (ListOffsets,
// latest, read_uncommitted: what a consumer can reach); the partitions it did not answer for
// are left out.
func (b *Broker) highWatermarks(ctx context.Context, leader int32, topics map[string][]int32) map[partitionKey]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(2)
	req.ReplicaID = -1
	for name, parts := range topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = name
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := b.peers.Request(ctx, leader, req)
	if err != nil {
		b.log.Debug("consumer lag: asking the leader for high watermarks failed", "leader", leader, "err", err)
		return nil
	}
	out := map[partitionKey]int64{}
	for _, rt := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode == 0 && rp.Offset >= 0 {
				out[partitionKey{rt.Topic, rp.Partition}] = rp.Offset
			}
		}
	}
	return out
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

// stateCounts is controllerCounts from the controller's own state (a controller-only node).
// It runs on the raft loop.
func stateCounts(im *state.Image, c *observe.ControllerStats) {
	for _, br := range im.Brokers() {
		if br.Fenced {
			c.FencedBrokers++
		} else {
			c.ActiveBrokers++
		}
	}
	names := im.TopicNames()
	c.GlobalTopics = len(names)
	for _, name := range names {
		for _, p := range im.Topic(name).Partitions {
			c.GlobalParts++
			if p.Leader == metadata.NoLeader {
				c.OfflinePartitions++
			}
		}
	}
}
