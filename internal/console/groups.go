package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupMember is a member of a classic or a consumer (KIP-848) group.
type groupMember struct {
	MemberID, InstanceID, ClientID, Host string
	Assigned                             []string // "topic-partition"
}

// groupInfo is what the group page shows.
type groupInfo struct {
	Name, Type, State, Protocol string
	Coordinator                 int32
	Members                     []groupMember
	Lags                        []lagRow
	TotalLag                    int64
}

// lagRow is one partition the group has an offset for or is assigned.
type lagRow struct {
	Topic     string
	Partition int32
	Committed int64 // -1: none
	End       int64
	Lag       int64 // -1: unknown (no commit)
	Member    string
	NewOffset int64 // a reset's target, in its preview
	NewLag    int64
	Err       string
}

// groupRow is one group in the list.
type groupRow struct {
	Name, Type, State, Protocol string
	Coordinator                 int32
}

func (c *Console) groupList(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return errorView(http.StatusBadGateway, "listing groups: %s", errText(err, nil))
	}
	var rows []groupRow
	for _, g := range gs.Sorted() {
		t := g.GroupType
		if t == "" {
			t = "classic"
		}
		rows = append(rows, groupRow{Name: g.Group, Type: t, State: g.State, Protocol: g.ProtocolType, Coordinator: g.Coordinator})
	}
	return view{page: "groups", title: "Consumer groups", data: map[string]any{"Rows": rows}}
}

// describeGroup reads a group of either protocol: its type from ListGroups, its members from
// DescribeGroups (classic) or ConsumerGroupDescribe (consumer), its committed offsets from
// OffsetFetch and the log end offsets of their partitions. found is false for a group the
// coordinator does not know.
func describeGroup(ctx context.Context, adm *kadm.Client, group string) (g groupInfo, found bool, err error) {
	g = groupInfo{Name: group, Type: "classic", Coordinator: -1}
	if gs, err := adm.ListGroups(ctx); err == nil {
		for _, lg := range gs {
			if lg.Group == group && lg.GroupType != "" {
				g.Type = lg.GroupType
			}
		}
	}
	assigned := map[string]map[int32]string{} // topic → partition → member id
	assign := func(m *groupMember, topic string, ps []int32) {
		if assigned[topic] == nil {
			assigned[topic] = map[int32]string{}
		}
		for _, p := range ps {
			assigned[topic][p] = m.MemberID
			m.Assigned = append(m.Assigned, topic+"-"+strconv.Itoa(int(p)))
		}
	}
	if g.Type == "consumer" {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		if err != nil {
			return g, false, err
		}
		d := ds[group]
		if d.Err != nil {
			return g, false, d.Err
		}
		g.State, g.Protocol, g.Coordinator = d.State, d.AssignorName, d.Coordinator.NodeID
		for _, m := range d.Members {
			gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				gm.InstanceID = *m.InstanceID
			}
			for _, t := range m.Assignment.Sorted() {
				assign(&gm, t.Topic, t.Partitions)
			}
			g.Members = append(g.Members, gm)
		}
	} else {
		ds, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return g, false, err
		}
		d := ds[group]
		if d.Err != nil {
			return g, false, d.Err
		}
		g.State, g.Protocol, g.Coordinator = d.State, d.Protocol, d.Coordinator.NodeID
		if d.State == "Dead" {
			return g, false, nil
		}
		for _, m := range d.Members {
			gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				gm.InstanceID = *m.InstanceID
			}
			if ca, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range ca.Topics {
					assign(&gm, t.Topic, t.Partitions)
				}
			}
			g.Members = append(g.Members, gm)
		}
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return g, true, err
	}
	type tp struct {
		t string
		p int32
	}
	rows := map[tp]*lagRow{}
	offs.Each(func(o kadm.OffsetResponse) {
		row := &lagRow{Topic: o.Topic, Partition: o.Partition, Committed: o.At, Lag: -1, End: -1}
		if o.Err != nil {
			row.Err, row.Committed = errText(o.Err, nil), -1
		}
		rows[tp{o.Topic, o.Partition}] = row
	})
	for t, ps := range assigned {
		for p, m := range ps {
			k := tp{t, p}
			if rows[k] == nil {
				rows[k] = &lagRow{Topic: t, Partition: p, Committed: -1, Lag: -1, End: -1}
			}
			rows[k].Member = m
		}
	}
	topics := map[string]bool{}
	for k := range rows {
		topics[k.t] = true
	}
	if len(topics) > 0 {
		ends, err := adm.ListEndOffsets(ctx, keys(topics)...)
		if err != nil {
			return g, true, err
		}
		for k, row := range rows {
			if e, ok := ends.Lookup(k.t, k.p); ok && e.Err == nil {
				row.End = e.Offset
				if row.Committed >= 0 {
					row.Lag = max(0, e.Offset-row.Committed)
					g.TotalLag += row.Lag
				}
			}
		}
	}
	for _, row := range rows {
		g.Lags = append(g.Lags, *row)
	}
	slices.SortFunc(g.Lags, func(a, b lagRow) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition - b.Partition)
	})
	return g, true, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (c *Console) groupPage(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	return c.groupPageWith(ctx, r, adm, nil)
}

