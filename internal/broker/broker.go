// Package broker wires one Gregor node together: config, log manager, the controller quorum
// (when the node is a controller), the metadata image it follows, partitions and their
// replication, the api handler, the listeners and the background loops (retention, flush,
// checkpoints, heartbeats). cmd/gregor starts it; tests start it in-process the same way.
//
// Start-up order (Kafka's BrokerServer/ControllerServer): open the log dir (formatting it
// with cluster.id on first start); start the controller, if any, on the CONTROLLER listener;
// bind the broker listeners (so their ports are known); register with the active controller;
// replay the metadata log; open and reconcile this broker's partitions; heartbeat until the
// controller unfences the broker; then serve clients.
package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregor-project/gregor/internal/api"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/console"
	"github.com/gregor-project/gregor/internal/controller/client"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/observe"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/security"
	"github.com/gregor-project/gregor/internal/server"
	"github.com/gregor-project/gregor/internal/share"
	"github.com/gregor-project/gregor/internal/storage"
	"github.com/gregor-project/gregor/internal/txn"
	"github.com/gregor-project/gregor/internal/wire"
)

// Broker is a running node.
type Broker struct {
	cfg       *config.Broker
	log       *slog.Logger
	fs        storage.FS
	logs      *storage.Manager
	clusterID string

	// Controller side (nil unless process.roles includes controller).
	quorum     *quorum.Node
	soleVoter  bool // the quorum is this node alone
	ctrlMux    *server.Mux
	ctrlServer *server.Server
	ctrlConns  *server.ConnQuotas // the controller listener's connection limits (connlimits.go)

	// Broker side.
	ctrl *client.Client
	meta *metadata.Publisher
	// tokenCreds are delegation tokens' SCRAM credentials, derived from the image (tokens.go).
	tokenCreds *tokenCredentials
	metaLog    client.LogSource
	replicas   *replica.Manager
	fetchers   *replica.Fetchers
	handler    *api.Handler
	cleaner    atomic.Pointer[storage.LogCleaner] // the log cleaner, once started (nil: disabled)
	peers      *peers                             // connections to the other brokers (txn.go)
	// interSec is how connections to other brokers are secured (security.go); replaced when
	// the inter-broker listener's dynamic stores change (reconfigureListenerStores).
	interSec atomic.Pointer[security.Client]
	// interValues are the inter-broker listener's values interSec was built from; written
	// at start and then by the metadata loop only.
	interValues map[string]string
	servers     []*server.Server
	conns       *server.ConnQuotas // the broker listeners' connection limits (connlimits.go)
	addrs       []net.Addr
	bound       map[string]net.Addr // broker listener name -> bound address
	// listenerSec is each broker listener's security by name, set by bindListeners before
	// any request is served and never changed after (its TLS stores change in place).
	listenerSec map[string]*security.Listener

	incarnation   [16]byte
	epoch         atomic.Int64 // broker epoch of the current registration; -1 before the first (0 is an epoch)
	fenced        atomic.Bool
	kickHeartbeat chan struct{}
	// stopHeartbeats ends the heartbeat loop and waits for it (nil before it starts): the
	// controlled shutdown's heartbeats must be the last, or a regular one arriving after
	// them renews the session the shutdown ended, and the next process is refused as a
	// duplicate registration until it expires.
	stopHeartbeats func()
	caughtUp       bool // owned by the metadata goroutine (and Start before it runs)
	straysRemoved  bool // owned by the metadata goroutine

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup // serving goroutines
	bgWG     sync.WaitGroup // heartbeat, metadata, replication loops
	once     sync.Once
	err      error
	shutdown bool

	// dirFailures queues failed log dirs for logDirFailureLoop; onAllLogDirsFailed is
	// Options.OnLogDirFailure (logdirs.go). Both fixed at Start.
	dirFailures        *dirFailures
	onAllLogDirsFailed func(dir string, err error)

	// failed is closed (once, by fail) when the node cannot go on and its process must stop;
	// failErr, written before, says why.
	failed   chan struct{}
	failOnce sync.Once
	failErr  error

	dial     wire.DialFunc           // Options.Dial (nil: net.Dialer)
	preBound map[string]net.Listener // Options.Listeners, taken by the bind functions
	campaign bool                    // Options.CampaignAtStart
	// noControlled skips Close's controlled shutdown (CloseUncontrolled); set before the
	// Close it is for.
	noControlled bool
	// metrics are the node's metrics (observe.go), made before anything starts; http serves
	// them (nil when http.listener is empty) from before Start assigns the broker's parts,
	// so a scrape reads only the parts published by these flags (each stored after the
	// fields it guards are written, never cleared): quorumUp (quorum), serving (replicas,
	// handler, servers: start-up is over). caughtUpOnce and closing feed /readyz too: the
	// metadata log was replayed at start; Close began.
	metrics      *observe.Metrics
	http         *observe.Server
	console      *console.Console // the web console on the http listener (nil when not mounted)
	quorumUp     atomic.Bool
	caughtUpOnce atomic.Bool
	serving      atomic.Bool
	closing      atomic.Bool
}

