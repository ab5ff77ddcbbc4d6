package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicRow is one topic in the list.
type topicRow struct {
	Name       string
	Internal   bool
	Partitions int
	RF         int
	Records    int64   // sum over partitions of log end - log start
	Size       int64   // bytes of one copy (each partition's largest replica)
	Rate       float64 // records/s appended over the last sample
	HasRate    bool
	Under      int // under-replicated partitions
}

// partitionSizes is each partition's size, the largest of its replicas' (one copy's), for
// topics (all when none is named).
func partitionSizes(ctx context.Context, adm *kadm.Client, topics ...string) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return out // sizes are left blank: a cluster that answers no DescribeLogDirs still lists topics
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if len(topics) > 0 && !slices.Contains(topics, p.Topic) {
				return
			}
			if out[p.Topic] == nil {
				out[p.Topic] = map[int32]int64{}
			}
			out[p.Topic][p.Partition] = max(out[p.Topic][p.Partition], p.Size)
		})
	})
	return out
}

func (c *Console) topicList(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	return c.topicListWith(ctx, r, adm, nil)
}

// topicListWith renders the list, with the form's values and a failed create's error.
func (c *Console) topicListWith(ctx context.Context, r *http.Request, adm *kadm.Client, form map[string]string) view {
	q := strings.ToLower(r.FormValue("q"))
	md, err := adm.Metadata(ctx)
	if err != nil {
		return errorView(http.StatusBadGateway, "listing topics: %s", errText(err, nil))
	}
	starts, _ := adm.ListStartOffsets(ctx) // a failed listing leaves the record counts blank
	ends, _ := adm.ListEndOffsets(ctx)
	sizes := partitionSizes(ctx, adm)
	var rows []topicRow
	for _, t := range md.Topics.Sorted() {
		if t.Err != nil || (q != "" && !strings.Contains(strings.ToLower(t.Topic), q)) {
			continue
		}
		row := topicRow{Name: t.Topic, Internal: t.IsInternal, Partitions: len(t.Partitions)}
		for _, p := range t.Partitions {
			row.RF = max(row.RF, len(p.Replicas))
			if len(p.ISR) < len(p.Replicas) {
				row.Under++
			}
			row.Size += sizes[t.Topic][p.Partition]
			if e, ok := ends.Lookup(t.Topic, p.Partition); ok && e.Err == nil {
				row.Records += e.Offset
				if s, ok := starts.Lookup(t.Topic, p.Partition); ok && s.Err == nil {
					row.Records -= s.Offset
				}
			}
		}
		row.Rate, row.HasRate = samplerOf(ctx).topicRate(t.Topic)
		rows = append(rows, row)
	}
	status := 0
	if form["Error"] != "" {
		status = http.StatusBadRequest
	}
	return view{page: "topics", title: "Topics", status: status, data: map[string]any{"Rows": rows, "Q": r.FormValue("q"), "Form": form}}
}

// topicCreate creates a topic from the form; Kafka's error comes back on the list page.
func (c *Console) topicCreate(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	form := map[string]string{"Name": r.FormValue("name"), "Partitions": r.FormValue("partitions"), "RF": r.FormValue("replication"), "Configs": r.FormValue("configs")}
	fail := func(msg string) view {
		form["Error"] = msg
		return c.topicListWith(ctx, r, adm, form)
	}
	parts, rf := int32(-1), int16(-1) // -1: the broker's num.partitions / default.replication.factor
	if s := strings.TrimSpace(form["Partitions"]); s != "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return fail("partitions: " + err.Error())
		}
		parts = int32(n)
	}
	if s := strings.TrimSpace(form["RF"]); s != "" {
		n, err := strconv.ParseInt(s, 10, 16)
		if err != nil {
			return fail("replication factor: " + err.Error())
		}
		rf = int16(n)
	}
	configs, err := parseConfigLines(form["Configs"])
	if err != nil {
		return fail(err.Error())
	}
	res, err := adm.CreateTopic(ctx, parts, rf, configs, strings.TrimSpace(form["Name"]))
	if err != nil {
		return fail(errText(err, nil))
	}
	if res.Err != nil {
		return fail(errText(res.Err, &res.ErrMessage))
	}
	awaitTopic(ctx, adm, res.Topic, true)
	return view{redirect: "/topics/" + url.PathEscape(res.Topic)}
}

// awaitTopic waits, at most a few seconds, until the cluster's metadata shows topic (or,
// with exists false, no longer shows it): brokers apply a create or a delete from the
// metadata log as they catch up, and the page the user is sent to next should show it.
func awaitTopic(ctx context.Context, adm *kadm.Client, topic string, exists bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td, ok := md.Topics[topic]
			if there := ok && td.Err == nil && len(td.Partitions) > 0; there == exists {
				return
			}
		}
		select {
		case <-ctx.Done():
			return // the page shows what the cluster says then
		case <-t.C:
		}
	}
}

// parseConfigLines reads "key=value" lines; blank lines are skipped.
func parseConfigLines(s string) (map[string]*string, error) {
	out := map[string]*string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, &lineError{line}
		}
		v = strings.TrimSpace(v)
		out[strings.TrimSpace(k)] = &v
	}
	return out, nil
}

type lineError struct{ line string }

func (e *lineError) Error() string { return "config " + strconv.Quote(e.line) + ": want KEY=VALUE" }

// partitionRow is one partition on the topic page.
type partitionRow struct {
	Partition  int32
	Leader     int32
	Replicas   []int32
	ISR        []int32
	Offline    []int32
	Start, End int64
	Size       int64
	Err        string
}

// configRow is one config with its source.
type configRow struct {
	Key, Value, Source string
	Sensitive          bool
}

