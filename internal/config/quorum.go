package config

import (
	"slices"
	"strconv"
)

// Quorum rules (KRaft's, with one Gregor default): a node that is a controller must be one
// of controller.quorum.voters and have a controller listener; a broker-only node needs the
// voters to find the controllers. The one exception is the embedded default: a node with
// both roles and no voters runs a single-voter quorum of its own on a loopback port, so
// `gregor server` with no config is a complete single-node cluster.

// IsController reports whether process.roles includes controller.
func (b *Broker) IsController() bool { return slices.Contains(b.ProcessRoles, "controller") }

// IsBroker reports whether process.roles includes broker.
func (b *Broker) IsBroker() bool { return slices.Contains(b.ProcessRoles, "broker") }

// Voters returns controller.quorum.voters parsed (nil when unset: the single-node default).
func (b *Broker) Voters() []Voter {
	vs, _ := ParseVoters(b.ControllerQuorumVoters)
	return vs
}

// ControllerListener returns the first listener named in controller.listener.names.
func (b *Broker) ControllerListener() (Listener, bool) {
	for _, l := range b.Listeners {
		if slices.Contains(b.ControllerListenerNames, l.Name) {
			return l, true
		}
	}
	return Listener{}, false
}

func (b *Broker) checkQuorum() error {
	voters := b.Voters()
	if len(voters) == 0 {
		if !b.IsController() {
			return invalid("controller.quorum.voters", "", "a node with process.roles=broker must name the controllers")
		}
		if !b.IsBroker() {
			return invalid("controller.quorum.voters", "", "a controller-only node must be one of controller.quorum.voters")
		}
		return nil
	}
	if !b.IsController() {
		return nil
	}
	found := false
	for _, v := range voters {
		found = found || v.ID == b.NodeID
	}
	if !found {
		return invalid("controller.quorum.voters", b.ControllerQuorumVoters,
			"node.id "+strconv.Itoa(int(b.NodeID))+" is a controller but not one of the voters")
	}
	if _, ok := b.ControllerListener(); !ok {
		return invalid("controller.listener.names", b.values["controller.listener.names"],
			"a controller needs a listener named in controller.listener.names among listeners")
	}
	return nil
}
