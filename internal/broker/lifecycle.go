package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker's membership (Kafka's BrokerLifecycleManager): it registers with the active
// controller under a fresh incarnation id, then heartbeats every broker.heartbeat.interval.ms
// with the metadata offset it has applied. The controller keeps it fenced (no leaderships,
// no ISR membership) until it has caught up with the log as of its registration; a broker
// whose heartbeats stop for broker.session.timeout.ms is fenced again and its partitions get
// new leaders. A heartbeat answered STALE_BROKER_EPOCH (the registration was replaced)
// registers again. One answered BROKER_ID_NOT_REGISTERED means an operator unregistered
// this broker (UnregisterBroker, to decommission it): as a Kafka broker does, it keeps
// heartbeating, is refused, and stays out of the cluster until its process is restarted.
//
// Controlled shutdown: Close sends heartbeats with WantShutdown until the controller answers
// ShouldShutdown (every leadership moved to another ISR member), bounded by a deadline.

func newIncarnation() [16]byte {
	var u [16]byte
	for u == ([16]byte{}) {
		rand.Read(u[:])
	}
	return u
}

// register sends BrokerRegistration until it succeeds or ctx ends.
func (b *Broker) register(ctx context.Context) error {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.SetVersion(2) // v2: LogDirs (KIP-858)
	req.BrokerID = b.cfg.NodeID
	req.ClusterID = b.clusterID
	offline := b.logs.OfflineDirIDs()
	for _, id := range b.logs.DirIDs() {
		if !slices.Contains(offline, id) { // the online ones; heartbeats name the others
			req.LogDirs = append(req.LogDirs, [16]byte(id))
		}
	}
	req.IncarnationID = b.incarnation
	for _, l := range b.cfg.AdvertisedListeners {
		rl := kmsg.NewBrokerRegistrationRequestListener()
		rl.Name = l.Name
		host, port := b.advertisedEndpoint(l)
		rl.Host, rl.Port = host, uint16(port)
		rl.SecurityProtocol = securityProtocolCode(l.SecurityProtocol)
		req.Listeners = append(req.Listeners, rl)
	}
	if b.cfg.BrokerRack != "" {
		rack := b.cfg.BrokerRack
		req.Rack = &rack
	}
	for {
		resp, err := b.ctrl.Request(ctx, req)
		if err == nil {
			r := resp.(*kmsg.BrokerRegistrationResponse)
			if err = kerr.ErrorForCode(r.ErrorCode); err == nil {
				b.epoch.Store(r.BrokerEpoch)
				b.log.Info("registered with the controller", "broker_epoch", r.BrokerEpoch, "controller", b.ctrl.ActiveController())
				return nil
			}
			if errors.Is(err, kerr.InconsistentClusterID) {
				return err // a configuration error, not a transient one
			}
		}
		if errors.Is(err, kerr.DuplicateBrokerRegistration) {
			// Another process holds this node.id: a misconfiguration, or this node's own
			// previous process killed within its session timeout. Retry (as Kafka does)
			// until that session expires.
			b.log.Error("another process is registered as this node.id; retrying until its session expires", "node_id", b.cfg.NodeID, "err", err)
		} else {
			b.log.Warn("broker registration failed, retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// heartbeat sends one BrokerHeartbeat.
func (b *Broker) heartbeat(ctx context.Context, wantShutdown bool) (*kmsg.BrokerHeartbeatResponse, error) {
	req := kmsg.NewPtrBrokerHeartbeatRequest()
	req.SetVersion(1)
	req.BrokerID = b.cfg.NodeID
	req.BrokerEpoch = b.epoch.Load()
	req.CurrentMetadataOffset = b.meta.Image().Offset
	req.WantShutdown = wantShutdown
	req.OfflineLogDirs = b.offlineDirIDs() // v1: the failed log dirs (KIP-858)
	resp, err := b.ctrl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.BrokerHeartbeatResponse)
	return r, kerr.ErrorForCode(r.ErrorCode)
}

// heartbeatLoop keeps the session alive until ctx ends. While fenced it heartbeats ten
// times as often, so it is unfenced soon after catching up.
func (b *Broker) heartbeatLoop(ctx context.Context) {
	interval := time.Duration(b.cfg.BrokerHeartbeatIntervalMs) * time.Millisecond
	unregistered := false
	for {
		r, err := b.heartbeat(ctx, false)
		switch {
		case err == nil:
			if b.fenced.Swap(r.IsFenced) != r.IsFenced {
				b.log.Info("broker fencing changed", "fenced", r.IsFenced)
			}
		case errors.Is(err, kerr.BrokerIDNotRegistered):
			if !unregistered {
				b.log.Error("this broker was unregistered from the cluster; it stays out until it is restarted", "err", err)
				unregistered = true
			}
			b.fenced.Store(true)
		case errors.Is(err, kerr.StaleBrokerEpoch):
			b.log.Warn("registration lost, registering again", "err", err)
			b.fenced.Store(true)
			if err := b.register(ctx); err != nil && ctx.Err() == nil {
				b.log.Error("registering again failed", "err", err)
			}
			continue
		case ctx.Err() != nil:
			return
		default:
			b.log.Warn("heartbeat failed", "err", err)
		}
		wait := interval
		if b.fenced.Load() && !unregistered {
			wait = max(interval/10, 20*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-b.kickHeartbeat:
		}
	}
}

// controlledShutdown asks the controller to move this broker's leaderships away and waits
// until it says the broker may stop, or the deadline passes.
func (b *Broker) controlledShutdown(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		r, err := b.heartbeat(ctx, true)
		if err == nil && r.ShouldShutdown {
			b.log.Info("controlled shutdown: leaderships moved")
			return
		}
		if errors.Is(err, kerr.BrokerIDNotRegistered) {
			return // unregistered: it leads nothing and is in no ISR
		}
		if ctx.Err() != nil {
			b.log.Warn("controlled shutdown did not complete in time", "err", err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// securityProtocolCode is Kafka's numbering of security protocols.
func securityProtocolCode(p string) int16 {
	switch p {
	case "SSL":
		return 1
	case "SASL_PLAINTEXT":
		return 2
	case "SASL_SSL":
		return 3
	}
	return 0
}
