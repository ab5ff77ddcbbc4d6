package limits

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Kafka's connection limits (max.connections, max.connections.per.ip and its overrides,
// max.connection.creation.rate, the ip quota connection_creation_rate) over real TCP against
// an in-process broker. A connection's fate is read from the broker's answer to an
// ApiVersions sent at once: answered (accepted and served), closed, or no answer yet (the
// listener is not accepting). Connections come from several loopback addresses (127.0.0.x,
// with a local address to dial from).

// outcome is what became of a connection's first request.
type outcome int

const (
	answered outcome = iota // the broker answered: it accepted and served the connection
	refused                 // the broker closed the connection
	silent                  // no answer yet
)

func (o outcome) String() string { return [...]string{"answered", "closed", "no answer"}[o] }

// probe is a connection from one local address with an ApiVersions request sent.
type probe struct {
	t  *testing.T
	nc net.Conn
}

// dialFrom connects to addr from the loopback address local and sends an ApiVersions v0.
func dialFrom(t *testing.T, addr, local string) *probe {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("probe")).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	return &probe{t: t, nc: nc}
}

// wait reads the answer for up to d.
func (p *probe) wait(d time.Duration) outcome {
	p.nc.SetReadDeadline(time.Now().Add(d))
	var sz [4]byte
	_, err := io.ReadFull(p.nc, sz[:])
	if err == nil {
		_, err = io.ReadFull(p.nc, make([]byte, binary.BigEndian.Uint32(sz[:])))
	}
	var ne net.Error
	switch {
	case err == nil:
		return answered
	case errors.As(err, &ne) && ne.Timeout():
		return silent
	}
	return refused
}

// open dials from local and wants the connection served.
func open(t *testing.T, addr, local string) *probe {
	t.Helper()
	p := dialFrom(t, addr, local)
	if o := p.wait(10 * time.Second); o != answered {
		t.Fatalf("connection from %s: %s, want it answered", local, o)
	}
	return p
}

// wantRefused dials from local and wants the connection closed unanswered.
func wantRefused(t *testing.T, addr, local string) {
	t.Helper()
	if o := dialFrom(t, addr, local).wait(10 * time.Second); o != refused {
		t.Fatalf("connection from %s: %s, want it closed", local, o)
	}
}

// eventually dials from local until a connection gets outcome want, within a deadline.
func eventually(t *testing.T, addr, local string, want outcome) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		p := dialFrom(t, addr, local)
		o := p.wait(10 * time.Second)
		p.nc.Close()
		if o == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections from %s: %s, never %s", local, o, want)
		}
	}
}

func TestMaxConnectionsPerIP(t *testing.T) {
	b := testutil.StartBroker(t, "max.connections.per.ip=2", "max.connections.per.ip.overrides=127.0.0.1:3")
	addr := b.Addr()
	var from1 []*probe
	for range 3 {
		from1 = append(from1, open(t, addr, "127.0.0.1"))
	}
	wantRefused(t, addr, "127.0.0.1") // past its override, 3
	open(t, addr, "127.0.0.2")
	open(t, addr, "127.0.0.2")
	wantRefused(t, addr, "127.0.0.2") // past max.connections.per.ip, 2
	wantRefused(t, addr, "127.0.0.1")
	// A connection closed by its client frees its slot once the broker sees it closed.
	from1[0].nc.Close()
	eventually(t, addr, "127.0.0.1", answered)
	wantRefused(t, addr, "127.0.0.2")
}

func TestMaxConnectionsBlocksUntilOneCloses(t *testing.T) {
	b := testutil.StartBroker(t, "max.connections=2")
	addr := b.Addr()
	first := open(t, addr, "127.0.0.1")
	open(t, addr, "127.0.0.2")
	// The third is connected by the kernel (the listen backlog) but not accepted: no answer.
	third := dialFrom(t, addr, "127.0.0.3")
	if o := third.wait(300 * time.Millisecond); o != silent {
		t.Fatalf("connection past max.connections: %s, want it waiting", o)
	}
	first.nc.Close()
	if o := third.wait(10 * time.Second); o != answered {
		t.Fatalf("waiting connection after one closed: %s, want it answered", o)
	}
}

