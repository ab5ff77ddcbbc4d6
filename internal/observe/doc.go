// Package observe is how an operator sees a running broker: the Prometheus metrics, the HTTP
// listener that serves them (http.listener), and the health endpoints. Other handlers are
// mounted on the same listener with Server.Mount (the broker mounts the web console,
// internal/console, under /console/).
//
// # Shape
//
// Two kinds of metric, as Kafka has meters and gauges:
//
//   - Counters and histograms on hot paths (Requests, Topics, Replica, Log, Raft, Groups)
//     are handles that the layers below update directly: the connection loop times every
//     request, the api layer counts records and bytes per topic, the partitions count ISR
//     changes. They cost an atomic add each: a request's per-API-key handles sit in an
//     array indexed by API key (created on the key's first request), a topic's in a map
//     read under a read lock with no allocation. Every handle method is safe on a nil
//     receiver, so a layer tested without metrics needs no set-up.
//
//   - Gauges are read at scrape time from a Snapshot: the broker (the one package that sees
//     every part) implements Source, and Collector turns its Snapshot into metrics. Nothing
//     polls in the background; a scrape costs one pass over the partitions and groups (and,
//     for consumer lag, one ListOffsets to each broker leading a partition a coordinated
//     group committed to), and nothing when nobody scrapes. Collect (snapshot.go) is a pure function of the Snapshot,
//     tested without a broker.
//
// This package imports nothing of Gregor's, so every layer may import it.
//
// # Names
//
// Metric names are those the Prometheus JMX exporter's example Kafka configuration
// (lowercaseOutputName) gives Kafka's MBeans, so dashboards and alerts written for Kafka
// work unchanged: kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T is
// kafka_server_brokertopicmetrics_messagesin_total{topic="T"}; the request timers of
// kafka.network:type=RequestMetrics are histograms in milliseconds under their MBean names
// (kafka_network_requestmetrics_totaltimems{request="Produce"}). Consumer lag is named as
// kafka_exporter names it (kafka_consumergroup_lag). docs/metrics.md lists every metric.
//
// # Health
//
// /healthz answers 200 while the process serves HTTP. /readyz answers 200 only when the
// broker is registered with the controller quorum, unfenced and caught up with the metadata
// log (Ready), else 503 with the reason in the body.
package observe