// Failed is closed when the node cannot go on (its controller cannot write its log) and
// should be closed and its process exit with Err.
func (b *Broker) Failed() <-chan struct{} { return b.failed }

// FailErr is why Failed was closed (nil before).
func (b *Broker) FailErr() error {
	select {
	case <-b.failed:
		return b.failErr
	default:
		return nil
	}
}

func (b *Broker) fail(err error) {
	b.failOnce.Do(func() {
		b.failErr = err
		close(b.failed)
	})
}

// Options are start-up choices that are not broker configs.
type Options struct {
	FS     storage.FS // nil: the real file system
	Logger *slog.Logger
	// Ctx cancels a start-up still waiting for the controller quorum (a signal). nil:
	// background.
	Ctx context.Context
	// OnLogDirFailure, if set, is called once every log dir has failed, with the last one
	// and its error. A dir fails when a write, fsync, truncation or segment deletion of a
	// partition's log (or of a replica being moved between log dirs) fails, as Kafka's
	// LogDirFailureChannel reports it: the dir goes offline alone, its partitions' leaderships
	// move to other brokers and the others are served on (logdirs.go, KIP-858). `gregor
	// server` halts the process here (exit status 1), as Kafka's broker does when no log dir
	// is left. nil keeps the broker running with every partition offline
	// (KAFKA_STORAGE_ERROR), for in-process tests of a failing disk.
	OnLogDirFailure func(dir string, err error)
	// Dial, if set, opens every connection this node makes to another node (the controller
	// quorum's raft peers and controller APIs, replication fetches, transaction markers and
	// other broker-to-broker requests); TLS and SASL run over what it returns. nil: a
	// net.Dialer. The embed package routes a node's connections through it to cut the node
	// off from the others (a network partition) while its clients stay connected.
	Dial wire.DialFunc
	// Listeners are already-bound listeners by listener name, used instead of binding that
	// listener's address (the embed package binds a cluster's ports before any node starts,
	// so no other process can take one meanwhile). The broker closes them on Close.
	Listeners map[string]net.Listener
	// CampaignAtStart makes this node, a voter of a new controller quorum, campaign for the
	// leadership as it starts instead of after an election timeout (quorum.Config): for the
	// voters of a cluster started together in one process (embed), where waiting only
	// delays the first leader.
	CampaignAtStart bool
	// Started, if set, is called with the broker once it serves, before Start returns: how
	// a caller that starts the broker through another package's API (the project's tests,
	// through embed) gets hold of it.
	Started func(*Broker)
}

type optionsKey struct{}

// WithOptions returns ctx carrying edit, which Start applies to its Options when ctx is
// Options.Ctx (after the caller's own settings). It is how the project's tests pass, through
// the public embed API, what that API does not expose: a fault-injecting FS, Started. Being
// in an internal package, it is not reachable from outside the module.
func WithOptions(ctx context.Context, edit func(*Options)) context.Context {
	return context.WithValue(ctx, optionsKey{}, edit)
}

