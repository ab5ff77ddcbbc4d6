package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// kafkaDefaults are Kafka's documented defaults (ServerLogConfigs, LogConfig,
// KafkaConfig, GroupCoordinatorConfig, ...), except the keys marked "Gregor",
// whose defaults the design changes for a single node.
var kafkaDefaults = map[string]string{
	"node.id":                                                     "1",                          // Gregor; Kafka: required
	"process.roles":                                               "broker,controller",          // Gregor; Kafka: required
	"listeners":                                                   "PLAINTEXT://127.0.0.1:9092", // Gregor; Kafka: PLAINTEXT://:9092
	"advertised.listeners":                                        "PLAINTEXT://127.0.0.1:9092", // = listeners
	"listener.security.protocol.map":                              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
	"inter.broker.listener.name":                                  "PLAINTEXT",
	"controller.listener.names":                                   "",
	"controller.quorum.voters":                                    "",
	"controller.quorum.bootstrap.servers":                         "",
	"broker.rack":                                                 "",
	"http.listener":                                               "127.0.0.1:9644", // Gregor only (Kafka: JMX)
	"cluster.id":                                                  "",
	"num.network.threads":                                         "3",
	"num.io.threads":                                              "8",
	"queued.max.requests":                                         "500",
	"socket.send.buffer.bytes":                                    "102400",
	"socket.receive.buffer.bytes":                                 "102400",
	"socket.request.max.bytes":                                    "104857600",
	"connections.max.idle.ms":                                     "600000",
	"max.connections":                                             "2147483647",
	"max.connections.per.ip":                                      "2147483647",
	"max.connections.per.ip.overrides":                            "",
	"max.connection.creation.rate":                                "2147483647",
	"queued.max.request.bytes":                                    "-1",
	"fetch.max.bytes":                                             "57671680",
	"broker.heartbeat.interval.ms":                                "2000",
	"broker.session.timeout.ms":                                   "9000",
	"num.partitions":                                              "1",
	"default.replication.factor":                                  "1",
	"auto.create.topics.enable":                                   "true",
	"delete.topic.enable":                                         "true",
	"message.max.bytes":                                           "1048588",
	"compression.type":                                            "producer",
	"compression.gzip.level":                                      "-1",
	"compression.lz4.level":                                       "9",
	"compression.zstd.level":                                      "3",
	"min.insync.replicas":                                         "1",
	"unclean.leader.election.enable":                              "false",
	"log.dirs":                                                    "./data", // Gregor; Kafka: /tmp/kafka-logs (via log.dir)
	"log.dir":                                                     "./data",
	"metadata.log.dir":                                            "",
	"num.recovery.threads.per.data.dir":                           "1",
	"log.segment.bytes":                                           "1073741824",
	"log.roll.ms":                                                 "604800000",
	"log.roll.hours":                                              "168",
	"log.roll.jitter.ms":                                          "0",
	"log.roll.jitter.hours":                                       "0",
	"log.retention.ms":                                            "604800000",
	"log.retention.minutes":                                       "",
	"log.retention.hours":                                         "168",
	"log.retention.bytes":                                         "-1",
	"log.retention.check.interval.ms":                             "300000",
	"log.cleanup.policy":                                          "delete",
	"log.index.size.max.bytes":                                    "10485760",
	"log.index.interval.bytes":                                    "4096",
	"log.flush.interval.messages":                                 "9223372036854775807",
	"log.flush.interval.ms":                                       "9223372036854775807",
	"log.flush.scheduler.interval.ms":                             "9223372036854775807",
	"log.flush.offset.checkpoint.interval.ms":                     "60000",
	"log.flush.start.offset.checkpoint.interval.ms":               "60000",
	"log.segment.delete.delay.ms":                                 "60000",
	"log.preallocate":                                             "false",
	"log.message.timestamp.type":                                  "CreateTime",
	"log.message.timestamp.difference.max.ms":                     "9223372036854775807",
	"log.message.timestamp.before.max.ms":                         "9223372036854775807",
	"log.message.timestamp.after.max.ms":                          "9223372036854775807",
	"log.cleaner.enable":                                          "true",
	"log.cleaner.threads":                                         "1",
	"log.cleaner.delete.retention.ms":                             "86400000",
	"log.cleaner.min.compaction.lag.ms":                           "0",
	"log.cleaner.max.compaction.lag.ms":                           "9223372036854775807",
	"log.cleaner.min.cleanable.ratio":                             "0.5",
	"log.cleaner.dedupe.buffer.size":                              "134217728",
	"log.cleaner.io.buffer.size":                                  "524288",
	"log.cleaner.io.buffer.load.factor":                           "0.9",
	"log.cleaner.io.max.bytes.per.second":                         "1.7976931348623157E308",
	"log.cleaner.backoff.ms":                                      "15000",
	"replica.lag.time.max.ms":                                     "30000",
	"replica.fetch.max.bytes":                                     "1048576",
	"replica.fetch.min.bytes":                                     "1",
	"replica.fetch.wait.max.ms":                                   "500",
	"replica.fetch.response.max.bytes":                            "10485760",
	"replica.fetch.backoff.ms":                                    "1000",
	"replica.socket.timeout.ms":                                   "30000",
	"replica.socket.receive.buffer.bytes":                         "65536",
	"replica.high.watermark.checkpoint.interval.ms":               "5000",
	"max.incremental.fetch.session.cache.slots":                   "1000",
	"num.replica.fetchers":                                        "1",
	"replica.selector.class":                                      "",
	"auto.leader.rebalance.enable":                                "true",
	"leader.imbalance.check.interval.seconds":                     "300",
	"leader.imbalance.per.broker.percentage":                      "10",
	"leader.replication.throttled.rate":                           "9223372036854775807", // Kafka's Long.MAX_VALUE: no throttle
	"follower.replication.throttled.rate":                         "9223372036854775807",
	"replica.alter.log.dirs.io.max.bytes.per.second":              "9223372036854775807",
	"quota.window.num":                                            "11",
	"quota.window.size.seconds":                                   "1",
	"offsets.topic.num.partitions":                                "50",
	"offsets.topic.replication.factor":                            "1", // Gregor; Kafka: 3
	"offsets.topic.segment.bytes":                                 "104857600",
	"offsets.retention.minutes":                                   "10080",
	"offsets.retention.check.interval.ms":                         "600000",
	"offsets.commit.timeout.ms":                                   "5000",
	"group.initial.rebalance.delay.ms":                            "3000",
	"group.min.session.timeout.ms":                                "6000",
	"group.max.session.timeout.ms":                                "1800000",
	"group.max.size":                                              "2147483647",
	"group.consumer.session.timeout.ms":                           "45000",
	"group.consumer.min.session.timeout.ms":                       "45000",
	"group.consumer.max.session.timeout.ms":                       "60000",
	"group.consumer.heartbeat.interval.ms":                        "5000",
	"group.consumer.min.heartbeat.interval.ms":                    "5000",
	"group.consumer.max.heartbeat.interval.ms":                    "15000",
	"group.share.session.timeout.ms":                              "45000",
	"group.share.min.session.timeout.ms":                          "45000",
	"group.share.max.session.timeout.ms":                          "60000",
	"group.share.heartbeat.interval.ms":                           "5000",
	"group.share.min.heartbeat.interval.ms":                       "5000",
	"group.share.max.heartbeat.interval.ms":                       "15000",
	"group.share.record.lock.duration.ms":                         "30000",
	"group.share.min.record.lock.duration.ms":                     "15000",
	"group.share.max.record.lock.duration.ms":                     "60000",
	"group.share.delivery.count.limit":                            "5",
	"group.share.partition.max.record.locks":                      "2000",
	"group.consumer.max.size":                                     "2147483647",
	"group.consumer.assignors":                                    "uniform,range", // Kafka 4: the same two, by class name
	"group.consumer.migration.policy":                             "bidirectional",
	"transaction.state.log.num.partitions":                        "50",
	"transaction.state.log.replication.factor":                    "1", // Gregor; Kafka: 3
	"transaction.state.log.min.isr":                               "1", // Gregor; Kafka: 2
	"share.coordinator.state.topic.num.partitions":                "50",
	"share.coordinator.state.topic.replication.factor":            "3",
	"share.coordinator.state.topic.min.isr":                       "2",
	"transaction.state.log.segment.bytes":                         "104857600",
	"transaction.max.timeout.ms":                                  "900000",
	"transactional.id.expiration.ms":                              "604800000",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
	"transaction.remove.expired.transaction.cleanup.interval.ms":  "3600000",
	"transaction.partition.verification.enable":                   "true",
	"producer.id.expiration.ms":                                   "86400000",
	"producer.id.expiration.check.interval.ms":                    "600000",
	"ssl.keystore.type":                                           "JKS",
	"ssl.keystore.location":                                       "",
	"ssl.keystore.password":                                       "",
	"ssl.key.password":                                            "",
	"ssl.keystore.certificate.chain":                              "",
	"ssl.keystore.key":                                            "",
	"ssl.truststore.type":                                         "JKS",
	"ssl.truststore.location":                                     "",
	"ssl.truststore.password":                                     "",
	"ssl.truststore.certificates":                                 "",
	"ssl.client.auth":                                             "none",
	"ssl.protocol":                                                "TLSv1.3",
	"ssl.enabled.protocols":                                       "TLSv1.2,TLSv1.3",
	"ssl.cipher.suites":                                           "",
	"ssl.principal.mapping.rules":                                 "DEFAULT",
	"ssl.allow.dn.changes":                                        "false",
	"ssl.allow.san.changes":                                       "false",
	"ssl.endpoint.identification.algorithm":                       "https",
	"sasl.enabled.mechanisms":                                     "GSSAPI",
	"sasl.kerberos.service.name":                                  "",
	"sasl.kerberos.principal.to.local.rules":                      "DEFAULT",
	"sasl.mechanism.inter.broker.protocol":                        "GSSAPI",
	"sasl.mechanism.controller.protocol":                          "GSSAPI",
	"sasl.server.max.receive.size":                                "524288",
	"connections.max.reauth.ms":                                   "0",
	"connection.failed.authentication.delay.ms":                   "100",
	"sasl.oauthbearer.jwks.endpoint.url":                          "",
	"sasl.oauthbearer.jwks.endpoint.refresh.ms":                   "3600000",
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":             "100",
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms":         "10000",
	"sasl.oauthbearer.expected.audience":                          "",
	"sasl.oauthbearer.expected.issuer":                            "",
	"sasl.oauthbearer.sub.claim.name":                             "sub",
	"sasl.oauthbearer.scope.claim.name":                           "scope",
	"sasl.oauthbearer.clock.skew.seconds":                         "30",
	"delegation.token.secret.key":                                 "",
	"delegation.token.master.key":                                 "",
	"delegation.token.max.lifetime.ms":                            "604800000",
	"delegation.token.expiry.time.ms":                             "86400000",
	"delegation.token.expiry.check.interval.ms":                   "3600000",
	"sasl.login.callback.handler.class":                           "",
	"sasl.oauthbearer.token.endpoint.url":                         "",
	"sasl.login.connect.timeout.ms":                               "",
	"sasl.login.read.timeout.ms":                                  "",
	"sasl.login.retry.backoff.ms":                                 "100",
	"sasl.login.retry.backoff.max.ms":                             "10000",
	"authorizer.class.name":                                       "",
	"super.users":                                                 "",
	"allow.everyone.if.no.acl.found":                              "false",
}