// groupPageWith renders the group page, with a reset's preview or error in extra.
func (c *Console) groupPageWith(ctx context.Context, r *http.Request, adm *kadm.Client, extra map[string]any) view {
	group := r.PathValue("group")
	g, found, err := describeGroup(ctx, adm, group)
	if err == kerr.GroupIDNotFound || (err == nil && !found) {
		return view{page: "notfound", title: "Group not found", status: http.StatusNotFound, data: map[string]any{"Kind": "Group", "Name": group}}
	}
	if err != nil {
		return errorView(http.StatusBadGateway, "describing group %s: %s", group, errText(err, nil))
	}
	data := map[string]any{"G": g, "LagSeries": series{Name: "lag", Class: "lag", Pts: samplerOf(ctx).groupLag(group)}, "Msg": r.FormValue("msg")}
	for k, v := range extra {
		data[k] = v
	}
	status := 0
	if extra["Error"] != nil {
		status = http.StatusBadRequest
	}
	return view{page: "group", title: "Group " + group, status: status, data: data}
}

// groupReset previews (action=preview) or applies (action=apply) an offset reset of the
// group's committed partitions (of one topic, or all): to the earliest or latest offset, to
// the first offset at or after a time, or shifted by N; every target is clamped into the
// partition's log. It is refused while the group has members, as Kafka's tool refuses it.
func (c *Console) groupReset(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	group := r.PathValue("group")
	mode, topic := r.FormValue("mode"), r.FormValue("topic")
	form := map[string]string{"Mode": mode, "Topic": topic, "Time": r.FormValue("time"), "Shift": r.FormValue("shift")}
	fail := func(format string, args ...any) view {
		return c.groupPageWith(ctx, r, adm, map[string]any{"Error": fmt.Sprintf(format, args...), "Form": form})
	}
	g, found, err := describeGroup(ctx, adm, group)
	if err != nil || !found {
		return c.groupPageWith(ctx, r, adm, nil)
	}
	if len(g.Members) > 0 {
		return fail("group %s has %d active member(s) (state %s): offsets can only be reset while the group is inactive", group, len(g.Members), g.State)
	}
	var rows []lagRow
	topics := map[string]bool{}
	for _, l := range g.Lags {
		if topic == "" || l.Topic == topic {
			rows = append(rows, l)
			topics[l.Topic] = true
		}
	}
	if len(rows) == 0 {
		return fail("group %s has no committed offsets%s to reset", group, map[bool]string{true: " for topic " + topic, false: ""}[topic != ""])
	}
	starts, err := adm.ListStartOffsets(ctx, keys(topics)...)
	if err != nil {
		return fail("listing offsets: %s", errText(err, nil))
	}
	ends, err := adm.ListEndOffsets(ctx, keys(topics)...)
	if err != nil {
		return fail("listing offsets: %s", errText(err, nil))
	}
	var target kadm.ListedOffsets
	var shift int64
	switch mode {
	case "earliest":
		target = starts
	case "latest":
		target = ends
	case "time":
		ms, err := parseTime(form["Time"])
		if err != nil {
			return fail("%s", err)
		}
		if target, err = adm.ListOffsetsAfterMilli(ctx, ms, keys(topics)...); err != nil {
			return fail("listing offsets by time: %s", errText(err, nil))
		}
	case "shift":
		if shift, err = strconv.ParseInt(strings.TrimSpace(form["Shift"]), 10, 64); err != nil {
			return fail("shift by %q: want a whole number", form["Shift"])
		}
	default:
		return fail("reset mode %q: want earliest, latest, time or shift", mode)
	}
	plan := kadm.Offsets{}
	for i := range rows {
		row := &rows[i]
		s, _ := starts.Lookup(row.Topic, row.Partition)
		e, _ := ends.Lookup(row.Topic, row.Partition)
		if s.Err != nil || e.Err != nil {
			return fail("%s-%d: %s", row.Topic, row.Partition, errText(firstErr(s.Err, e.Err), nil))
		}
		at := e.Offset
		if target != nil {
			if t, ok := target.Lookup(row.Topic, row.Partition); ok && t.Err == nil && t.Offset >= 0 {
				at = t.Offset
			}
		} else if row.Committed >= 0 {
			at = row.Committed + shift
		} else {
			at = s.Offset + shift
		}
		at = max(s.Offset, min(e.Offset, at))
		row.NewOffset, row.NewLag, row.End = at, e.Offset-at, e.Offset
		plan.AddOffset(row.Topic, row.Partition, at, -1)
	}
	if r.FormValue("action") != "apply" {
		return c.groupPageWith(ctx, r, adm, map[string]any{"Preview": rows, "Form": form})
	}
	res, err := adm.CommitOffsets(ctx, group, plan)
	if err != nil {
		return fail("committing offsets: %s", errText(err, nil))
	}
	if err := res.Error(); err != nil {
		return fail("committing offsets: %s", errText(err, nil))
	}
	return view{redirect: "/groups/" + url.PathEscape(group) + "?msg=offsets+reset"}
}
