package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/authz"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/rpc"
	"github.com/gregor-project/gregor/internal/controller/state"
	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/server"
	"github.com/gregor-project/gregor/internal/storage"
)

// The controller side of a node (process.roles includes controller): the raft quorum and
// the controller APIs share the CONTROLLER listener, split by the first bytes of each
// connection (raft peers start with the quorum's hello). Its raft storage lives in
// <log.dir>/__cluster_metadata-0, as Kafka's does.
//
// Security: the listener's protocol secures both kinds of traffic (security.PeerTLS states
// the rule). On SSL and SASL_SSL every accepted connection is wrapped in TLS before the Mux
// peeks, so the handshake comes first and the Mux splits the decrypted stream by the hello
// magic; raft peers dial with TLS presenting their certificate and an accepted raft
// connection is admitted only with a verified one; the controller's server takes the
// connections with TLS done (SetSecurityAfterTLS) and runs the listener's SASL on them.
// SASL_PLAINTEXT is refused at start-up (checkControllerSecurity).
//
// With no controller.quorum.voters (the embedded single-node default) the node is a quorum
// of one on a loopback port of its own choosing: only this process dials it.

// bindController returns the quorum's voters and, for a controller, its bound listener.
func (b *Broker) bindController() ([]config.Voter, net.Listener, error) {
	voters := b.cfg.Voters()
	if !b.cfg.IsController() {
		return voters, nil, nil
	}
	addr := "127.0.0.1:0"
	if len(voters) > 0 {
		l, _ := b.cfg.ControllerListener()
		addr = l.Addr()
	}
	ln := b.takeListener(b.controllerListenerName())
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, nil, fmt.Errorf("controller listener %s: %w", addr, err)
		}
	}
	if len(voters) == 0 {
		port := ln.Addr().(*net.TCPAddr).Port
		voters = []config.Voter{{ID: b.cfg.NodeID, Host: "127.0.0.1", Port: port}}
	}
	return voters, ln, nil
}

// startController starts the quorum node and the controller API server on ln, secured by
// sec and peer (controllerSecurity; both nil: PLAINTEXT, peer nil: no TLS).
func (b *Broker) startController(voters []config.Voter, ln net.Listener, sec *security.Listener, peer *security.PeerTLS) error {
	cfg := b.cfg
	var dial func(ctx context.Context, addr string) (net.Conn, error)
	var admit func(net.Conn) error
	if peer != nil {
		ln = tls.NewListener(ln, peer.ServerConfig())
		dial = peer.Dial
		if b.dial != nil {
			dial = func(ctx context.Context, addr string) (net.Conn, error) { return peer.DialVia(ctx, b.dial, addr) }
		}
		admit = func(c net.Conn) error {
			st, ok := server.TLSState(c)
			if !ok {
				return security.ErrNoPeerCertificate
			}
			return peer.VerifyPeer(st)
		}
	}
	if dial == nil && b.dial != nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return b.dial(ctx, "tcp", addr) }
	}
	b.ctrlMux = server.NewMux(ln, quorum.HelloMagic, b.log)
	node, err := quorum.Start(quorum.Config{
		NodeID:          cfg.NodeID,
		Voters:          voters,
		ClusterID:       b.clusterID,
		Dir:             metadataLogDir(cfg),
		FS:              b.fs,
		Listener:        b.ctrlMux.Matched(),
		Dial:            dial,
		Admit:           admit,
		Logger:          b.log,
		CampaignAtStart: b.campaign,
		// raft-metrics commit-latency
		CommitLatency: b.metrics.Raft.Committed,
		// auto.leader.rebalance.enable: the active controller moves leadership back to
		// preferred replicas when a broker's share of misplaced leaders passes the limit.
		AutoLeaderRebalance:    cfg.AutoLeaderRebalanceEnable,
		ImbalanceCheckInterval: time.Duration(cfg.LeaderImbalanceCheckIntervalSeconds) * time.Second,
		ImbalancePct:           int(cfg.LeaderImbalancePerBrokerPercentage),
		State: state.Config{
			ClusterID:                b.clusterID,
			SessionTimeoutMs:         int64(cfg.BrokerSessionTimeoutMs),
			DefaultPartitions:        cfg.NumPartitions,
			DefaultReplicationFactor: int16(cfg.DefaultReplicationFactor),
			UncleanLeaderElection:    cfg.UncleanLeaderElectionEnable,
			// Group configs are bounded by this node's group.*.min/max settings, as Kafka's
			// controller validates them against its own group coordinator config.
			ValidateGroupConfigs: cfg.ValidateGroupConfigs,
			HasLocalBroker:       cfg.IsBroker(),
			LocalBroker:          cfg.NodeID,
			LocalIncarnation:     b.incarnation,
			TokenSecret:          b.cfg.DelegationTokenSecret(),
			TokenMaxLifetimeMs:   cfg.DelegationTokenMaxLifetimeMs,
			TokenExpiryTimeMs:    cfg.DelegationTokenExpiryTimeMs,
			TokenExpiryCheckMs:   cfg.DelegationTokenExpiryCheckIntervalMs,
		},
	})
	if err != nil {
		return err
	}
	b.quorum = node
	b.quorumUp.Store(true) // the metrics may read b.quorum from now on
	b.soleVoter = len(voters) == 1
	go b.watchController(node)
	name := b.controllerListenerName()
	h := rpc.New(rpc.Config{
		Node:                node,
		ListenerName:        name,
		MaxRequestBytes:     cfg.SocketRequestMaxBytes,
		DeleteTopicDisabled: !cfg.DeleteTopicEnable,
		TopicConfigs:        topicConfigsOf(cfg),
		MayForward:          mayForward(cfg),
		Logger:              b.log,
	})
	srv := server.New(name, h, b.log)
	srv.SetMetrics(b.metrics.Requests) // BrokerHeartbeat, AlterPartition, ... timed with the rest
	cl, err := connLimits(b.cfg, true)
	if err != nil {
		return err
	}
	b.ctrlConns = server.NewConnQuotas(cl)
	limits := serverLimits(cfg)
	limits.Conns = b.ctrlConns
	srv.SetLimits(limits)
	if peer != nil {
		srv.SetSecurityAfterTLS(sec)
	} else {
		srv.SetSecurity(sec)
	}
	srv.Use(b.ctrlMux.Other())
	b.ctrlServer = srv
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := srv.Serve(b.ctx); err != nil {
			b.log.Error("controller listener stopped", "err", err)
		}
	}()
	b.log.Info("controller started", "voters", config.FormatVoters(voters), "addr", ln.Addr().String())
	return nil
}