// Start opens the data directory (formatting it on first start, recovering it after an
// unclean stop), joins the cluster and starts serving. It returns once the broker is
// unfenced and serving, or with the error that stopped it.
func Start(cfg *config.Broker, opt Options) (*Broker, error) {
	if opt.Ctx != nil {
		if edit, ok := opt.Ctx.Value(optionsKey{}).(func(*Options)); ok {
			edit(&opt)
		}
	}
	fs := opt.FS
	if fs == nil {
		fs = storage.OS
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	startCtx := opt.Ctx
	if startCtx == nil {
		startCtx = context.Background()
	}
	if err := checkControllerSecurity(cfg); err != nil {
		return nil, err
	}
	for _, dir := range cfg.LogDirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("log.dirs %s: %w", dir, err)
		}
	}
	logs, err := storage.OpenDirs(fs, cfg.LogDirs, log)
	if err != nil {
		return nil, err
	}
	metrics := observe.New()
	logs.OnFlush = metrics.Log.Flushed
	clusterID, err := format(logs, cfg, log)
	if err == nil && cfg.MetadataLogDir != "" && !logs.HasDir(cfg.MetadataLogDir) {
		err = storage.FormatMetadataDir(fs, filepath.Clean(cfg.MetadataLogDir), clusterID, cfg.NodeID)
	}
	if err != nil {
		logs.Close()
		return nil, err
	}
	b := &Broker{
		cfg: cfg, log: log, fs: fs, logs: logs, clusterID: clusterID,
		incarnation: newIncarnation(), kickHeartbeat: make(chan struct{}, 1),
		meta: metadata.NewPublisher(), failed: make(chan struct{}), metrics: metrics,
		dial: opt.Dial, preBound: maps.Clone(opt.Listeners), campaign: opt.CampaignAtStart,
	}
	b.tokenCreds = &tokenCredentials{cfg: cfg}
	b.fenced.Store(true)
	b.epoch.Store(-1)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	// Before any log opens: a failed log dir goes offline alone (logdirs.go).
	b.onAllLogDirsFailed = opt.OnLogDirFailure
	b.dirFailures = &dirFailures{pending: map[string]error{}, kick: make(chan struct{}, 1)}
	logs.OnLogOffline = b.onLogOffline
	b.background(b.logDirFailureLoop)
	metrics.Watch(metricsSource{b})
	if err := b.startHTTP(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.start(startCtx); err != nil {
		b.Close()
		return nil, err
	}
	if opt.Started != nil {
		opt.Started(b)
	}
	return b, nil
}

