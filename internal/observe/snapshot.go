package observe

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Source gives the broker's state at scrape time.
type Source interface {
	// Snapshot is the state now. It is called once per scrape, on the scraping goroutine,
	// and may wait (bounded) for other brokers' answers.
	Snapshot() Snapshot
}

// Snapshot is the state the scrape-time gauges report: plain values, copied out of the
// broker's parts under their own locks.
type Snapshot struct {
	Partitions []PartitionStats // the partitions this broker holds a replica of
	// Controller is set on a controller node (nil on a broker-only node).
	Controller *ControllerStats
	// Broker is set on a broker node (nil on a controller-only node).
	Broker *BrokerStats
	Groups []GroupStats   // the groups this broker coordinates
	Lags   []OffsetLag    // their committed offsets, with the ends of their partitions
	Conns  []ListenerConn // per broker listener
}

// PartitionStats are one local replica's figures.
type PartitionStats struct {
	Topic     string
	Partition int32
	Leader    bool  // this broker leads it
	Replicas  int   // assigned replicas
	ISR       int   // in-sync replicas (as the leader knows them; meaningful when Leader)
	MinISR    int   // min.insync.replicas
	Size      int64 // bytes of its segments
	Segments  int
	// LogStartOffset, LogEndOffset and HighWatermark of the local log.
	LogStartOffset, LogEndOffset, HighWatermark int64
	WaitingProduces                             int // acks=all produces parked in the leader's purgatory
}

// ControllerStats are a controller node's figures; the cluster-wide counts are reported by
// the active controller only (0 elsewhere), as Kafka's KafkaController gauges are.
type ControllerStats struct {
	Active                                   bool
	OfflinePartitions, FencedBrokers         int
	ActiveBrokers, GlobalTopics, GlobalParts int
	LastAppliedOffset, LastCommittedOffset   int64
	// Uncounted: the active controller could not count (its raft loop did not answer in
	// time); the cluster-wide gauges are left out of the scrape.
	Uncounted bool
}

// BrokerStats are a broker node's own figures.
type BrokerStats struct {
	// MetadataOffset is the offset of the last metadata log record applied to its image;
	// MetadataLag how many committed records it has not applied yet, as the controller it
	// reads from last said (-1: not known yet).
	MetadataOffset, MetadataLag int64
	FetchesWaiting              int // Fetch requests parked (long poll) right now
}

// GroupStats are one group's state, by Kafka's names (Stable, PreparingRebalance,
// CompletingRebalance, Empty, Dead; Assigning and Reconciling for the consumer protocol).
type GroupStats struct {
	Group, State string
}

// OffsetLag is a group's committed offset of a partition and that partition's end (the high
// watermark, what a read_uncommitted consumer can reach).
type OffsetLag struct {
	Group, Topic string
	Partition    int32
	Committed    int64
	End          int64
}

// Collector turns a Source's Snapshot into metrics at scrape time.
type Collector struct{ Source Source }

// Describe sends nothing: the collector is unchecked, its series depending on the state.
func (*Collector) Describe(chan<- *prometheus.Desc) {}

// Collect reads one Snapshot and reports it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) { Collect(c.Source.Snapshot(), ch) }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dUnderReplicated = desc("kafka_server_replicamanager_underreplicatedpartitions", "Partitions this broker leads whose ISR is smaller than their replica set.")
	dUnderMinISR     = desc("kafka_server_replicamanager_underminisrpartitioncount", "Partitions this broker leads whose ISR is below min.insync.replicas.")
	dAtMinISR        = desc("kafka_server_replicamanager_atminisrpartitioncount", "Partitions this broker leads whose ISR is exactly min.insync.replicas.")
	dLeaderCount     = desc("kafka_server_replicamanager_leadercount", "Partitions this broker leads.")
	dPartitionCount  = desc("kafka_server_replicamanager_partitioncount", "Partitions this broker holds a replica of.")

	dLogSize     = desc("kafka_log_log_size", "Bytes of the partition's log segments on this broker.", "topic", "partition")
	dLogSegments = desc("kafka_log_log_numlogsegments", "Segments of the partition's log on this broker.", "topic", "partition")
	dLogStart    = desc("kafka_log_log_logstartoffset", "The partition's log start offset on this broker.", "topic", "partition")
	dLogEnd      = desc("kafka_log_log_logendoffset", "The partition's log end offset on this broker.", "topic", "partition")

	dPurgatory = desc("kafka_server_delayedoperationpurgatory_purgatorysize", "Requests parked waiting: acks=all produces (Produce), long-poll fetches (Fetch).", "delayedOperation")

	dActiveController = desc("kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller, 0 on the other controllers.")
	dOffline          = desc("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader (on the active controller).")
	dFenced           = desc("kafka_controller_kafkacontroller_fencedbrokercount", "Registered brokers that are fenced (on the active controller).")
	dActiveBrokers    = desc("kafka_controller_kafkacontroller_activebrokercount", "Registered brokers that are unfenced (on the active controller).")
	dGlobalTopics     = desc("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster (on the active controller).")
	dGlobalPartitions = desc("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster (on the active controller).")
	dCtrlApplied      = desc("kafka_controller_kafkacontroller_lastappliedrecordoffset", "Offset of the last metadata record this controller applied.")
	dCtrlCommitted    = desc("kafka_controller_kafkacontroller_lastcommittedrecordoffset", "Offset of the last metadata record this controller knows committed.")
	dBrokerMetaOffset = desc("kafka_server_broker_metadata_metrics_last_applied_record_offset", "Offset of the last metadata record this broker applied to its image.")
	dBrokerMetaLag    = desc("kafka_server_broker_metadata_metrics_last_applied_record_offset_lag", "Committed metadata records this broker has not applied yet, by the high watermark of the controller it reads the log from.")
	dConnections      = desc("kafka_server_socketservermetrics_connection_count", "Open client connections, per broker listener.", "listener")
	dGroups           = desc("kafka_coordinator_group_groupmetadatamanager_numgroups", "Groups this broker coordinates.")
	dGroupsByState    = desc("kafka_server_group_coordinator_metrics_group_count", "Groups this broker coordinates, by state.", "state")
	dConsumerLag      = desc("kafka_consumergroup_lag", "The partition's high watermark less the group's committed offset.", "consumergroup", "topic", "partition")
	dConsumerOffset   = desc("kafka_consumergroup_current_offset", "The group's committed offset of the partition.", "consumergroup", "topic", "partition")
	dConsumerLagSum   = desc("kafka_consumergroup_lag_sum", "The group's lag summed over the topic's partitions.", "consumergroup", "topic")
	dPartitionHW      = desc("kafka_topic_partition_current_offset", "The partition's high watermark on its leader.", "topic", "partition")
)

