// Package state is the cluster metadata state machine: the controller's deterministic core.
//
// An Image holds brokers, topics, partitions (replicas, ISR, leader, epochs, reassignments),
// config overrides, the producer id counter, SCRAM credentials and ACLs. It changes only by
// applying records (Apply) or by restoring a snapshot (Restore); replaying the same records
// gives the same image on every controller and broker.
//
// A Controller wraps an Image with the controller's commands (CreateTopics, RegisterBroker,
// Heartbeat, AlterPartition, ElectLeaders, reassignments, ...). A command reads the image and
// returns the records that would carry it out plus the response the caller gets once those
// records are committed; it never changes the image. The quorum proposes the records, and
// once raft commits them every node applies them. Commands must therefore be computed
// against an image with every earlier proposal applied; the quorum runs them one at a time.
//
// There are no goroutines, clocks or I/O here: time comes in as an argument (milliseconds),
// randomness (topic ids) through Config.NewUUID, so tests drive everything deterministically.
//
// The one piece of state that is not in the image is broker sessions: when each broker last
// heartbeated. Heartbeats are not logged (a log record per broker every few seconds would
// grow the log without bound and make every heartbeat wait for a raft round trip); only
// their consequences are — fencing when a session expires, unfencing when a broker has
// caught up. Sessions live on the active controller, and a newly active controller starts
// every broker's session afresh (ActivateSessions), as Kafka's controllers do.
package state

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregor-project/gregor/internal/config"
)

// Config holds what commands need beyond the image.
type Config struct {
	ClusterID string // brokers registering with another cluster id get INCONSISTENT_CLUSTER_ID
	// SessionTimeoutMs is broker.session.timeout.ms: a broker without a heartbeat for longer
	// is fenced.
	SessionTimeoutMs int64
	// DefaultPartitions and DefaultReplicationFactor are num.partitions and
	// default.replication.factor, used when CreateTopics asks for -1.
	DefaultPartitions        int32
	DefaultReplicationFactor int16
	// UncleanLeaderElection is the static unclean.leader.election.enable; a cluster-wide
	// dynamic broker config or a topic override takes precedence.
	UncleanLeaderElection bool
	// ProducerIDBlockSize is how many producer ids a broker gets per request (1000).
	ProducerIDBlockSize int64
	// ValidateTopicConfig and ValidateBrokerConfig check one key and value of AlterConfigs
	// and CreateTopics (defaults: the config package's rules).
	ValidateTopicConfig  func(key, value string) error
	ValidateBrokerConfig func(key, value string) error
	// ValidateGroupConfigs checks a group's whole set of overrides, as it would be after a
	// change (default: the config package's rules against Kafka's default group.* bounds;
	// the broker passes its own configuration's).
	ValidateGroupConfigs func(m map[string]string) error
	// NewUUID makes topic ids (default RandomUUID). Tests pass a deterministic source.
	NewUUID func() UUID
	// Delegation tokens: TokenSecret is delegation.token.secret.key ("" = disabled),
	// TokenMaxLifetimeMs delegation.token.max.lifetime.ms, TokenExpiryTimeMs
	// delegation.token.expiry.time.ms, TokenExpiryCheckMs
	// delegation.token.expiry.check.interval.ms (defaults: Kafka's).
	TokenSecret        string
	TokenMaxLifetimeMs int64
	TokenExpiryTimeMs  int64
	TokenExpiryCheckMs int64
	// LocalBroker is the broker in this controller's own process (a combined node), with
	// its incarnation; HasLocalBroker says whether there is one. A registration of that
	// broker id with another incarnation belongs to an earlier process of this node, dead
	// since this one started, so ActivateSessions gives it no session: the restarted broker
	// re-registers at once instead of waiting out the dead one's session.
	HasLocalBroker   bool
	LocalBroker      int32
	LocalIncarnation UUID
}

