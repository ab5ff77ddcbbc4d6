// Package client is a broker's channel to the controller quorum: it sends controller
// requests (registration, heartbeats, AlterPartition, producer id blocks, forwarded admin
// requests) to the active controller, finding it with DescribeQuorum and following it when
// it moves, and it reads the committed metadata log (log.go).
//
// Versions: a request whose version is 0 (kmsg's default) is sent at the highest version
// both kmsg and the controller support (learned with ApiVersions on each connection); a
// caller that fills version-dependent fields (AlterPartition's NewISR before v3 or
// NewEpochISR from v3; topic names before v2 or ids from v2) either fills both or sets the
// version it filled (>= 1), which is then sent as it is.
//
// Retries: a request answered NOT_CONTROLLER (anywhere in the response), one whose
// connection fails, and one for which no active controller is known, is retried with a
// short backoff against the active controller found anew, until ctx ends. As with Kafka, a
// retried command may have taken effect the first time (a retried CreateTopics can see
// TOPIC_ALREADY_EXISTS).
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/controller/rpc"
	"github.com/gregor-project/gregor/internal/wire"
)

// Config configures a broker's controller channel.
type Config struct {
	Voters    []config.Voter // controller.quorum.voters
	NodeID    int32          // this broker's node.id (client id "broker-<id>")
	ClusterID string
	Logger    *slog.Logger // default slog.Default()
	// Dial opens a connection (default wire.Dial).
	Dial func(ctx context.Context, addr, clientID string) (*wire.Conn, error)
	// Backoff is the pause between retries (default 50 ms); AttemptTimeout bounds dialing
	// and asking one voter who is active (default 2 s).
	Backoff        time.Duration
	AttemptTimeout time.Duration
	// RequestTimeout bounds one attempt of a request whose context has no deadline (a
	// broker's heartbeats, registration, AlterPartition): a controller that stopped
	// answering (paused, cut off) costs one timeout, then the client finds the active
	// controller again (default 5 s). Requests with a deadline use theirs.
	RequestTimeout time.Duration
}

// Client sends requests to the active controller. Safe for concurrent use.
type Client struct {
	cfg      Config
	log      *slog.Logger
	clientID string
	active   atomic.Int32 // last known active controller, -1 unknown
	voters   map[int32]*voter
	order    []int32      // voter ids in configuration order
	next     atomic.Int32 // where discovery starts: rotates so a dead voter is not always asked first
}

// voter is the connection to one controller. mu serialises dialing; conn is replaced when
// it fails.
type voter struct {
	id   int32
	addr string
	mu   sync.Mutex
	conn *voterConn // nil or failed: dial again
}

type voterConn struct {
	c        *wire.Conn
	versions map[int16]int16 // api key -> highest version the controller serves
}

// New returns a client; it connects lazily.
func New(cfg Config) *Client {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = wire.Dial
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 2 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	c := &Client{cfg: cfg, log: cfg.Logger, clientID: "broker-" + strconv.Itoa(int(cfg.NodeID)), voters: map[int32]*voter{}}
	for _, v := range cfg.Voters {
		c.voters[v.ID] = &voter{id: v.ID, addr: net.JoinHostPort(v.Host, strconv.Itoa(v.Port))}
		c.order = append(c.order, v.ID)
	}
	c.active.Store(-1)
	return c
}

// ActiveController is the last known active controller's node id, -1 if unknown.
func (c *Client) ActiveController() int32 { return c.active.Load() }

// Close closes every connection.
func (c *Client) Close() error {
	for _, v := range c.voters {
		v.mu.Lock()
		if v.conn != nil {
			v.conn.c.Close()
			v.conn = nil
		}
		v.mu.Unlock()
	}
	return nil
}

// ErrNoController is returned when ctx ends before any active controller answered.
var ErrNoController = fmt.Errorf("client: no active controller reachable: %w", kerr.NotController)

