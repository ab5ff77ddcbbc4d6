package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/txn"
	"github.com/gregor-project/gregor/internal/wire"
)

// The transaction coordinator's place in the broker (Kafka's TransactionCoordinator with its
// TransactionMarkerChannelManager and the AddPartitionsToTxnManager's network client): the
// coordinator is elected for the __transaction_state partitions this broker leads (the
// metadata loop, as for __consumer_offsets), writes transaction markers through
// markerSender, and produce's KIP-890 verification reaches remote coordinators through
// peers, connections to the other brokers on the inter-broker listener.

// txnConfig is the coordinator's configuration from the broker's.
func txnConfig(cfg *config.Broker) txn.Config {
	cfg = cfg.Current()
	return txn.Config{
		MaxTimeoutMs:            int64(cfg.TransactionMaxTimeoutMs),
		AbortTimedOutIntervalMs: int64(cfg.TransactionAbortTimedOutTransactionCleanupIntervalMs),
		IDExpirationMs:          int64(cfg.TransactionalIDExpirationMs),
		RemoveExpiredIntervalMs: int64(cfg.TransactionRemoveExpiredTransactionCleanupIntervalMs),
		CommitTimeoutMs:         replica.DefaultAppendTimeoutMs, // Kafka: request.timeout.ms
	}
}

// peers is the broker's connections to the other brokers on the inter-broker listener, one
// per broker, dialed on first use and again after a failure (api.BrokerChannel). Requests
// on one connection are pipelined (wire.Conn).
//
// Lock rule: mu guards peers and closed and is never held while dialing; each peer's own
// dial lock is (one dial per broker at a time, bounded by the caller's context), so a broker
// that cannot be reached holds up only the requests to it. Lock order: a peer's dial, then
// mu.
type peers struct {
	b  *Broker
	mu struct {
		sync.Mutex
		peers  map[int32]*peer
		closed bool
	}
}

// peer is the connection to one broker. dial serialises dialing; conn is guarded by the
// peers' mu, replaced when it fails.
type peer struct {
	dial sync.Mutex
	conn *wire.Conn
}

func newPeers(b *Broker) *peers {
	p := &peers{b: b}
	p.mu.peers = map[int32]*peer{}
	return p
}

// Request sends req (at the version set on it) to broker node and waits for the answer. A
// failed connection is dropped, so the next request dials again.
func (p *peers) Request(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	pr, c, err := p.conn(ctx, node)
	if err != nil {
		return nil, err
	}
	resp, err := c.Request(ctx, req)
	if err != nil && c.Err() != nil {
		p.mu.Lock()
		if pr.conn == c {
			pr.conn = nil
		}
		p.mu.Unlock()
	}
	return resp, err
}

// live returns node's peer and its connection if that is usable (nil otherwise).
func (p *peers) live(node int32) (*peer, *wire.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, nil, wire.ErrClosed
	}
	pr := p.mu.peers[node]
	if pr == nil {
		pr = &peer{}
		p.mu.peers[node] = pr
	}
	if c := pr.conn; c != nil && c.Err() == nil {
		return pr, c, nil
	}
	return pr, nil, nil
}

func (p *peers) conn(ctx context.Context, node int32) (*peer, *wire.Conn, error) {
	pr, c, err := p.live(node)
	if err != nil || c != nil {
		return pr, c, err
	}
	pr.dial.Lock()
	defer pr.dial.Unlock()
	if _, c, err := p.live(node); err != nil || c != nil {
		return pr, c, err // another request dialed meanwhile
	}
	addr, ok := p.b.interBrokerEndpoint(node)
	if !ok {
		return nil, nil, fmt.Errorf("broker %d has no %s endpoint", node, p.b.cfg.InterBrokerListenerName)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err = p.b.dialBroker(dctx, addr, fmt.Sprintf("broker-%d", p.b.cfg.NodeID))
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil, nil, errors.Join(wire.ErrClosed, c.Close())
	}
	pr.conn = c
	return pr, c, nil
}

// Close closes every connection; later requests fail.
func (p *peers) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.closed = true
	for id, pr := range p.mu.peers {
		if pr.conn != nil {
			if err := pr.conn.Close(); err != nil {
				p.b.log.Warn("closing a broker connection failed", "node", id, "err", err)
			}
		}
		delete(p.mu.peers, id)
	}
}