// A listener limit of max.connections applies to its listener alone, and the inter-broker
// listener is let through past the broker-wide limit.
func TestListenerMaxConnectionsAndInterBroker(t *testing.T) {
	b := testutil.StartBroker(t, "listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"max.connections=3", "listener.name.external.max.connections=1")
	ext := b.ListenerAddr("EXTERNAL").String()
	inter := b.ListenerAddr("PLAINTEXT").String()
	e1 := open(t, ext, "127.0.0.2")
	e2 := dialFrom(t, ext, "127.0.0.2")
	if o := e2.wait(300 * time.Millisecond); o != silent {
		t.Fatalf("EXTERNAL past its listener max.connections: %s, want it waiting", o)
	}
	// The inter-broker listener (PLAINTEXT) fills the broker to 3, then goes past it: the
	// least recently active connection of another listener, e1, is closed.
	open(t, inter, "127.0.0.3")
	open(t, inter, "127.0.0.3")
	open(t, inter, "127.0.0.3")
	if o := e1.wait(10 * time.Second); o != refused {
		t.Fatalf("EXTERNAL connection with the inter-broker listener past max.connections: %s, want it closed", o)
	}
	// e2 still waits: the broker holds 3 inter-broker connections.
	if o := e2.wait(300 * time.Millisecond); o != silent {
		t.Fatalf("EXTERNAL with the broker full: %s, want it waiting", o)
	}
}

func TestMaxConnectionCreationRate(t *testing.T) {
	const rate = 5
	b := testutil.StartBroker(t, "max.connection.creation.rate=5", "quota.window.num=2", "quota.window.size.seconds=1")
	addr := b.Addr()
	// Connect one after another for a while and count the connections served. Kafka's rate
	// is measured over the retained samples (at most quota.window.num windows, 2 s), so
	// within an elapsed time E no more than rate*(E+2s)+1 connections get through; an
	// unthrottled listener serves hundreds in the same time.
	const span = 1500 * time.Millisecond
	start := time.Now()
	served := 0
	for time.Since(start) < span {
		p := dialFrom(t, addr, "127.0.0.1")
		left := span - time.Since(start)
		if left <= 0 || p.wait(left) != answered {
			break
		}
		served++
		p.nc.Close()
	}
	elapsed := time.Since(start)
	bound := int(rate*(elapsed+2*time.Second).Seconds()) + 1
	if served < 1 || served > bound {
		t.Fatalf("%d connections served in %s at max.connection.creation.rate=%d, want 1 to %d", served, elapsed, rate, bound)
	}
	t.Logf("%d connections served in %s (bound %d)", served, elapsed, bound)
}

func TestIPConnectionCreationRateQuota(t *testing.T) {
	b := testutil.StartBroker(t, "quota.window.num=2", "quota.window.size.seconds=1")
	addr := b.Addr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lo := "127.0.0.1"
	// The default ip entity allows 1 connection a second; 127.0.0.1's own entity 1000.
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "ip"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &lo}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1000}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	// Once the broker applies the quotas, 127.0.0.2 (the default) gets connections closed.
	eventually(t, addr, "127.0.0.2", refused)
	for range 10 {
		open(t, addr, "127.0.0.1").nc.Close() // within its own 1000/s
	}
	// At 1/s, over an elapsed time E no more than 1*(E+2s)+1 connections are served.
	const span = 1500 * time.Millisecond
	start := time.Now()
	served, closed := 0, 0
	for time.Since(start) < span {
		p := dialFrom(t, addr, "127.0.0.2")
		switch p.wait(10 * time.Second) {
		case answered:
			served++
		case refused:
			closed++
		}
		p.nc.Close()
	}
	elapsed := time.Since(start)
	if bound := int((elapsed + 2*time.Second).Seconds()) + 1; served > bound || closed == 0 {
		t.Fatalf("127.0.0.2 at 1 connection/s: %d served, %d closed in %s; want at most %d served and some closed", served, closed, elapsed, bound)
	}
}

// The connection limits change at runtime through IncrementalAlterConfigs, as in Kafka.
func TestConnectionLimitsDynamic(t *testing.T) {
	b := testutil.StartBroker(t)
	addr := b.Addr()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open(t, addr, "127.0.0.2")
	open(t, addr, "127.0.0.2")
	over := "127.0.0.2:1"
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "max.connections.per.ip.overrides", Value: &over}}, 1)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	// The two held connections stay (Kafka closes none for a lowered per-IP limit), and a
	// new one is refused once the change is applied.
	eventually(t, addr, "127.0.0.2", refused)
	open(t, addr, "127.0.0.3")
}