// watchController stops the node when its controller stops on its own: a controller that
// cannot write its raft log (WAL or snapshot) cannot go on, and lingering would leave a
// process that answers nothing on its CONTROLLER listener while it still holds a vote. As
// Kafka's KafkaRaftClient treats a log I/O error as fatal, the process exits: Failed is
// closed with the cause in Err, and cmd/gregor closes the broker and exits non-zero. In a
// quorum of several the other voters elect a leader; a sole voter's cluster is down until
// its storage is fixed and it is restarted.
func (b *Broker) watchController(node *quorum.Node) {
	select {
	case <-node.Done():
	case <-b.ctx.Done():
		return
	}
	err := node.Err()
	if err == nil {
		return // closed by Close
	}
	dir := metadataLogDir(b.cfg)
	b.log.Error("the controller cannot write its metadata log: this process stops", "dir", dir, "err", err)
	b.fail(fmt.Errorf("controller storage failure in %s: %w", dir, err))
}

// metadataLogDir is the controller quorum's directory: __cluster_metadata-0 in
// metadata.log.dir, else in the first of log.dirs (as Kafka places it).
func metadataLogDir(cfg *config.Broker) string {
	dir := cfg.MetadataLogDir
	if dir == "" {
		dir = cfg.LogDirs[0]
	}
	return filepath.Join(dir, storage.MetadataLogTopic+"-0")
}

// topicConfigsOf describes a new topic's configs (CreateTopics v5+) as this node resolves them.
func topicConfigsOf(cfg *config.Broker) func(map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
	return func(overrides map[string]string) []kmsg.CreateTopicsResponseTopicConfig {
		var out []kmsg.CreateTopicsResponseTopicConfig
		for _, e := range cfg.DescribeTopic(overrides) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.ReadOnly, c.Source, c.IsSensitive = e.Name, e.ReadOnly, e.Source, e.Sensitive
			v := e.Value
			c.Value = &v
			out = append(out, c)
		}
		return out
	}
}

// alterPartition sends a leader's ISR changes to the active controller.
func (b *Broker) alterPartition(ctx context.Context, req *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error) {
	resp, err := b.ctrl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.AlterPartitionResponse), nil
}

// eligible reports whether a broker may join an ISR: registered and unfenced.
func (b *Broker) eligible(id int32) bool {
	br := b.meta.Image().Broker(id)
	return br != nil && !br.Fenced
}

func (b *Broker) topicID(topic string) [16]byte {
	if t := b.meta.Image().Topic(topic); t != nil {
		return t.ID
	}
	return [16]byte{}
}

// interBrokerEndpoint is where a follower fetches from a leader: its inter.broker.listener.name.
func (b *Broker) interBrokerEndpoint(id int32) (string, bool) {
	host, port, ok := b.meta.Image().Endpoint(id, b.cfg.InterBrokerListenerName)
	if !ok {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), true
}

// followerThrottle is follower.replication.throttled.rate for this broker (0: none).
func (b *Broker) followerThrottle() int64 {
	im := b.meta.Image()
	v, ok := im.NodeConfigs[b.cfg.NodeID]["follower.replication.throttled.rate"]
	if !ok {
		v, ok = im.BrokerConfigs["follower.replication.throttled.rate"]
	}
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// followerThrottled reports whether this broker's replica of a partition is in its topic's
// follower.replication.throttled.replicas ("*" or partition:broker pairs).
func (b *Broker) followerThrottled(topic string, partition int32) bool {
	t := b.meta.Image().Topic(topic)
	if t == nil {
		return false
	}
	v := t.Configs["follower.replication.throttled.replicas"]
	if v == "" {
		return false
	}
	all, pairs, err := config.ParseThrottledReplicas(v)
	if err != nil {
		return false
	}
	return all || slices.Contains(pairs[partition], b.cfg.NodeID)
}

// mayForward is who may send the controller Envelopes: with an authorizer, the super users
// (brokers are, KIP-801); without one, nil (anyone the listener lets in).
func mayForward(cfg *config.Broker) func(authz.Principal) bool {
	if cfg.AuthorizerClassName == "" {
		return nil
	}
	supers := map[authz.Principal]bool{}
	for _, s := range cfg.SuperUsers { // as the authorizer reads super.users
		if p, err := authz.ParsePrincipal(strings.TrimSpace(s)); err == nil {
			supers[p] = true
		}
	}
	return func(p authz.Principal) bool { return supers[p] }
}
