package compat_test

import (
	"strings"
	"testing"

	"github.com/gregor-project/gregor/compat"
)

// Debian's python3-kafka and python3-confluent-kafka install for /usr/bin/python3, which need
// not be the python3 first on PATH.
const debianPython = "/usr/bin/python3"

func TestKafkaPython(t *testing.T) {
	t.Parallel()
	runScenario(t, kafkaPython(nil, "kafka-python"))
}

func TestConfluentKafkaPython(t *testing.T) {
	t.Parallel()
	runScenario(t, confluentPython())
}

// kafkaPython is kafka-python, optionally pinned to an old api_version.
func kafkaPython(apiVersion []int, name string) *scriptClient {
	c := &scriptClient{
		info: compat.ClientInfo{Name: name, Language: "Python", Order: 7},
		caps: Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true, SkipsCompression: true,
			Note: "snappy, lz4 and zstd with Debian's python3-snappy, python3-lz4, python3-zstandard"},
		argv: []string{debianPython, "python/kafka_python_client.py"},
		expect: map[string]Expectation{
			"unknown-topic": {Desc: "KafkaTimeoutError: kafka-python waits for the topic's metadata until max_block_ms",
				Match: scriptErr("KafkaTimeoutError", "")},
			"out-of-range": {Desc: "auto_offset_reset='earliest': resets to the log start", Reset: true},
			"too-large":    {Desc: "MessageSizeTooLargeError", Match: scriptErr("MessageSizeTooLargeError", "")},
			// kafka-python 2.0.2 predates error code 76 (UNSUPPORTED_COMPRESSION_TYPE): it logs
			// the unknown error and keeps polling, reading nothing.
			"zstd-topic": {Desc: `reads nothing and logs "Unknown error fetching data" (kafka-python 2.0.2 predates error code 76, UNSUPPORTED_COMPRESSION_TYPE)`,
				Match: func(err error) bool {
					se, ok := err.(*scriptError)
					return ok && se.Type == "TimeoutError" && strings.Contains(se.Message, "read 0 of") &&
						strings.Contains(se.Message, "Unknown error fetching data")
				}},
		},
	}
	if apiVersion != nil {
		c.extra = map[string]any{"api_version": apiVersion}
		c.caps = Caps{Codecs: []string{"none", "gzip", "snappy", "lz4"}, Timestamps: apiVersion[1] >= 10, SkipsCompression: true}
	}
	return c
}

func confluentPython() *scriptClient {
	return &scriptClient{
		info: compat.ClientInfo{Name: "confluent-kafka-python", Language: "Python (librdkafka)", Order: 8},
		caps: Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true, SkipsCompression: true},
		argv: []string{debianPython, "python/confluent_client.py"},
		expect: map[string]Expectation{
			"unknown-topic": {Desc: "delivery report KafkaError UNKNOWN_TOPIC_OR_PART",
				Match: scriptErr("KafkaError", "UNKNOWN_TOPIC_OR_PART")},
			"out-of-range": {Desc: "auto.offset.reset=earliest: resets to the log start", Reset: true},
			"too-large":    {Desc: "delivery report KafkaError MSG_SIZE_TOO_LARGE", Match: scriptErr("KafkaError", "MSG_SIZE_TOO_LARGE")},
		},
		fenced: [2]Expectation{
			{Desc: "delivery report KafkaError _FENCED (or PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)",
				Match: scriptErrAny("KafkaError", "_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")},
			{Desc: "commit_transaction: KafkaException, fatal KafkaError _FENCED (or PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)",
				Match: scriptErrAny("KafkaError", "_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")},
		},
	}
}
