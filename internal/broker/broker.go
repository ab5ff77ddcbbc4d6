// Package broker wires one Gregor node together: config, log manager, metadata, partitions,
// the api handler, the listeners and the background loops (retention, flush, checkpoints).
// cmd/gregor starts it; tests start it in-process the same way.
package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gregor-project/gregor/internal/api"
	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/group"
	"github.com/gregor-project/gregor/internal/metadata"
	"github.com/gregor-project/gregor/internal/replica"
	"github.com/gregor-project/gregor/internal/server"
	"github.com/gregor-project/gregor/internal/storage"
)

// Broker is a running node.
type Broker struct {
	cfg      *config.Broker
	log      *slog.Logger
	logs     *storage.Manager
	meta     *metadata.Store
	replicas *replica.Manager
	handler  *api.Handler
	servers  []*server.Server
	addrs    []net.Addr

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

// Options are start-up choices that are not broker configs.
type Options struct {
	FS     storage.FS // nil: the real file system
	Logger *slog.Logger
}

// Start opens the data directory (formatting it on first start, recovering it after an
// unclean stop), opens every topic's partitions and starts serving.
func Start(cfg *config.Broker, opt Options) (*Broker, error) {
	fs := opt.FS
	if fs == nil {
		fs = storage.OS
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	dir := cfg.LogDirs[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log.dirs %s: %w", dir, err)
	}
	logs, err := storage.OpenManager(fs, dir, log)
	if err != nil {
		return nil, err
	}
	if logs.ClusterID() == "" {
		if err := logs.Format(newClusterID(), cfg.NodeID); err != nil {
			return nil, err
		}
		log.Info("formatted log dir", "dir", dir, "cluster_id", logs.ClusterID(), "node_id", cfg.NodeID)
	} else if logs.NodeID() != cfg.NodeID {
		return nil, fmt.Errorf("node.id %d does not match %d in %s/meta.properties", cfg.NodeID, logs.NodeID(), dir)
	}
	meta, err := metadata.Open(dir)
	if err != nil {
		return nil, err
	}
	if bc := meta.Image().BrokerConfigs; len(bc) > 0 {
		if err := api.ApplyDynamic(cfg, bc); err != nil {
			return nil, fmt.Errorf("dynamic broker configs: %w", err)
		}
	}
	b := &Broker{cfg: cfg, log: log, logs: logs, meta: meta}
	b.replicas = replica.NewManager(fs, logs, log)
	b.handler = &api.Handler{
		Cfg: cfg, Meta: meta, Replicas: b.replicas, Logs: logs, Log: log, Now: time.Now,
		NodeID: cfg.NodeID, ClusterID: logs.ClusterID(), Rack: cfg.BrokerRack,
	}
	if err := b.openPartitions(); err != nil {
		b.replicas.Close()
		return nil, err
	}
	b.handler.Groups = group.NewCoordinator(group.Options{Config: group.ConfigFrom(cfg), Replicas: b.replicas, Log: log, EnsureTopic: b.handler.EnsureOffsetsTopic, Topics: b.handler.ConsumerTopics})
	if err := b.handler.Groups.Start(); err != nil {
		b.replicas.Close()
		return nil, err
	}
	if err := b.listen(); err != nil {
		b.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	for _, s := range b.servers {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := s.Serve(ctx); err != nil {
				log.Error("listener stopped", "err", err)
			}
		}()
	}
	b.startLoops(ctx)
	return b, nil
}

// openPartitions opens every partition of every topic, and deletes partition directories of
// topics that no longer exist (deleted while their files could not be removed).
func (b *Broker) openPartitions() error {
	im := b.meta.Image()
	for _, n := range im.TopicNames() {
		if err := b.handler.OpenPartitions(im.Topic(n), 0); err != nil {
			return err
		}
	}
	for _, tp := range b.logs.Existing() {
		if t := im.Topic(tp.Topic); t == nil || tp.Partition >= t.Partitions {
			b.log.Warn("deleting stray partition directory", "topic", tp.Topic, "partition", tp.Partition)
			if err := b.logs.Delete(tp.Topic, tp.Partition); err != nil {
				return err
			}
		}
	}
	return nil
}

// listen binds every broker listener (the CONTROLLER listener belongs to the quorum).
func (b *Broker) listen() error {
	for _, l := range b.cfg.Listeners {
		if slices.Contains(b.cfg.ControllerListenerNames, l.Name) {
			continue
		}
		s := server.New(l.Name, b.handler, b.log)
		addr, err := s.Listen(l.Addr())
		if err != nil {
			return fmt.Errorf("listeners %s: %w", l, err)
		}
		b.servers = append(b.servers, s)
		b.addrs = append(b.addrs, addr)
		if len(b.servers) == 1 {
			b.handler.AdvertisedHost, b.handler.AdvertisedPort = b.advertised(l, addr)
		}
		b.log.Info("listening", "listener", l.Name, "addr", addr.String())
	}
	if len(b.servers) == 0 {
		return errors.New("listeners: no broker listener configured")
	}
	return nil
}

// advertised picks the address clients are told: the advertised listener of the same name,
// else the bound address (a wildcard host becomes the machine's hostname).
func (b *Broker) advertised(l config.Listener, bound net.Addr) (string, int32) {
	port := int32(bound.(*net.TCPAddr).Port)
	for _, a := range b.cfg.AdvertisedListeners {
		if a.Name == l.Name {
			if a.Port != 0 {
				port = int32(a.Port)
			}
			if a.Host != "" {
				return a.Host, port
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
func (b *Broker) Addr() net.Addr { return b.addrs[0] }

// Handler exposes the request handler (for tests and tools in-process).
func (b *Broker) Handler() *api.Handler { return b.handler }

// Close shuts down cleanly: stop accepting, answer in-flight requests, stop the loops, then
// snapshot producer state, flush and checkpoint every log and write the clean-shutdown marker.
func (b *Broker) Close() error {
	b.once.Do(func() {
		if b.handler.Groups != nil {
			b.handler.Groups.Close() // answers parked JoinGroup/SyncGroup, which the listeners wait for
		}
		// Cancelling first answers parked fetches at once instead of after their max wait.
		if b.cancel != nil {
			b.cancel()
		}
		for _, s := range b.servers {
			s.Close()
		}
		b.wg.Wait()
		b.err = b.replicas.Close()
		if b.err == nil {
			b.log.Info("shut down cleanly")
		}
	})
	return b.err
}

// newClusterID returns a Kafka-style cluster id: 16 random bytes, URL-safe base64.
func newClusterID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(u[:])
}