func (c *Console) topicPage(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	return c.topicPageWith(ctx, r, adm, "", r.URL.Query().Get("msg"))
}

// topicPageWith renders the topic page with an action's error or message.
func (c *Console) topicPageWith(ctx context.Context, r *http.Request, adm *kadm.Client, actionErr, msg string) view {
	topic := r.PathValue("topic")
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return errorView(http.StatusBadGateway, "reading topic %s: %s", topic, errText(err, nil))
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		if !ok || td.Err == kerr.UnknownTopicOrPartition {
			return view{page: "notfound", title: "Topic not found", status: http.StatusNotFound, data: map[string]any{"Kind": "Topic", "Name": topic}}
		}
		return errorView(http.StatusBadGateway, "topic %s: %s", topic, errText(td.Err, nil))
	}
	starts, _ := adm.ListStartOffsets(ctx, topic) // a failed listing shows "–"
	ends, _ := adm.ListEndOffsets(ctx, topic)
	sizes := partitionSizes(ctx, adm, topic)
	var rows []partitionRow
	for _, p := range td.Partitions.Sorted() {
		row := partitionRow{Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR, Offline: p.OfflineReplicas, Start: -1, End: -1, Size: -1}
		if p.Err != nil {
			row.Err = errText(p.Err, nil)
		}
		if s, ok := starts.Lookup(topic, p.Partition); ok && s.Err == nil {
			row.Start = s.Offset
		}
		if e, ok := ends.Lookup(topic, p.Partition); ok && e.Err == nil {
			row.End = e.Offset
		}
		if sz, ok := sizes[topic][p.Partition]; ok {
			row.Size = sz
		}
		rows = append(rows, row)
	}
	var configs []configRow
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	configErr := ""
	if err != nil {
		configErr = errText(err, nil)
	} else if rc, err := rcs.On(topic, nil); err != nil {
		configErr = errText(err, nil)
	} else if rc.Err != nil {
		configErr = errText(rc.Err, &rc.ErrMessage)
	} else {
		for _, cf := range rc.Configs {
			configs = append(configs, configRow{Key: cf.Key, Value: cf.MaybeValue(), Source: configSource(cf), Sensitive: cf.Sensitive})
		}
		slices.SortFunc(configs, func(a, b configRow) int { return strings.Compare(a.Key, b.Key) })
	}
	status := 0
	if actionErr != "" {
		status = http.StatusBadRequest
	}
	rate, hasRate := samplerOf(ctx).topicRate(topic)
	return view{page: "topic", title: "Topic " + topic, status: status, data: map[string]any{
		"Name": topic, "ID": td.ID.String(), "Internal": td.IsInternal, "Partitions": rows, "Configs": configs, "ConfigErr": configErr,
		"Error": actionErr, "Msg": msg, "Rate": rate, "HasRate": hasRate,
	}}
}

// configSource names where a config's value comes from: the default, a topic override, a
// broker's (dynamic or from its properties file) or the cluster-wide broker default.
func configSource(cf kadm.Config) string {
	switch cf.Source {
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDynamicBrokerConfig:
		return "broker (dynamic)"
	case kmsg.ConfigSourceDynamicDefaultBrokerConfig:
		return "cluster default"
	case kmsg.ConfigSourceStaticBrokerConfig:
		return "broker (static)"
	}
	return strings.ToLower(cf.Source.String())
}

func (c *Console) topicDelete(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	topic := r.PathValue("topic")
	res, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return c.topicPageWith(ctx, r, adm, "deleting the topic: "+errText(err, &res.ErrMessage), "")
	}
	awaitTopic(ctx, adm, topic, false)
	return view{redirect: "/topics?deleted=" + url.QueryEscape(topic)}
}

// topicAlterConfigs sets (key=value) and deletes (key= with an empty value) topic configs
// with IncrementalAlterConfigs.
func (c *Console) topicAlterConfigs(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	topic := r.PathValue("topic")
	lines, err := parseConfigLines(r.FormValue("configs"))
	if err != nil {
		return c.topicPageWith(ctx, r, adm, err.Error(), "")
	}
	var alters []kadm.AlterConfig
	for k, v := range lines {
		if *v == "" {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		} else {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
		}
	}
	res, err := adm.AlterTopicConfigs(ctx, alters, topic)
	if err != nil {
		return c.topicPageWith(ctx, r, adm, "altering configs: "+errText(err, nil), "")
	}
	for _, a := range res {
		if a.Err != nil {
			return c.topicPageWith(ctx, r, adm, "altering configs: "+errText(a.Err, &a.ErrMessage), "")
		}
	}
	return view{redirect: "/topics/" + url.PathEscape(topic) + "?msg=configs+altered"}
}

// topicAddPartitions raises the partition count to the form's total.
func (c *Console) topicAddPartitions(ctx context.Context, r *http.Request, adm *kadm.Client, _ *kgo.Client) view {
	topic := r.PathValue("topic")
	n, err := strconv.Atoi(strings.TrimSpace(r.FormValue("count")))
	if err != nil {
		return c.topicPageWith(ctx, r, adm, "partition count: "+err.Error(), "")
	}
	res, err := adm.UpdatePartitions(ctx, n, topic)
	if err != nil {
		return c.topicPageWith(ctx, r, adm, "adding partitions: "+errText(err, nil), "")
	}
	for _, p := range res {
		if p.Err != nil {
			return c.topicPageWith(ctx, r, adm, "adding partitions: "+errText(p.Err, &p.ErrMessage), "")
		}
	}
	return view{redirect: "/topics/" + url.PathEscape(topic) + "?msg=partitions+added"}
}