// A listener's own max.connections changes at runtime (IncrementalAlterConfigs of
// listener.name.<listener>.max.connections on the broker), as Kafka lets it: a connection
// waits once the listener is at its new limit while the other listener still serves, a
// value under 1 is refused as Kafka's listener quota refuses it, and deleting the key
// frees the waiting connection.
func TestListenerMaxConnectionsDynamic(t *testing.T) {
	b := testutil.StartBroker(t, "listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")
	ext := b.ListenerAddr("EXTERNAL").String()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alter := func(op kadm.IncrementalOp, v string) error {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "listener.name.external.max.connections", Value: &v}}, 1)
		if err == nil {
			err = rs[0].Err
		}
		return err
	}
	if err := alter(kadm.SetConfig, "0"); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("max.connections 0 on a listener at runtime: %v, want INVALID_CONFIG", err)
	}
	if err := alter(kadm.SetConfig, "1"); err != nil {
		t.Fatal(err)
	}
	open(t, ext, "127.0.0.2")
	// Once the change is in force (the broker applies it from its metadata image), a second
	// connection to EXTERNAL waits for a slot.
	var waiting *probe
	for deadline := time.Now().Add(15 * time.Second); ; {
		waiting = dialFrom(t, ext, "127.0.0.2")
		if o := waiting.wait(300 * time.Millisecond); o == silent {
			break
		}
		waiting.nc.Close()
		if time.Now().After(deadline) {
			t.Fatal("EXTERNAL still takes a second connection with its max.connections at 1")
		}
	}
	open(t, b.Addr(), "127.0.0.2") // PLAINTEXT has none of EXTERNAL's limit
	if err := alter(kadm.DeleteConfig, ""); err != nil {
		t.Fatal(err)
	}
	if o := waiting.wait(10 * time.Second); o != answered {
		t.Fatalf("the waiting connection after the limit was deleted: %s, want it answered", o)
	}
}

// The CONTROLLER listener has connection limits of its own over the same keys, as Kafka's
// controller SocketServer has its own ConnectionQuotas: an address at its
// max.connections.per.ip there is refused, while the broker listener, counted apart, still
// takes its connections.
func TestControllerListenerConnectionLimits(t *testing.T) {
	c := testutil.StartCluster(t, testutil.ClusterOptions{Nodes: 1, Sets: []string{"max.connections.per.ip.overrides=127.0.0.2:2"}})
	ctrl, client := c.Node(1).ControllerAddr(), c.Node(1).ClientAddr()
	open(t, ctrl, "127.0.0.2")
	open(t, ctrl, "127.0.0.2")
	wantRefused(t, ctrl, "127.0.0.2")
	open(t, client, "127.0.0.2")
	open(t, client, "127.0.0.2")
	wantRefused(t, client, "127.0.0.2")
	open(t, ctrl, "127.0.0.3")
}

// A controller-only node applies dynamic changes to its CONTROLLER listener's limits, as
// Kafka's controller reconfigures its SocketServer: an override of
// max.connections.per.ip.overrides set at runtime for the node (sent to the controller
// itself, as an admin client with bootstrap.controllers does) refuses a second connection
// from that address, and deleting it lets the address connect again.
func TestControllerOnlyNodeDynamicConnectionLimits(t *testing.T) {
	port := testutil.FreePort(t)
	testutil.StartBroker(t, "process.roles=controller", "node.id=1", "cluster.id=limits-controller-only",
		"controller.listener.names=CONTROLLER", fmt.Sprintf("listeners=CONTROLLER://127.0.0.1:%d", port),
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", port))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	alter := func(op kmsg.IncrementalAlterConfigOp, v string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "max.connections.per.ip.overrides", op, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
		req.Resources = append(req.Resources, res)
		for {
			resp, err := cl.SeedBrokers()[0].Request(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			r := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
			err = kerr.ErrorForCode(r.ErrorCode)
			if err == nil {
				return
			}
			// The sole voter answers NOT_CONTROLLER until it has elected itself.
			if !errors.Is(err, kerr.NotController) || ctx.Err() != nil {
				t.Fatalf("altering the controller's config: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	alter(kmsg.IncrementalAlterConfigOpSet, "127.0.0.2:1")
	open(t, addr, "127.0.0.2")
	eventually(t, addr, "127.0.0.2", refused)
	alter(kmsg.IncrementalAlterConfigOpDelete, "")
	eventually(t, addr, "127.0.0.2", answered)
}