func (b *Broker) start(startCtx context.Context) error {
	cfg, log := b.cfg, b.log
	// Both sides of the controller listener's security are built before anything binds:
	// what cannot be served as configured stops start-up by its key.
	var ctrlSec *security.Listener
	var peerTLS *security.PeerTLS
	var err error
	if cfg.IsController() {
		if ctrlSec, peerTLS, err = b.controllerSecurity(); err != nil {
			return err
		}
	}
	ctrlClient, err := b.controllerClient()
	if err != nil {
		return err
	}
	voters, ctrlLn, err := b.bindController()
	if err != nil {
		return err
	}
	if ctrlLn != nil {
		if err := b.startController(voters, ctrlLn, ctrlSec, peerTLS); err != nil {
			ctrlLn.Close()
			return err
		}
	}
	b.ctrl = client.New(client.Config{
		Voters: voters, NodeID: cfg.NodeID, ClusterID: b.clusterID, Logger: log, RequestTimeout: b.requestTimeout(),
		Dial: func(ctx context.Context, addr, clientID string) (*wire.Conn, error) {
			return wire.DialVia(ctx, b.dial, addr, clientID, ctrlClient)
		},
	})
	b.replicas = replica.NewManager(b.fs, b.logs, log)
	b.replicas.MoveRate = func() int64 { return b.cfg.Current().ReplicaAlterLogDirsIOMaxBytesPerSecond }
	if !cfg.IsBroker() {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.followControllerConfigs(b.ctx, b.quorum)
		}()
		log.Info("controller-only node started", "node_id", cfg.NodeID)
		return nil
	}
	if b.quorum != nil {
		b.metaLog = client.LocalLog(b.quorum)
	} else {
		b.metaLog = b.ctrl.MetadataLog()
	}
	b.handler = &api.Handler{
		Cfg: cfg, Meta: b.meta, Replicas: b.replicas, Logs: b.logs, Log: log, Now: time.Now,
		NodeID: cfg.NodeID, ClusterID: b.clusterID, Rack: cfg.BrokerRack, Controller: b.ctrl,
		Listeners: listenerStores{b}, Topics: b.metrics.Topics,
	}
	if err := b.bindListeners(); err != nil {
		return err
	}
	inter, err := b.interBrokerClient()
	if err != nil {
		return err
	}
	b.interSec.Store(inter)
	b.interValues, _ = cfg.ListenerSecurity(cfg.InterBrokerListenerName)
	b.replicas.SetReplication(replica.ReplicationOptions{
		LocalID:        cfg.NodeID,
		LagTimeMaxMs:   func() int64 { return cfg.Current().ReplicaLagTimeMaxMs },
		BrokerEpoch:    b.epoch.Load,
		AlterPartition: b.alterPartition,
		Eligible:       b.eligible,
		TopicID:        b.topicID,
		ISRChanges:     b.metrics.Replica,
	})
	b.fetchers = replica.NewFetchers(replica.FetcherOptions{
		LocalID:          cfg.NodeID,
		Endpoint:         b.interBrokerEndpoint,
		MaxBytes:         cfg.ReplicaFetchMaxBytes,
		MinBytes:         cfg.ReplicaFetchMinBytes,
		MaxWaitMs:        cfg.ReplicaFetchWaitMaxMs,
		ResponseMaxBytes: cfg.ReplicaFetchResponseMaxBytes,
		BackoffMs:        cfg.ReplicaFetchBackoffMs,
		SocketTimeoutMs:  cfg.ReplicaSocketTimeoutMs,
		Throttle:         b.followerThrottle,
		Throttled:        b.followerThrottled,
		Dial: func(ctx context.Context, addr string) (*wire.Conn, error) {
			return b.dialBroker(ctx, addr, fmt.Sprintf("gregor-replica-%d", cfg.NodeID))
		},
		Log:    log,
		Topics: b.metrics.Topics,
	})
	groupCfg := group.ConfigFrom(cfg)
	groupCfg.OnRebalance = b.metrics.Groups.Rebalanced
	groupCfg.ConsumerGroupConfig = b.handler.ConsumerGroupConfig // group configs override group.consumer.*
	b.handler.Groups = group.NewCoordinator(group.Options{
		Config: groupCfg, Replicas: b.replicas, Log: log, Manual: true,
		EnsureTopic: b.handler.EnsureOffsetsTopic, Topics: b.handler.ConsumerTopics,
	})
	if err := b.handler.Groups.Start(); err != nil {
		return err
	}
	b.peers = newPeers(b)
	b.handler.Brokers = b.peers
	b.handler.Txns = txn.NewCoordinator(txn.Options{
		Config: txnConfig(cfg), Replicas: b.replicas, Log: log, Now: time.Now, Manual: true,
		EnsureTopic: b.handler.EnsureTxnTopic, ProducerIDs: b.handler.NextProducerID,
		Markers: markerSender{b: b, peers: b.peers}, GroupPartition: b.handler.GroupPartition,
	})
	if err := b.handler.Txns.Start(); err != nil {
		return err
	}
	b.handler.ShareStates = share.NewStateCoordinator(share.StateOptions{
		Replicas: b.replicas, Log: log, Manual: true,
		EnsureTopic: b.handler.EnsureShareStateTopic, CommitTimeoutMs: replica.DefaultAppendTimeoutMs,
	})
	if err := b.handler.ShareStates.Start(); err != nil {
		return err
	}
	b.meta.Subscribe(b.onImage)

	// Join the cluster: register, replay the log, then heartbeat until unfenced.
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	go func() {
		select {
		case <-startCtx.Done():
			stop()
		case <-ctx.Done():
		}
	}()
	if b.soleVoter {
		// Registering before this node's own quorum has a leader would only be refused and
		// retried after a backoff.
		if err := b.quorum.WaitActive(ctx); err != nil {
			return fmt.Errorf("waiting for the controller to start: %w", err)
		}
	}
	if err := b.register(ctx); err != nil {
		return fmt.Errorf("registering with the controller quorum: %w", err)
	}
	if err := b.catchUp(ctx); err != nil {
		return fmt.Errorf("replaying the metadata log: %w", err)
	}
	b.background(b.metadataLoop)
	hbCtx, hbCancel := context.WithCancel(b.ctx)
	hbDone := make(chan struct{})
	b.stopHeartbeats = func() { hbCancel(); <-hbDone }
	b.background(func(context.Context) {
		defer close(hbDone)
		b.heartbeatLoop(hbCtx)
	})
	b.background(b.replicas.RunReplication)
	if err := b.awaitUnfenced(ctx); err != nil {
		return err
	}
	b.serve()
	b.serving.Store(true)
	b.mountConsole()
	b.startLoops(b.ctx)
	log.Info("broker started", "node_id", cfg.NodeID, "cluster_id", b.clusterID, "broker_epoch", b.epoch.Load())
	return nil
}

