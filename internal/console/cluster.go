package console

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerRow is one broker on the overview. A broker is listed from the Metadata answer
// (Kafka lists only the live, unfenced ones) and from every partition's replica set, so a
// stopped broker still shows, as offline.
type brokerRow struct {
	ID         int32
	Host       string
	Rack       string
	Online     bool
	Controller bool
	Replicas   int // partitions with a replica here
	Leaders    int // partitions led here
}

// overviewData is the overview page.
type overviewData struct {
	ClusterID       string
	Controller      int32
	Brokers         []brokerRow
	Topics          int
	Partitions      int
	UnderReplicated int
	Offline         int
	In, Out         []point
	Refresh         int // seconds between reloads
}

func (c *Console) overview(ctx context.Context, _ *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return errorView(http.StatusBadGateway, "reading the cluster's metadata: %s", errText(err, nil))
	}
	d := overviewData{ClusterID: md.Cluster, Controller: md.Controller, Refresh: max(1, int(c.cfg.Interval.Seconds()))}
	rows := map[int32]*brokerRow{}
	for _, b := range md.Brokers {
		r := &brokerRow{ID: b.NodeID, Host: b.Host + ":" + strconv.Itoa(int(b.Port)), Online: true, Controller: b.NodeID == md.Controller}
		if b.Rack != nil {
			r.Rack = *b.Rack
		}
		rows[b.NodeID] = r
	}
	row := func(id int32) *brokerRow {
		r, ok := rows[id]
		if !ok {
			r = &brokerRow{ID: id}
			rows[id] = r
		}
		return r
	}
	for _, t := range md.Topics {
		if t.Err != nil {
			continue
		}
		d.Topics++
		for _, p := range t.Partitions {
			d.Partitions++
			for _, id := range p.Replicas {
				row(id).Replicas++
			}
			if p.Leader >= 0 {
				row(p.Leader).Leaders++
			}
			if len(p.ISR) < len(p.Replicas) {
				d.UnderReplicated++
			}
			if p.Leader < 0 || !rows[p.Leader].Online {
				d.Offline++
			}
		}
	}
	for _, r := range rows {
		d.Brokers = append(d.Brokers, *r)
	}
	slices.SortFunc(d.Brokers, func(a, b brokerRow) int { return int(a.ID - b.ID) })
	d.In, d.Out = samplerOf(ctx).throughput()
	return view{page: "overview", title: "Cluster", data: d}
}

// reassignmentRow is one partition being moved.
type reassignmentRow struct {
	Topic     string
	Partition int32
	Replicas  []int32
	Adding    []int32
	Removing  []int32
	InSync    int // of the adding replicas, how many are in the ISR already
	Progress  int // percent of the adding replicas in sync
}

func (c *Console) reassignments(ctx context.Context, r *http.Request, adm *kadm.Client, cl *kgo.Client) view {
	// Null topics: every reassignment in progress (kadm's helper asks only for named ones).
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 10000
	res, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(res.ErrorCode)
	}
	if err != nil {
		return errorView(http.StatusBadGateway, "listing reassignments: %s", errText(err, res.ErrorMessage))
	}
	var topics []string
	for _, t := range res.Topics {
		topics = append(topics, t.Topic)
	}
	isr := map[string]map[int32][]int32{}
	if len(topics) > 0 {
		if md, err := adm.Metadata(ctx, topics...); err == nil {
			for _, t := range md.Topics {
				isr[t.Topic] = map[int32][]int32{}
				for _, p := range t.Partitions {
					isr[t.Topic][p.Partition] = p.ISR
				}
			}
		}
	}
	var rows []reassignmentRow
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			row := reassignmentRow{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas, Adding: p.AddingReplicas, Removing: p.RemovingReplicas, Progress: 100}
			for _, a := range p.AddingReplicas {
				if slices.Contains(isr[t.Topic][p.Partition], a) {
					row.InSync++
				}
			}
			if n := len(p.AddingReplicas); n > 0 {
				row.Progress = 100 * row.InSync / n
			}
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b reassignmentRow) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return view{page: "reassignments", title: "Reassignments", data: map[string]any{
		"Rows": rows, "Result": r.URL.Query().Get("result"),
	}}
}

// elect triggers a preferred leader election, for one topic or (no topic) every partition.
func (c *Console) elect(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	var set kadm.TopicsSet
	if t := r.FormValue("topic"); t != "" {
		md, err := adm.Metadata(ctx, t)
		if err != nil {
			return errorView(http.StatusBadGateway, "reading topic %s: %s", t, errText(err, nil))
		}
		set = kadm.TopicsSet{}
		for _, td := range md.Topics {
			for _, p := range td.Partitions {
				set.Add(td.Topic, p.Partition)
			}
		}
	}
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return errorView(http.StatusBadGateway, "electing leaders: %s", errText(err, nil))
	}
	elected, failed := 0, 0
	for _, ps := range res {
		for _, p := range ps {
			if p.Err == nil {
				elected++
			} else {
				failed++
			}
		}
	}
	return view{redirect: "/reassignments?result=" + strconv.Itoa(elected) + "+elected,+" + strconv.Itoa(failed) + "+not+elected+(already+preferred+or+unavailable)"}
}
