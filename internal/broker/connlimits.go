package broker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gregor-project/gregor/internal/config"
	"github.com/gregor-project/gregor/internal/quota"
	"github.com/gregor-project/gregor/internal/server"
)

// The connection limits of the broker's listeners (server.ConnQuotas): max.connections,
// max.connections.per.ip, max.connections.per.ip.overrides, max.connection.creation.rate
// (and the listener.name.<listener>. forms of the first and last), and the ip client quota
// connection_creation_rate read from the metadata image. The CONTROLLER listener has a set
// of its own over the same keys, as Kafka gives a controller's SocketServer its own
// ConnectionQuotas; raft traffic between controllers (internal/quorum's side of the
// listener) is not counted, so the quorum never waits on a client's connections.

// resolveTimeout bounds the lookup of a host name of max.connections.per.ip.overrides.
const resolveTimeout = 10 * time.Second

// connLimits are the connection limits of cfg over the broker listeners. A host name of
// max.connections.per.ip.overrides is looked up now and stands for each address it resolves
// to (Kafka takes the first); one that does not resolve is an error.
// With controller, they are the limits over the controller listener instead: none of its
// connections is let past max.connections (Kafka protects only the inter-broker listener).
func connLimits(cfg *config.Broker, controller bool) (server.ConnLimits, error) {
	c := cfg.Current()
	l := server.ConnLimits{
		MaxConnections:  int(c.MaxConnections),
		MaxCreationRate: int(c.MaxConnectionCreationRate),
		Listeners:       map[string]server.ListenerConnLimits{},
		InterBroker:     c.InterBrokerListenerName,
		MaxPerIP:        int(c.MaxConnectionsPerIP),
		PerIPOverrides:  map[netip.Addr]int{},
		Window:          quota.Window{Num: int(c.QuotaWindowNum), Size: time.Duration(c.QuotaWindowSizeSeconds) * time.Second},
	}
	if controller {
		l.InterBroker = ""
	}
	for _, ln := range c.Listeners {
		if slices.Contains(c.ControllerListenerNames, ln.Name) != controller {
			continue
		}
		maxConns, rate := cfg.ListenerConnectionLimits(ln.Name)
		l.Listeners[ln.Name] = server.ListenerConnLimits{MaxConnections: int(maxConns), MaxCreationRate: int(rate)}
	}
	for host, n := range c.MaxConnectionsPerIPOverrides {
		if a, err := netip.ParseAddr(host); err == nil {
			l.PerIPOverrides[a.Unmap()] = int(n)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		cancel()
		if err != nil {
			return l, fmt.Errorf("max.connections.per.ip.overrides: %s: %w", host, err)
		}
		for _, a := range addrs {
			l.PerIPOverrides[a.Unmap()] = int(n)
		}
	}
	return l, nil
}

// ipQuotas are the client quotas of the image in force, for the ip connection_creation_rate.
func (b *Broker) ipQuotas() quota.Table {
	if im := b.meta.Image(); im != nil {
		return im.ClientQuotas
	}
	return nil
}

// reconfigureConnections applies the connection limits of the live configuration after a
// dynamic change (Kafka's DynamicConnectionQuota): accept loops waiting for a slot look
// again, and if the broker now holds more than max.connections the least recently active
// connections of its unprotected listeners are closed. A host of
// max.connections.per.ip.overrides that no longer resolves keeps the limits in force.
func (b *Broker) reconfigureConnections() {
	for _, q := range []struct {
		conns      *server.ConnQuotas
		controller bool
	}{{b.conns, false}, {b.ctrlConns, true}} {
		if q.conns == nil {
			continue
		}
		l, err := connLimits(b.cfg, q.controller)
		if err != nil {
			b.log.Error("connection limits not changed", "err", err)
			return
		}
		for _, v := range q.conns.SetLimits(l) {
			b.log.Info("closing the least recently active connection: the node is over max.connections", "listener", v.Listener(), "remote", v.IP().String())
			v.Close()
		}
	}
}