func (cfg *Config) setDefaults() {
	if cfg.SessionTimeoutMs <= 0 {
		cfg.SessionTimeoutMs = 9000
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = 1
	}
	if cfg.ProducerIDBlockSize <= 0 {
		cfg.ProducerIDBlockSize = 1000
	}
	if cfg.ValidateTopicConfig == nil {
		cfg.ValidateTopicConfig = config.ValidateTopicConfig
	}
	if cfg.ValidateBrokerConfig == nil {
		def := config.Default()
		cfg.ValidateBrokerConfig = def.ValidateDynamic
	}
	if cfg.ValidateGroupConfigs == nil {
		cfg.ValidateGroupConfigs = config.Default().ValidateGroupConfigs
	}
	if cfg.NewUUID == nil {
		cfg.NewUUID = RandomUUID
	}
	if cfg.TokenMaxLifetimeMs <= 0 {
		cfg.TokenMaxLifetimeMs = 7 * 24 * 3600 * 1000
	}
	if cfg.TokenExpiryTimeMs <= 0 {
		cfg.TokenExpiryTimeMs = 24 * 3600 * 1000
	}
	if cfg.TokenExpiryCheckMs <= 0 {
		cfg.TokenExpiryCheckMs = 3600 * 1000
	}
}

// Controller is the metadata state machine with its commands. Not safe for concurrent use.
type Controller struct {
	cfg Config
	im  *Image
	// sessions maps a broker id to the time (ms) of its last registration or heartbeat. Local
	// to the active controller; see the package comment.
	sessions map[int32]int64
	// tokenSweep is when ExpireDelegationTokens last looked (active controller only).
	tokenSweep int64
}

// New returns a controller over an empty image.
func New(cfg Config) *Controller {
	cfg.setDefaults()
	return &Controller{cfg: cfg, im: NewImage(), sessions: map[int32]int64{}}
}

// Config returns the controller's configuration (with defaults filled in).
func (c *Controller) Config() Config { return c.cfg }

// Image returns the current image. Callers must not modify it.
func (c *Controller) Image() *Image { return c.im }

// Apply applies one committed batch at offset (see Image.Apply).
func (c *Controller) Apply(offset int64, recs []Record) error {
	err := c.im.Apply(offset, recs)
	for _, r := range recs {
		if u, ok := r.(*UnregisterBrokerRecord); ok && c.im.brokers[u.NodeID] == nil {
			delete(c.sessions, u.NodeID)
		}
	}
	return err
}

// Snapshot encodes the image (see Image.Snapshot).
func (c *Controller) Snapshot() []byte { return c.im.Snapshot() }

// Restore replaces the image with a snapshot. Sessions are kept; ActivateSessions resets them.
func (c *Controller) Restore(b []byte) error {
	im, err := Restore(b)
	if err != nil {
		return err
	}
	c.im = im
	return nil
}

// ActivateSessions starts a fresh session at now for every registered broker. The quorum
// calls it when this controller becomes active, so brokers are judged by heartbeats this
// controller has seen.
//
// formerController is the node that was active before (-1 if unknown). A controller takes
// over when that one stopped answering its quorum (killed, paused, cut off) or stepped down;
// either way the broker on the same node, if any, is likely gone too, so its session starts
// with only half a session timeout left: dead, it is fenced that much sooner (a leader that
// was also the active controller fails over in about an election plus half a session); alive,
// its next heartbeat, which finds this controller within a heartbeat interval, renews it.
func (c *Controller) ActivateSessions(now int64, formerController int32) {
	clear(c.sessions)
	for id, b := range c.im.brokers {
		c.sessions[id] = now
		if id == formerController {
			c.sessions[id] = now - c.cfg.SessionTimeoutMs/2
		}
		switch {
		case c.cfg.HasLocalBroker && id == c.cfg.LocalBroker && b.IncarnationID != c.cfg.LocalIncarnation:
			c.sessions[id] = now - c.cfg.SessionTimeoutMs - 1 // expired: see Config.LocalBroker
		case b.Fenced && b.InControlledShutdown:
			// It finished a controlled shutdown (Heartbeat ended its session then); its next
			// process must not wait out a session this controller would start afresh.
			c.sessions[id] = now - c.cfg.SessionTimeoutMs - 1
		}
	}
}

// errf wraps a Kafka error (the sentinel the api layer translates) with a message.
func errf(kind *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// ErrorCode returns the Kafka error code of an error returned in a response (0 for nil,
// UNKNOWN_SERVER_ERROR for an error that carries no code).
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// uncleanEnabled reports whether a partition of topic t may elect a leader from outside its
// ISR: the topic's override, else the cluster-wide dynamic default, else the static config.
func (c *Controller) uncleanEnabled(t *Topic) bool {
	const key = "unclean.leader.election.enable"
	if v, ok := c.im.Configs(ConfigResource{ResourceTopic, t.Name})[key]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	if v, ok := c.im.Configs(ConfigResource{ResourceBroker, ""})[key]; ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	}
	return c.cfg.UncleanLeaderElection
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