// groupStateGauges are Kafka's GroupMetadataManager gauges, by the state each counts.
var groupStateGauges = []struct {
	state string
	d     *prometheus.Desc
}{
	{"Stable", desc("kafka_coordinator_group_groupmetadatamanager_numgroupsstable", "Groups in state Stable.")},
	{"PreparingRebalance", desc("kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance", "Groups in state PreparingRebalance.")},
	{"CompletingRebalance", desc("kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance", "Groups in state CompletingRebalance.")},
	{"Empty", desc("kafka_coordinator_group_groupmetadatamanager_numgroupsempty", "Groups in state Empty.")},
	{"Dead", desc("kafka_coordinator_group_groupmetadatamanager_numgroupsdead", "Groups in state Dead.")},
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect reports s as metrics: a pure function of the snapshot.
func Collect(s Snapshot, ch chan<- prometheus.Metric) {
	if s.Broker != nil {
		collectPartitions(s, ch)
		gauge(ch, dBrokerMetaOffset, float64(s.Broker.MetadataOffset))
		if s.Broker.MetadataLag >= 0 {
			gauge(ch, dBrokerMetaLag, float64(s.Broker.MetadataLag))
		}
		gauge(ch, dPurgatory, float64(s.Broker.FetchesWaiting), "Fetch")
		for _, l := range s.Conns {
			gauge(ch, dConnections, float64(l.Connections), l.Listener)
		}
		collectGroups(s, ch)
	}
	if c := s.Controller; c != nil {
		gauge(ch, dActiveController, boolf(c.Active))
		if !c.Uncounted {
			gauge(ch, dOffline, float64(c.OfflinePartitions))
			gauge(ch, dFenced, float64(c.FencedBrokers))
			gauge(ch, dActiveBrokers, float64(c.ActiveBrokers))
			gauge(ch, dGlobalTopics, float64(c.GlobalTopics))
			gauge(ch, dGlobalPartitions, float64(c.GlobalParts))
		}
		gauge(ch, dCtrlApplied, float64(c.LastAppliedOffset))
		gauge(ch, dCtrlCommitted, float64(c.LastCommittedOffset))
	}
}

// ListenerConn is one listener's open connections.
type ListenerConn struct {
	Listener    string
	Connections int
}

func collectPartitions(s Snapshot, ch chan<- prometheus.Metric) {
	var under, underMin, atMin, leaders, waiting int
	for i := range s.Partitions {
		p := &s.Partitions[i]
		part := strconv.Itoa(int(p.Partition))
		gauge(ch, dLogSize, float64(p.Size), p.Topic, part)
		gauge(ch, dLogSegments, float64(p.Segments), p.Topic, part)
		gauge(ch, dLogStart, float64(p.LogStartOffset), p.Topic, part)
		gauge(ch, dLogEnd, float64(p.LogEndOffset), p.Topic, part)
		if !p.Leader {
			continue
		}
		gauge(ch, dPartitionHW, float64(p.HighWatermark), p.Topic, part)
		leaders++
		waiting += p.WaitingProduces
		if p.ISR < p.Replicas {
			under++
		}
		if p.ISR < p.MinISR {
			underMin++
		}
		if p.ISR == p.MinISR {
			atMin++
		}
	}
	gauge(ch, dUnderReplicated, float64(under))
	gauge(ch, dUnderMinISR, float64(underMin))
	gauge(ch, dAtMinISR, float64(atMin))
	gauge(ch, dLeaderCount, float64(leaders))
	gauge(ch, dPartitionCount, float64(len(s.Partitions)))
	gauge(ch, dPurgatory, float64(waiting), "Produce")
}

func collectGroups(s Snapshot, ch chan<- prometheus.Metric) {
	byState := map[string]int{}
	for _, g := range s.Groups {
		byState[g.State]++
	}
	gauge(ch, dGroups, float64(len(s.Groups)))
	for _, g := range groupStateGauges {
		gauge(ch, g.d, float64(byState[g.state]))
	}
	for state, n := range byState {
		gauge(ch, dGroupsByState, float64(n), strings.ToLower(state))
	}
	type groupTopic struct{ group, topic string }
	sums := map[groupTopic]int64{}
	for _, l := range s.Lags {
		part := strconv.Itoa(int(l.Partition))
		lag := max(l.End-l.Committed, 0)
		gauge(ch, dConsumerOffset, float64(l.Committed), l.Group, l.Topic, part)
		gauge(ch, dConsumerLag, float64(lag), l.Group, l.Topic, part)
		sums[groupTopic{l.Group, l.Topic}] += lag
	}
	for k, v := range sums {
		gauge(ch, dConsumerLagSum, float64(v), k.group, k.topic)
	}
}