func TestDefaultsMatchKafka(t *testing.T) {
	b := Default()
	got := b.Values()
	for k, want := range kafkaDefaults {
		if v, ok := got[k]; !ok {
			t.Errorf("%s missing from Values", k)
		} else if v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	for k := range got {
		if _, ok := kafkaDefaults[k]; !ok {
			t.Errorf("%s has no expected default in this test", k)
		}
	}
	if !reflect.DeepEqual(BrokerConfigNames(), sortedKeys(got)) {
		t.Error("BrokerConfigNames differs from Values keys")
	}
	if len(b.Explicit()) != 0 {
		t.Errorf("Explicit = %v, want empty", b.Explicit())
	}
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestDefaultFields(t *testing.T) {
	b := Default()
	want := []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"NodeID", b.NodeID, int32(1)},
		{"ProcessRoles", b.ProcessRoles, []string{"broker", "controller"}},
		{"Listeners", b.Listeners, want},
		{"AdvertisedListeners", b.AdvertisedListeners, want},
		{"InterBrokerListenerName", b.InterBrokerListenerName, "PLAINTEXT"},
		{"ControllerQuorumVoters", b.ControllerQuorumVoters, ""},
		{"BrokerRack", b.BrokerRack, ""},
		{"LogDirs", b.LogDirs, []string{"./data"}},
		{"NumPartitions", b.NumPartitions, int32(1)},
		{"DefaultReplicationFactor", b.DefaultReplicationFactor, int32(1)},
		{"AutoCreateTopicsEnable", b.AutoCreateTopicsEnable, true},
		{"DeleteTopicEnable", b.DeleteTopicEnable, true},
		{"LogSegmentBytes", b.LogSegmentBytes, int32(1 << 30)},
		{"LogRollMs", b.LogRollMs, int64(168 * 3600 * 1000)},
		{"LogRetentionMs", b.LogRetentionMs, int64(168 * 3600 * 1000)},
		{"LogRetentionBytes", b.LogRetentionBytes, int64(-1)},
		{"LogRetentionCheckIntervalMs", b.LogRetentionCheckIntervalMs, int64(300000)},
		{"LogIndexIntervalBytes", b.LogIndexIntervalBytes, int32(4096)},
		{"LogIndexSizeMaxBytes", b.LogIndexSizeMaxBytes, int32(10485760)},
		{"LogFlushIntervalMessages", b.LogFlushIntervalMessages, int64(math.MaxInt64)},
		{"LogFlushIntervalMs", b.LogFlushIntervalMs, int64(math.MaxInt64)},
		{"LogFlushOffsetCheckpointIntervalMs", b.LogFlushOffsetCheckpointIntervalMs, int32(60000)},
		{"MessageMaxBytes", b.MessageMaxBytes, int32(1048588)},
		{"SocketRequestMaxBytes", b.SocketRequestMaxBytes, int32(104857600)},
		{"MinInsyncReplicas", b.MinInsyncReplicas, int32(1)},
		{"CompressionType", b.CompressionType, "producer"},
		{"LogMessageTimestampType", b.LogMessageTimestampType, "CreateTime"},
		{"LogCleanupPolicy", b.LogCleanupPolicy, []string{"delete"}},
		{"OffsetsTopicNumPartitions", b.OffsetsTopicNumPartitions, int32(50)},
		{"OffsetsTopicReplicationFactor", b.OffsetsTopicReplicationFactor, int16(1)},
		{"GroupInitialRebalanceDelayMs", b.GroupInitialRebalanceDelayMs, int32(3000)},
		{"LogCleanerMinCleanableRatio", b.LogCleanerMinCleanableRatio, 0.5},
		{"ReplicaLagTimeMaxMs", b.ReplicaLagTimeMaxMs, int64(30000)},
		{"LeaderReplicationThrottledRate", b.LeaderReplicationThrottledRate, int64(math.MaxInt64)},
		{"FollowerReplicationThrottledRate", b.FollowerReplicationThrottledRate, int64(math.MaxInt64)},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
}

func TestParseValues(t *testing.T) {
	b, err := Parse(map[string]string{
		"node.id":                         " 7 ",
		"process.roles":                   "broker",
		"listeners":                       "plaintext://:9092, CONTROLLER://[::1]:9093",
		"controller.listener.names":       "controller",
		"log.dirs":                        "/a, /b",
		"log.dir":                         "/ignored",
		"auto.create.topics.enable":       "FALSE",
		"log.cleanup.policy":              "compact , delete",
		"broker.rack":                     "r1",
		"replica.selector.class":          RackAwareReplicaSelector,
		"compression.type":                "zstd",
		"log.cleaner.min.cleanable.ratio": "1",
		"controller.quorum.voters":        "1@localhost:9093, 2@[::1]:9094",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 7 || b.AutoCreateTopicsEnable || b.BrokerRack != "r1" || b.CompressionType != "zstd" || b.ReplicaSelectorClass != RackAwareReplicaSelector {
		t.Errorf("fields: %d %v %q %q %q", b.NodeID, b.AutoCreateTopicsEnable, b.BrokerRack, b.CompressionType, b.ReplicaSelectorClass)
	}
	if !reflect.DeepEqual(b.LogDirs, []string{"/a", "/b"}) {
		t.Errorf("LogDirs = %q, want log.dirs to win", b.LogDirs)
	}
	wantL := []Listener{
		{Name: "PLAINTEXT", Host: "", Port: 9092, SecurityProtocol: "PLAINTEXT"},
		{Name: "CONTROLLER", Host: "::1", Port: 9093, SecurityProtocol: "PLAINTEXT"},
	}
	if !reflect.DeepEqual(b.Listeners, wantL) {
		t.Errorf("Listeners = %+v", b.Listeners)
	}
	if !reflect.DeepEqual(b.AdvertisedListeners, wantL[:1]) {
		t.Errorf("AdvertisedListeners = %+v, want listeners without the controller listener", b.AdvertisedListeners)
	}
	if got := b.Listeners[1].String(); got != "CONTROLLER://[::1]:9093" {
		t.Errorf("String = %q", got)
	}
	if got := b.Listeners[0].Addr(); got != ":9092" {
		t.Errorf("Addr = %q", got)
	}
	v := b.Values()
	for k, want := range map[string]string{
		"node.id":                         "7",
		"listeners":                       "PLAINTEXT://:9092,CONTROLLER://[::1]:9093",
		"advertised.listeners":            "PLAINTEXT://:9092",
		"log.dirs":                        "/a,/b",
		"log.dir":                         "/ignored",
		"auto.create.topics.enable":       "false",
		"log.cleanup.policy":              "compact,delete",
		"log.cleaner.min.cleanable.ratio": "1.0",
		"controller.quorum.voters":        "1@localhost:9093,2@[::1]:9094",
		"controller.listener.names":       "CONTROLLER",
	} {
		if v[k] != want {
			t.Errorf("Values[%s] = %q, want %q", k, v[k], want)
		}
	}
	if got := b.Explicit()["node.id"]; got != "7" {
		t.Errorf("Explicit[node.id] = %q", got)
	}
	if _, ok := b.Explicit()["num.partitions"]; ok {
		t.Error("num.partitions reported as explicit")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		errKey     string // key the error names; "" = key
		reason     string // substring of the message
	}{
		{"log.segment.bytes", "abc", "", `"abc" is not an integer`},
		{"log.segment.bytes", "13", "", "less than the minimum 14"},
		{"log.segment.bytes", "3000000000", "", "32-bit"},
		{"message.max.bytes", "-1", "", "minimum 0"},
		{"num.partitions", "0", "", "minimum 1"},
		{"node.id", "-1", "", "minimum 0"},
		{"node.id", "1.5", "", "not an integer"},
		{"http.listener", "9644", "", "not host:port"},
		{"http.listener", "127.0.0.1:99999", "", "99999"},
		{"default.replication.factor", "0", "", "minimum 1"},
		{"min.insync.replicas", "0", "", "minimum 1"},
		{"offsets.topic.replication.factor", "40000", "", "16-bit"},
		{"auto.create.topics.enable", "yes", "", "not a boolean"},
		{"compression.type", "brotli", "", "not one of"},
		{"log.message.timestamp.type", "createtime", "", "not one of"},
		{"replica.selector.class", "org.example.MySelector", "", "not one of"},
		{"log.cleanup.policy", "compact,remove", "", "not one of"},
		{"log.cleanup.policy", "delete,delete", "", "twice"},
		{"process.roles", "", "", "must not be empty"},
		{"process.roles", "broker,observer", "", "not one of"},
		{"listeners", "PLAINTEXT://:99999", "", "65535"},
		{"listeners", "PLAINTEXT://:-1", "", "65535"},
		{"listeners", "PLAINTEXT:9092", "", "NAME://host:port"},
		{"listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2", "", "used twice"},
		{"listeners", "PLAINTEXT://a:1,SSL://b:1", "", "port 1"},
		{"listeners", "PLAINTEXT://:9092,,SSL://:9093", "", "empty element"},
		{"listeners", "FOO://:9092", "", "no security protocol for listener FOO"},
		{"advertised.listeners", "OTHER://h:1", "", "not in listeners"},
		{"advertised.listeners", "PLAINTEXT://0.0.0.0:9092", "", "non-routable"},
		{"advertised.listeners", "", "inter.broker.listener.name", "not among the advertised"},
		{"inter.broker.listener.name", "INTERNAL", "", "not among the advertised"},
		{"listener.security.protocol.map", "PLAINTEXT:TLS", "", "not one of"},
		{"listener.security.protocol.map", "PLAINTEXT", "", "LISTENER:PROTOCOL"},
		{"controller.quorum.voters", "1@host", "", "id@host:port"},
		{"controller.quorum.voters", "1@a:1,1@b:2", "", "twice"},
		{"controller.quorum.voters", "-1@a:1", "", ">= 0"},
		{"controller.quorum.bootstrap.servers", "nohostport", "", "host:port"},
		{"log.dirs", "", "", "must not be empty"},
		{"log.dir", " ", "", "must not be empty"},
		{"log.retention.ms", "0", "", "unlimited (-1) or at least 1"},
		{"log.retention.minutes", "0", "", "unlimited (-1) or at least 1"},
		{"log.retention.hours", "0", "", "unlimited (-1) or at least 1"},
		{"log.retention.ms", "x", "", "not an integer"},
		{"log.roll.ms", "0", "", "minimum 1"},
		{"log.roll.hours", "0", "", "minimum 1"},
		{"log.roll.jitter.ms", "-1", "", "minimum 0"},
		{"log.index.size.max.bytes", "3", "", "minimum 4"},
		{"log.index.interval.bytes", "-1", "", "minimum 0"},
		{"log.flush.interval.messages", "0", "", "minimum 1"},
		{"log.flush.interval.ms", "-1", "", "minimum 0"},
		{"log.flush.offset.checkpoint.interval.ms", "-1", "", "minimum 0"},
		{"log.retention.check.interval.ms", "0", "", "minimum 1"},
		{"socket.request.max.bytes", "0", "", "minimum 1"},
		{"offsets.topic.num.partitions", "0", "", "minimum 1"},
		{"group.initial.rebalance.delay.ms", "-1", "", "minimum 0"},
		{"log.cleaner.min.cleanable.ratio", "1.5", "", "between 0.0 and 1.0"},
		{"log.cleaner.min.cleanable.ratio", "NaN", "", "not a number"},
		{"log.cleaner.min.compaction.lag.ms", "10", "", ""}, // valid alone; paired below
		{"compression.gzip.level", "0", "", "between 1 and 9"},
		{"compression.lz4.level", "18", "", "between 1 and 17"},
		{"compression.zstd.level", "23", "", "between -131072 and 22"},
		{"replica.fetch.wait.max.ms", "40000", "", "replica.socket.timeout.ms"},
		{"fetch.max.bytes", "1023", "", "minimum 1024"},
		{"log.cleaner.dedupe.buffer.size", "1048576", "", "at least 1MB per cleaner thread"},
		{"log.cleaner.io.buffer.load.factor", "0", "", "could hold no key"},
		{"log.cleaner.io.buffer.size", "-1", "", "minimum 0"},
		{"log.cleaner.backoff.ms", "-1", "", "minimum 0"},
		{"log.cleaner.io.max.bytes.per.second", "fast", "", "not a number"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			_, err := Parse(map[string]string{tc.key: tc.value})
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			checkConfigErr(t, err, ErrInvalidConfig, orDefault(tc.errKey, tc.key), tc.reason)
		})
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func checkConfigErr(t *testing.T, err, kind error, key, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v for %s", kind, key)
	}
	if !errors.Is(err, kind) {
		t.Errorf("error %v is not %v", err, kind)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *config.Error", err)
	}
	if ce.Key != key {
		t.Errorf("error names %q, want %q (%v)", ce.Key, key, err)
	}
	if !strings.HasPrefix(err.Error(), "config: "+key+": ") || !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q, want prefix %q and %q", err, "config: "+key+": ", reason)
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := Parse(map[string]string{"log.segment.bytes": "abc"})
	if err == nil || err.Error() != `config: log.segment.bytes: "abc" is not an integer` {
		t.Fatalf("err = %v", err)
	}
}

func TestParseUnknownKey(t *testing.T) {
	for _, k := range []string{"log.segment.byte", "zookeeper.connect", "cluster.idd", "retention.ms", " node.id"} {
		_, err := Parse(map[string]string{"num.partitions": "0", k: "1"})
		checkConfigErr(t, err, ErrUnknownConfig, k, "unknown broker configuration")
	}
}

func TestCrossKeyRules(t *testing.T) {
	for _, tc := range []struct {
		props  map[string]string
		key    string
		reason string
	}{
		{map[string]string{"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"}, "log.cleaner.min.compaction.lag.ms", "must not exceed"},
		{map[string]string{"replica.fetch.wait.max.ms": "1000", "replica.lag.time.max.ms": "999"}, "replica.fetch.wait.max.ms", "replica.lag.time.max.ms"},
		{map[string]string{"queued.max.request.bytes": "104857599"}, "queued.max.request.bytes", "at least socket.request.max.bytes"},
		{map[string]string{"queued.max.request.bytes": "1048576", "socket.request.max.bytes": "1048576"}, "", ""},
		{map[string]string{"queued.max.request.bytes": "0"}, "", ""},
		{map[string]string{"process.roles": "controller", "advertised.listeners": "", "controller.quorum.voters": "1@localhost:9093", "listeners": "CONTROLLER://:9093", "controller.listener.names": "CONTROLLER"}, "", ""}, // no broker role: no inter-broker listener needed
		{map[string]string{"process.roles": "controller", "advertised.listeners": ""}, "controller.quorum.voters", "controller-only"},
		{map[string]string{"process.roles": "broker"}, "controller.quorum.voters", "must name the controllers"},
		{map[string]string{"controller.quorum.voters": "2@localhost:9093"}, "controller.quorum.voters", "not one of the voters"},
		{map[string]string{"controller.quorum.voters": "1@localhost:9093"}, "controller.listener.names", "a controller needs a listener"},
		{map[string]string{"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "INTERNAL:PLAINTEXT"}, "inter.broker.listener.name", "PLAINTEXT"},
		{map[string]string{"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "INTERNAL:PLAINTEXT", "inter.broker.listener.name": "internal"}, "", ""},
		{map[string]string{"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}, "listeners", "CONTROLLER"},
	} {
		_, err := Parse(tc.props)
		if tc.key == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.props, err)
			}
			continue
		}
		checkConfigErr(t, err, ErrInvalidConfig, tc.key, tc.reason)
	}
}

func TestRetentionPrecedence(t *testing.T) {
	const min, hour = int64(60000), int64(3600000)
	for _, tc := range []struct {
		ms, minutes, hours string
		want               int64
	}{
		{"", "", "", 168 * hour},
		{"", "", "24", 24 * hour},
		{"", "30", "24", 30 * min},
		{"1000", "30", "24", 1000},
		{"-1", "30", "24", -1},
		{"-5", "", "", -1},
		{"", "-1", "", -1},
		{"", "", "-1", -1},
		{"", "", "2147483647", 2147483647 * hour},
	} {
		props := map[string]string{}
		for k, v := range map[string]string{"log.retention.ms": tc.ms, "log.retention.minutes": tc.minutes, "log.retention.hours": tc.hours} {
			if v != "" {
				props[k] = v
			}
		}
		b, err := Parse(props)
		if err != nil {
			t.Errorf("%v: %v", props, err)
			continue
		}
		if b.LogRetentionMs != tc.want {
			t.Errorf("%v: LogRetentionMs = %d, want %d", props, b.LogRetentionMs, tc.want)
		}
		if got := b.TopicDefaults().RetentionMs; got != tc.want {
			t.Errorf("%v: topic retention.ms = %d, want %d", props, got, tc.want)
		}
	}
}

func TestRollAndFlushFallbacks(t *testing.T) {
	for _, tc := range []struct {
		props       map[string]string
		roll, flush int64
		jitter      int64
	}{
		{map[string]string{}, 168 * 3600000, math.MaxInt64, 0},
		{map[string]string{"log.roll.hours": "1", "log.roll.jitter.hours": "1"}, 3600000, math.MaxInt64, 3600000},
		{map[string]string{"log.roll.hours": "1", "log.roll.ms": "500", "log.roll.jitter.ms": "7", "log.roll.jitter.hours": "1"}, 500, math.MaxInt64, 7},
		{map[string]string{"log.flush.scheduler.interval.ms": "2000"}, 168 * 3600000, 2000, 0},
		{map[string]string{"log.flush.scheduler.interval.ms": "2000", "log.flush.interval.ms": "10"}, 168 * 3600000, 10, 0},
	} {
		b, err := Parse(tc.props)
		if err != nil {
			t.Fatal(err)
		}
		if b.LogRollMs != tc.roll || b.LogFlushIntervalMs != tc.flush || b.LogRollJitterMs != tc.jitter {
			t.Errorf("%v: roll %d flush %d jitter %d, want %d %d %d", tc.props, b.LogRollMs, b.LogFlushIntervalMs, b.LogRollJitterMs, tc.roll, tc.flush, tc.jitter)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.properties")
	content := "# test\nnode.id=4\nnum.partitions=3\nlog.dirs=/x,\\\n  /y\nlog.retention.hours=24\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Load(path, []string{"num.partitions=6", "log.retention.ms = 1000", "broker.rack=a=b"})
	if err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 4 || b.NumPartitions != 6 || b.LogRetentionMs != 1000 || b.BrokerRack != "a=b" {
		t.Errorf("got node %d partitions %d retention %d rack %q", b.NodeID, b.NumPartitions, b.LogRetentionMs, b.BrokerRack)
	}
	if !reflect.DeepEqual(b.LogDirs, []string{"/x", "/y"}) {
		t.Errorf("LogDirs = %q", b.LogDirs)
	}
	if got := b.Explicit(); got["num.partitions"] != "6" || got["log.retention.hours"] != "24" || len(got) != 6 {
		t.Errorf("Explicit = %v", got)
	}

	d, err := Load("", nil)
	if err != nil || !reflect.DeepEqual(d.Values(), Default().Values()) {
		t.Fatalf("Load(\"\") = %v, %v; want defaults", d, err)
	}
	if _, err := Load("", []string{"num.partitions=8"}); err != nil {
		t.Fatal(err)
	}

	for _, sets := range [][]string{{"novalue"}, {"=5"}, {" =5"}} {
		if _, err := Load("", sets); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "key=value") {
			t.Errorf("Load(%q) err = %v", sets, err)
		}
	}
	_, err = Load("", []string{"num.partitions=zero"})
	checkConfigErr(t, err, ErrInvalidConfig, "num.partitions", "not an integer")
	_, err = Load("", []string{"bogus.key=1"})
	checkConfigErr(t, err, ErrUnknownConfig, "bogus.key", "unknown")

	if _, err := Load(filepath.Join(dir, "missing.properties"), nil); err == nil || !strings.Contains(err.Error(), "missing.properties") {
		t.Errorf("missing file: err = %v", err)
	}
	bad := filepath.Join(dir, "bad.properties")
	if err := os.WriteFile(bad, []byte("a=\\uZZZZ\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, nil); err == nil || !strings.Contains(err.Error(), "bad.properties") {
		t.Errorf("bad file: err = %v", err)
	}
}

// Kafka 4.0's config/server.properties (comments removed) loads, its share coordinator keys
// included.
func TestKafkaSampleServerProperties(t *testing.T) {
	const sample = `
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
`
	props, err := ReadProperties(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(props)
	if err != nil {
		t.Fatal(err)
	}
	if b.ShareCoordinatorStateTopicReplicationFactor != 1 || b.ShareCoordinatorStateTopicMinIsr != 1 {
		t.Fatalf("share coordinator keys: replication factor %d, min ISR %d", b.ShareCoordinatorStateTopicReplicationFactor, b.ShareCoordinatorStateTopicMinIsr)
	}
	if len(b.AdvertisedListeners) != 2 || b.AdvertisedListeners[0].Host != "localhost" {
		t.Errorf("AdvertisedListeners = %+v", b.AdvertisedListeners)
	}
	if b.ListenerSecurityProtocolMap["CONTROLLER"] != "PLAINTEXT" {
		t.Errorf("protocol map = %v", b.ListenerSecurityProtocolMap)
	}
}

// With the default protocol map, controller listeners default to PLAINTEXT.
func TestControllerListenerDefaultsToPlaintext(t *testing.T) {
	b, err := Parse(map[string]string{
		"listeners":                 "PLAINTEXT://:9092,CONTROLLER://:9093",
		"controller.listener.names": "CONTROLLER",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Listeners[1].SecurityProtocol != "PLAINTEXT" || len(b.AdvertisedListeners) != 1 {
		t.Errorf("Listeners %+v advertised %+v", b.Listeners, b.AdvertisedListeners)
	}
}

func TestParseVoters(t *testing.T) {
	vs, err := ParseVoters("1@a:9093, 2@[::1]:9094")
	if err != nil {
		t.Fatal(err)
	}
	want := []Voter{{ID: 1, Host: "a", Port: 9093}, {ID: 2, Host: "::1", Port: 9094}}
	if !reflect.DeepEqual(vs, want) {
		t.Errorf("got %+v", vs)
	}
	if vs, err := ParseVoters(""); err != nil || len(vs) != 0 {
		t.Errorf("empty: %v %v", vs, err)
	}
	for _, bad := range []string{"a@b:1", "1@b", "1@:1", "1@b:70000"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("ParseVoters(%q) succeeded", bad)
		}
	}
}

func TestTopicDefaultsDoNotAlias(t *testing.T) {
	b := Default()
	td := b.TopicDefaults()
	td.CleanupPolicy[0] = "compact"
	if b.LogCleanupPolicy[0] != "delete" || b.TopicDefaults().CleanupPolicy[0] != "delete" {
		t.Fatal("TopicDefaults shares slices with the broker snapshot")
	}
}

// The consumer-protocol group timeouts are checked against their bounds at start-up, as
// Kafka's KafkaConfig requires: a default outside [min, max], min above max, or a heartbeat
// interval not below the session timeout stops start-up naming the key.
func TestGroupConsumerBounds(t *testing.T) {
	for _, c := range []struct {
		sets []string
		key  string // "" when the sets are valid
	}{
		{nil, ""},
		{[]string{"group.consumer.session.timeout.ms=10000", "group.consumer.min.session.timeout.ms=10000"}, ""},
		{[]string{"group.consumer.session.timeout.ms=3000"}, "group.consumer.session.timeout.ms"},
		{[]string{"group.consumer.session.timeout.ms=90000"}, "group.consumer.session.timeout.ms"},
		{[]string{"group.consumer.min.session.timeout.ms=70000"}, "group.consumer.min.session.timeout.ms"},
		{[]string{"group.consumer.heartbeat.interval.ms=100"}, "group.consumer.heartbeat.interval.ms"},
		{[]string{"group.consumer.heartbeat.interval.ms=20000"}, "group.consumer.heartbeat.interval.ms"},
		{[]string{"group.consumer.session.timeout.ms=6000", "group.consumer.min.session.timeout.ms=6000",
			"group.consumer.heartbeat.interval.ms=6000", "group.consumer.min.heartbeat.interval.ms=100"}, "group.consumer.heartbeat.interval.ms"},
	} {
		_, err := Load("", c.sets)
		switch {
		case c.key == "" && err != nil:
			t.Errorf("%v: %v", c.sets, err)
		case c.key != "" && (err == nil || !strings.Contains(err.Error(), c.key)):
			t.Errorf("%v: %v, want an error naming %s", c.sets, err, c.key)
		}
	}
}
