package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// `gregor cluster describe`: the cluster id, the active controller and every
// broker with the partition replicas and leaderships it holds, like
// kafka-cluster.sh / kafka-broker-api-versions.sh combined with a count
// over Metadata. `gregor cluster unregister --id N`: decommission a broker
// (UnregisterBroker), like kafka-cluster.sh unregister (unregister.go).

func newClusterCommand() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Describe the cluster (id, controller, brokers and their load) or unregister a broker",
	}
	cf.register(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:          "describe",
		Short:        "Show the cluster id, the controller and every broker with its replica and leader counts",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clientRun(cmd, &cf, adminTimeout, func(ctx context.Context, cl *kgo.Client, format string) error {
				d, err := DescribeCluster(ctx, cl)
				if err != nil {
					return err
				}
				return PrintClusterDescription(cmd.OutOrStdout(), format, d)
			})
		},
	})
	cmd.AddCommand(newUnregisterCommand(&cf))
	return cmd
}

// clientRun is adminRun for commands that need the raw kgo client (requests
// kadm does not wrap, or uncached metadata): validate -o, build the client,
// bound the run with timeout (0: only SIGINT/SIGTERM end it).
func clientRun(cmd *cobra.Command, cf *clientFlags, timeout time.Duration, fn func(ctx context.Context, cl *kgo.Client, format string) error) error {
	format, err := cf.outputFormat()
	if err != nil {
		return err
	}
	cl, err := cf.newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := signalContext(cmd)
	defer cancel()
	if timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, timeout)
		defer cancelTimeout()
	}
	return fn(ctx, cl, format)
}

// ClusterDescription is what `gregor cluster describe` prints.
type ClusterDescription struct {
	ClusterID    string              `json:"cluster_id"`
	ControllerID int32               `json:"controller_id"` // -1: unknown
	Partitions   int                 `json:"partitions"`    // over all topics, internal ones included
	Brokers      []BrokerDescription `json:"brokers"`
}

// BrokerDescription is one broker of a ClusterDescription. A broker that
// holds replicas but is not registered (down, or removed) is listed with
// Offline set and no address.
type BrokerDescription struct {
	ID       int32   `json:"id"`
	Host     string  `json:"host"`
	Port     int32   `json:"port"`
	Rack     *string `json:"rack"`
	Fenced   bool    `json:"fenced,omitempty"`
	Offline  bool    `json:"offline,omitempty"`
	Replicas int     `json:"replicas"` // partition replicas assigned to it
	Leaders  int     `json:"leaders"`  // partitions it leads
}

// DescribeCluster asks DescribeCluster (falling back to Metadata's cluster
// id, controller and brokers when the broker does not serve it) and counts
// every broker's replicas and leaderships over an uncached Metadata of all
// topics.
func DescribeCluster(ctx context.Context, cl *kgo.Client) (ClusterDescription, error) {
	meta, err := requestMetadata(ctx, cl, nil)
	if err != nil {
		return ClusterDescription{}, fmt.Errorf("metadata: %w", err)
	}
	d := ClusterDescription{ControllerID: meta.ControllerID}
	if meta.ClusterID != nil {
		d.ClusterID = *meta.ClusterID
	}
	brokers := map[int32]*BrokerDescription{}
	var order []int32
	add := func(b BrokerDescription) {
		if _, ok := brokers[b.ID]; !ok {
			order = append(order, b.ID)
		}
		brokers[b.ID] = &b
	}
	dc, dcErr := describeClusterRequest(ctx, cl)
	if dcErr == nil {
		d.ClusterID, d.ControllerID = dc.ClusterID, dc.ControllerID
		for _, b := range dc.Brokers {
			add(BrokerDescription{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack, Fenced: b.IsFenced})
		}
	} else {
		for _, b := range meta.Brokers {
			add(BrokerDescription{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
		}
	}
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			d.Partitions++
			for _, r := range p.Replicas {
				if _, ok := brokers[r]; !ok {
					add(BrokerDescription{ID: r, Offline: true})
				}
				brokers[r].Replicas++
			}
			if p.Leader >= 0 {
				if _, ok := brokers[p.Leader]; !ok {
					add(BrokerDescription{ID: p.Leader, Offline: true})
				}
				brokers[p.Leader].Leaders++
			}
		}
	}
	slices.Sort(order)
	for _, id := range order {
		d.Brokers = append(d.Brokers, *brokers[id])
	}
	if d.Brokers == nil {
		d.Brokers = []BrokerDescription{}
	}
	return d, nil
}

// describeClusterRequest sends DescribeCluster (brokers, not controllers),
// asking for fenced brokers too where the version has the field.
func describeClusterRequest(ctx context.Context, cl *kgo.Client) (*kmsg.DescribeClusterResponse, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, errors.New(kafkaErrorText(err, derefString(resp.ErrorMessage)))
	}
	return resp, nil
}

// requestMetadata sends an uncached Metadata request for topics (nil: all
// topics). kadm's Metadata answers from the client's cache, which can be
// seconds old; the reassignment tools watch replicas change.
func requestMetadata(ctx context.Context, cl *kgo.Client, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	}
	return req.RequestWith(ctx, cl)
}

// PrintClusterDescription writes d as a table or JSON.
func PrintClusterDescription(w io.Writer, format string, d ClusterDescription) error {
	if format == outputJSON {
		return writeJSON(w, d)
	}
	controller := "-"
	if d.ControllerID >= 0 {
		controller = strconv.Itoa(int(d.ControllerID))
	}
	fmt.Fprintf(w, "Cluster ID: %s\nController: %s\nPartitions: %d\n\n", orDash(d.ClusterID), controller, d.Partitions)
	t := newTable(w, "BROKER", "ADDRESS", "RACK", "STATUS", "REPLICAS", "LEADERS")
	for _, b := range d.Brokers {
		addr, status := "-", "online"
		if !b.Offline {
			addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		switch {
		case b.Offline:
			status = "offline"
		case b.Fenced:
			status = "fenced"
		}
		t.row(strconv.Itoa(int(b.ID)), addr, orDash(derefString(b.Rack)), status, strconv.Itoa(b.Replicas), strconv.Itoa(b.Leaders))
	}
	return t.flush()
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