// format returns the log dirs' cluster id, formatting the dirs without meta.properties with
// it: the cluster.id of the formatted ones, else cluster.id (or, for a node that is its own
// single-voter quorum, a random id).
func format(logs *storage.Manager, cfg *config.Broker, log *slog.Logger) (string, error) {
	dir := logs.FormattedDir()
	if id := logs.ClusterID(); id != "" {
		if logs.NodeID() != cfg.NodeID {
			return "", fmt.Errorf("node.id %d does not match %d in %s/meta.properties", cfg.NodeID, logs.NodeID(), dir)
		}
		if cfg.ClusterID != "" && cfg.ClusterID != id {
			return "", fmt.Errorf("cluster.id %s does not match %s in %s/meta.properties: this log dir belongs to another cluster", cfg.ClusterID, id, dir)
		}
		// A dir added to log.dirs, or one formatted before directory ids, gets its meta.properties.
		if err := logs.Format(id, cfg.NodeID); err != nil {
			return "", err
		}
		return id, nil
	}
	id := cfg.ClusterID
	if id == "" {
		if len(cfg.Voters()) > 0 {
			return "", fmt.Errorf("log dir %s is not formatted: set cluster.id (the same on every node of the cluster) to format it, or format it with `gregor storage format`", dir)
		}
		id = newClusterID()
	}
	if err := logs.Format(id, cfg.NodeID); err != nil {
		return "", err
	}
	log.Info("formatted log dirs", "dirs", logs.Dirs(), "cluster_id", id, "node_id", cfg.NodeID)
	return id, nil
}

// requestTimeout bounds one request to the controller quorum that has no deadline of its own
// (heartbeats, registration, AlterPartition, metadata reads): half the session timeout, so a
// controller that stopped answering is left for the new active one while this broker's
// session there is still young; at least 500 ms, at most 5 s.
func (b *Broker) requestTimeout() time.Duration {
	d := time.Duration(b.cfg.BrokerSessionTimeoutMs) * time.Millisecond / 2
	return min(max(d, 500*time.Millisecond), 5*time.Second)
}

// background runs fn on its own goroutine until the broker closes.
func (b *Broker) background(fn func(ctx context.Context)) {
	b.bgWG.Add(1)
	go func() {
		defer b.bgWG.Done()
		fn(b.ctx)
	}()
}

