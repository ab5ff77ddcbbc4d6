package broker

import (
	"context"
	"errors"
	"maps"
	"strconv"

	"github.com/gregor-project/gregor/internal/api"
	"github.com/gregor-project/gregor/internal/controller/quorum"
	"github.com/gregor-project/gregor/internal/controller/state"
)

// The dynamic broker configs of a controller-only node. A node with the broker role takes
// them from its metadata image (reconcile in metaloop.go); a controller-only node has no
// image of its own, so it follows its quorum's state instead: after each applied entry it
// reads the cluster-wide defaults (BROKER resource "") and its own set (BROKER resource
// "<node.id>"), and when either changed it makes them its live configuration and applies
// the connection limits of its CONTROLLER listener, as Kafka's ControllerServer registers
// its SocketServer for the same dynamic keys (max.connections, max.connections.per.ip and
// .overrides, max.connection.creation.rate and their listener.name.<l>. forms).
//
// Only this goroutine touches lastDefaults and lastOwn: what it applied last, so a value the
// node refuses (a cross-key rule broken) is reported once, not after every entry.

// followControllerConfigs runs until ctx ends or the quorum node stops.
func (b *Broker) followControllerConfigs(ctx context.Context, node *quorum.Node) {
	var lastDefaults, lastOwn map[string]string
	own := state.ConfigResource{Type: state.ResourceBroker, Name: strconv.Itoa(int(b.cfg.NodeID))}
	for first := true; ; first = false {
		_, changed := node.Applied() // before the read: a change in between still wakes us
		var defaults, mine map[string]string
		rctx, cancel := context.WithTimeout(ctx, b.requestTimeout())
		err := node.Read(rctx, func(c *state.Controller) {
			im := c.Image()
			defaults = maps.Clone(im.Configs(state.ConfigResource{Type: state.ResourceBroker}))
			mine = maps.Clone(im.Configs(own))
		})
		cancel()
		switch {
		case errors.Is(err, quorum.ErrStopped) || ctx.Err() != nil:
			return
		case err != nil:
			b.log.Warn("reading the controller's dynamic configs failed", "err", err)
		case first || !maps.Equal(defaults, lastDefaults) || !maps.Equal(mine, lastOwn):
			lastDefaults, lastOwn = defaults, mine
			if err := errors.Join(api.ApplyDynamicDefaults(b.cfg, defaults), api.ApplyDynamic(b.cfg, mine)); err != nil {
				b.log.Error("applying dynamic broker configs failed", "err", err)
			}
			b.reconfigureConnections()
		}
		select {
		case <-changed:
		case <-node.Done():
			return
		case <-ctx.Done():
			return
		}
	}
}