// markerSender writes a transaction's markers to its partitions' leaders
// (txn.MarkerSender): one WriteTxnMarkers to each leader, the local one answered by this
// broker's handler without a connection, the others sent on the inter-broker listener. A
// partition of a topic that no longer exists counts as written, and so does one its leader
// answers UNSUPPORTED_VERSION or UNSUPPORTED_FOR_MESSAGE_FORMAT (it can never write it; Kafka
// drops it too, logging it).
type markerSender struct {
	b     *Broker
	peers *peers
	// timeout bounds one WriteTxnMarkers to another broker (0: markerRequestTimeout), so
	// that a leader that never answers fails the attempt and the coordinator retries it.
	timeout time.Duration
}

// markerRequestTimeout bounds a WriteTxnMarkers round trip, as Kafka's marker channel's
// request.timeout.ms does: past the leader's own wait for the marker's replication
// (replica.DefaultAppendTimeoutMs, as api's markerTimeout), so a slow ISR is answered by
// the leader first.
const markerRequestTimeout = replica.DefaultAppendTimeoutMs*time.Millisecond + 5*time.Second

// markerRequestVersion: WriteTxnMarkers v2, which carries the transaction's version (2 for
// a transaction of KIP-890 part 2, else 0), as Kafka 4.x's coordinators send it.
const markerRequestVersion = 2

func (s markerSender) WriteMarkers(ctx context.Context, m txn.Markers) map[txn.TopicPartition]error {
	failed := map[txn.TopicPartition]error{}
	im := s.b.meta.Image()
	byLeader := map[int32][]txn.TopicPartition{}
	for _, tp := range m.Partitions {
		t := im.Topic(tp.Topic)
		if t == nil {
			continue // deleted: nothing left to mark
		}
		pp := t.Partition(tp.Partition)
		if pp == nil {
			continue
		}
		if pp.Leader < 0 {
			failed[tp] = fmt.Errorf("%w: %s-%d has no leader", kerr.NotLeaderForPartition, tp.Topic, tp.Partition)
			continue
		}
		byLeader[pp.Leader] = append(byLeader[pp.Leader], tp)
	}
	type answer struct {
		tps  []txn.TopicPartition
		resp *kmsg.WriteTxnMarkersResponse
		err  error
	}
	answers := make(chan answer, len(byLeader))
	for leader, tps := range byLeader {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.SetVersion(markerRequestVersion)
		rm := kmsg.NewWriteTxnMarkersRequestMarker()
		rm.ProducerID, rm.ProducerEpoch, rm.Committed, rm.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
		rm.TransactionVersion = int8(m.TransactionVersion)
		for _, tp := range tps {
			i := len(rm.Topics) - 1
			if i < 0 || rm.Topics[i].Topic != tp.Topic {
				rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				rt.Topic = tp.Topic
				rm.Topics = append(rm.Topics, rt)
				i++
			}
			rm.Topics[i].Partitions = append(rm.Topics[i].Partitions, tp.Partition)
		}
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{rm}
		go func() {
			if leader == s.b.cfg.NodeID {
				answers <- answer{tps: tps, resp: s.b.handler.WriteTxnMarkers(ctx, req)}
				return
			}
			timeout := s.timeout
			if timeout <= 0 {
				timeout = markerRequestTimeout
			}
			rctx, cancel := context.WithTimeout(ctx, timeout)
			r, err := s.peers.Request(rctx, leader, req)
			cancel()
			if err != nil {
				answers <- answer{tps: tps, err: err}
				return
			}
			answers <- answer{tps: tps, resp: r.(*kmsg.WriteTxnMarkersResponse)}
		}()
	}
	for range byLeader {
		a := <-answers
		if a.err != nil {
			for _, tp := range a.tps {
				failed[tp] = a.err
			}
			continue
		}
		answered := map[txn.TopicPartition]bool{}
		for _, sm := range a.resp.Markers {
			for _, st := range sm.Topics {
				for _, sp := range st.Partitions {
					tp := txn.TopicPartition{Topic: st.Topic, Partition: sp.Partition}
					answered[tp] = true
					switch err := kerr.ErrorForCode(sp.ErrorCode); {
					case errors.Is(err, kerr.UnsupportedVersion), errors.Is(err, kerr.UnsupportedForMessageFormat):
						// This leader can never write it: dropped from the markers, as
						// Kafka's marker channel does, rather than retried for ever.
						s.b.log.Error("a transaction marker cannot be written: the partition is left out of the transaction's markers",
							"topic", tp.Topic, "partition", tp.Partition, "producer_id", m.ProducerID, "transactional_id", m.TransactionalID, "err", err)
					case err != nil:
						failed[tp] = err
					}
				}
			}
		}
		for _, tp := range a.tps {
			if !answered[tp] {
				failed[tp] = fmt.Errorf("%w: no answer for %s-%d", kerr.UnknownServerError, tp.Topic, tp.Partition)
			}
		}
	}
	return failed
}