// awaitUnfenced waits until this broker's image shows it registered and unfenced: the same
// entry carries the partition leaderships it was given, so it serves them from the start.
func (b *Broker) awaitUnfenced(ctx context.Context) error {
	for {
		im := b.meta.Image()
		if br := im.Broker(b.cfg.NodeID); br != nil && !br.Fenced && br.Epoch == b.epoch.Load() {
			// The image is visible before its subscribers run: wait for the reconcile that
			// makes this broker lead its partitions.
			return b.meta.WaitForOffset(ctx, im.Offset)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting to be unfenced by the controller: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// bindListeners binds every broker listener (the CONTROLLER listener belongs to the quorum)
// without serving yet: registration needs their ports.
func (b *Broker) bindListeners() error {
	b.bound = map[string]net.Addr{}
	b.listenerSec = map[string]*security.Listener{}
	limits := serverLimits(b.cfg) // one memory pool for all broker listeners
	cl, err := connLimits(b.cfg, false)
	if err != nil {
		return err
	}
	b.conns = server.NewConnQuotas(cl) // and one set of connection limits
	limits.Conns, limits.IPQuotas = b.conns, b.ipQuotas
	for _, l := range b.cfg.Listeners {
		if slices.Contains(b.cfg.ControllerListenerNames, l.Name) {
			continue
		}
		sec, err := b.listenerSecurity(l)
		if err != nil {
			return err
		}
		b.listenerSec[l.Name] = sec
		s := server.New(l.Name, b.handler, b.log)
		s.SetMetrics(b.metrics.Requests)
		s.SetLimits(limits)
		s.SetSecurity(sec)
		var addr net.Addr
		if ln := b.takeListener(l.Name); ln != nil {
			s.Use(ln)
			addr = ln.Addr()
		} else if addr, err = s.Listen(l.Addr()); err != nil {
			return fmt.Errorf("listeners %s: %w", l, err)
		}
		b.servers = append(b.servers, s)
		b.addrs = append(b.addrs, addr)
		b.bound[l.Name] = addr
		b.log.Info("listening", "listener", l.Name, "addr", addr.String())
	}
	if len(b.servers) == 0 {
		return errors.New("listeners: no broker listener configured")
	}
	return nil
}

// takeListener returns the pre-bound listener of the named listener (Options.Listeners), or
// nil; it is taken once, and Close closes the ones never taken.
func (b *Broker) takeListener(name string) net.Listener {
	ln := b.preBound[name]
	delete(b.preBound, name)
	return ln
}

// serverLimits are the connection limits of cfg, with a new memory pool: one per set of
// listeners, as Kafka gives its broker and its controller each a SocketServer and a pool.
func serverLimits(cfg *config.Broker) server.Limits {
	idle := time.Duration(-1)
	if ms := cfg.ConnectionsMaxIdleMs; ms >= 0 && ms <= math.MaxInt64/int64(time.Millisecond) {
		idle = time.Duration(ms) * time.Millisecond
	}
	return server.Limits{Pool: server.NewMemoryPool(cfg.QueuedMaxRequestBytes), MaxIdle: idle}
}

func (b *Broker) serve() {
	for _, s := range b.servers {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := s.Serve(b.ctx); err != nil {
				b.log.Error("listener stopped", "err", err)
			}
		}()
	}
}

// advertisedEndpoint is the address clients are told for a listener: the advertised host and
// port, a port of 0 meaning the bound one, and a wildcard host the machine's hostname.
func (b *Broker) advertisedEndpoint(l config.Listener) (string, int32) {
	port := int32(l.Port)
	if bound, ok := b.bound[l.Name].(*net.TCPAddr); ok {
		for _, cl := range b.cfg.Listeners {
			if cl.Name == l.Name && cl.Port == l.Port && l.Port == 0 {
				port = int32(bound.Port)
			}
		}
	}
	host := l.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return host, port
}

// Addr is the first broker listener's bound address.
func (b *Broker) Addr() net.Addr {
	if len(b.addrs) == 0 {
		return nil // a controller-only node serves no clients
	}
	return b.addrs[0]
}

// ListenerAddr is the bound address of the named broker listener (nil if there is none).
func (b *Broker) ListenerAddr(name string) net.Addr { return b.bound[name] }

// Handler exposes the request handler (for tests and tools in-process).
func (b *Broker) Handler() *api.Handler { return b.handler }

// Quorum is this node's controller (nil when it is not one).
func (b *Broker) Quorum() *quorum.Node { return b.quorum }

// Metadata is the image this broker follows.
func (b *Broker) Metadata() *metadata.Publisher { return b.meta }

// Close shuts down cleanly: a controlled shutdown first (the controller moves this broker's
// leaderships to other ISR members so producers fail over at once), then stop accepting,
// answer in-flight requests, stop the loops and the controller, then snapshot producer
// state, flush and checkpoint every log and write the clean-shutdown marker.
func (b *Broker) Close() error {
	b.once.Do(func() {
		b.closing.Store(true)
		// The http listener goes first, waiting for the scrapes in progress: none may read
		// the parts closed below.
		if b.http != nil {
			if err := b.http.Close(); err != nil {
				b.log.Warn("closing the http listener", "err", err)
			}
		}
		if b.console != nil {
			b.console.Close()
		}
		if b.stopHeartbeats != nil {
			b.stopHeartbeats()
		}
		switch {
		case b.noControlled:
		case b.soleVoter && b.quorum.Err() != nil:
			b.log.Warn("no controlled shutdown: this node was the only controller, and it failed")
		case len(b.servers) > 0 && b.epoch.Load() >= 0 && !b.fenced.Load():
			b.controlledShutdown(time.Duration(max(b.cfg.BrokerSessionTimeoutMs, 1000)) * time.Millisecond)
		}
		if b.handler != nil && b.handler.Groups != nil {
			b.handler.Groups.Close() // answers parked JoinGroup/SyncGroup, which the listeners wait for
		}
		if b.handler != nil && b.handler.Txns != nil {
			b.handler.Txns.Close() // its requests in flight and marker retries end before the listeners
		}
		if b.handler != nil && b.handler.ShareStates != nil {
			b.handler.ShareStates.Close()
		}
		// Cancelling first answers parked fetches at once instead of after their max wait.
		if b.cancel != nil {
			b.cancel()
		}
		for _, s := range b.servers {
			s.Close()
		}
		if b.handler != nil {
			b.handler.Close() // auto-creations in flight, before the controller channel goes
		}
		if b.fetchers != nil {
			b.fetchers.Close()
		}
		if b.peers != nil {
			b.peers.Close()
		}
		b.bgWG.Wait() // the broker's own requests to the controller end here
		if b.ctrl != nil {
			b.ctrl.Close()
		}
		if b.ctrlServer != nil {
			b.ctrlServer.Close()
		}
		b.wg.Wait()
		if b.quorum != nil {
			closeQuorum := b.quorum.Close
			if b.noControlled {
				closeQuorum = b.quorum.CloseNoHandOff // every voter stops: none takes over
			}
			if err := closeQuorum(); err != nil {
				b.log.Error("closing the controller failed", "err", err)
			}
		}
		if b.ctrlMux != nil {
			b.ctrlMux.Close()
		}
		if b.replicas != nil {
			b.err = b.replicas.Close()
		} else {
			b.err = b.logs.Close()
		}
		for _, ln := range b.preBound {
			ln.Close() // bound for a listener start-up never reached
		}
		if b.err == nil {
			b.log.Info("shut down cleanly")
		}
	})
	return b.err
}

// CloseUncontrolled is Close without the controlled shutdown and without handing the
// controller's leadership off: for the nodes of a cluster that stops as a whole, where no
// broker stays to take leaderships over and no voter to lead, and the last ones to stop
// would wait out a deadline for a quorum that is already gone. Everything else (flushes,
// checkpoints, the clean-shutdown marker) is as Close.
// Call one of Close and CloseUncontrolled, once, from one goroutine.
func (b *Broker) CloseUncontrolled() error {
	b.noControlled = true
	return b.Close()
}

// newClusterID returns a Kafka-style cluster id: 16 random bytes, URL-safe base64.
func newClusterID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(u[:])
}