// Request sends req to the active controller and returns its answer (see the package
// comment for versions and retries). Error codes inside the response other than
// NOT_CONTROLLER are the caller's to read.
func (c *Client) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	pinned := req.GetVersion() > 0
	var lastErr error = ErrNoController
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(c.cfg.Backoff):
			case <-ctx.Done():
				return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), lastErr)
			}
		}
		id := c.active.Load()
		if id < 0 {
			if id = c.discover(ctx); id < 0 {
				continue
			}
		}
		v := c.voters[id]
		vc, err := c.conn(ctx, v)
		if err != nil {
			lastErr = err
			c.active.CompareAndSwap(id, -1)
			continue
		}
		if !pinned {
			max, ok := vc.versions[req.Key()]
			if !ok {
				return nil, fmt.Errorf("client: controller %d does not serve %s: %w", id, kmsg.NameForKey(req.Key()), kerr.UnsupportedVersion)
			}
			req.SetVersion(min(max, req.MaxVersion()))
		}
		resp, err := c.attempt(ctx, vc, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = err
			c.drop(v, vc)
			c.active.CompareAndSwap(id, -1)
			continue
		}
		if notController(resp) {
			lastErr = fmt.Errorf("controller %d: %w", id, kerr.NotController)
			c.active.CompareAndSwap(id, -1)
			continue
		}
		return resp, nil
	}
}

// attempt sends req once on vc, bounded by RequestTimeout when ctx has no deadline (a
// timed-out connection is closed by wire, so the next attempt dials and rediscovers).
func (c *Client) attempt(ctx context.Context, vc *voterConn, req kmsg.Request) (kmsg.Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	return vc.c.Request(ctx, req)
}

// discover asks the voters, in turn, which controller is active; -1 if none knows.
func (c *Client) discover(ctx context.Context) int32 {
	n := len(c.order)
	start := int(c.next.Add(1)) % n
	for i := range n {
		v := c.voters[c.order[(start+i)%n]]
		id, err := c.askLeader(ctx, v)
		if err != nil {
			c.log.Debug("controller did not answer DescribeQuorum", "controller", v.id, "err", err)
			continue
		}
		if _, ok := c.voters[id]; ok {
			if old := c.active.Swap(id); old != id {
				c.log.Info("active controller", "controller", id)
			}
			return id
		}
	}
	return -1
}

func (c *Client) askLeader(ctx context.Context, v *voter) (int32, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	vc, err := c.conn(actx, v)
	if err != nil {
		return -1, err
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(min(vc.versions[req.Key()], req.MaxVersion()))
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = rpc.MetadataTopic
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	r, err := vc.c.Request(actx, req)
	if err != nil {
		c.drop(v, vc)
		return -1, err
	}
	resp := r.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, err
			}
			return p.LeaderID, nil
		}
	}
	return -1, errors.New("client: DescribeQuorum answer without the metadata partition")
}

// conn returns a live connection to v, dialing (and asking ApiVersions) if needed.
func (c *Client) conn(ctx context.Context, v *voter) (*voterConn, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.conn != nil && v.conn.c.Err() == nil {
		return v.conn, nil
	}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	wc, err := c.cfg.Dial(dctx, v.addr, c.clientID)
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "gregor-broker", "1"
	r, err := wc.Request(dctx, req)
	if err != nil {
		wc.Close()
		return nil, err
	}
	resp := r.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		wc.Close()
		return nil, fmt.Errorf("client: ApiVersions to controller %d: %w", v.id, err)
	}
	vc := &voterConn{c: wc, versions: map[int16]int16{}}
	for _, k := range resp.ApiKeys {
		vc.versions[k.ApiKey] = k.MaxVersion
	}
	v.conn = vc
	return vc, nil
}

// drop forgets a failed connection (if it is still v's).
func (c *Client) drop(v *voter, vc *voterConn) {
	v.mu.Lock()
	if v.conn == vc {
		v.conn = nil
	}
	v.mu.Unlock()
	vc.c.Close()
}
