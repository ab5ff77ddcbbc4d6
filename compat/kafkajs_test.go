package compat_test

import (
	"testing"

	"github.com/gregor-project/gregor/compat"
)

// TestKafkajs runs kafkajs from compat/node_modules (scripts/test runs npm ci there).
func TestKafkajs(t *testing.T) {
	t.Parallel()
	runScenario(t, kafkajs())
}

func kafkajs() *scriptClient {
	return &scriptClient{
		info: compat.ClientInfo{Name: "kafkajs", Language: "Node.js", Order: 6},
		caps: Caps{Codecs: []string{"none", "gzip", "snappy", "lz4"}, Timestamps: true, Headers: true,
			Note: "snappy through kafkajs-snappy, lz4 through lz4js (pure JS); kafkajs's zstd codec needs a native module that does not build here"},
		argv: []string{"node", "kafkajs/client.js"},
		expect: map[string]Expectation{
			"unknown-topic": {Desc: "KafkaJSProtocolError UNKNOWN_TOPIC_OR_PARTITION after its retries",
				Match: scriptErr("", "UNKNOWN_TOPIC_OR_PARTITION")},
			"out-of-range": {Desc: "fromBeginning: resets to the log start", Reset: true},
			"too-large":    {Desc: "KafkaJSProtocolError MESSAGE_TOO_LARGE", Match: scriptErr("KafkaJSProtocolError", "MESSAGE_TOO_LARGE")},
		},
		// kafkajs 2.2.4 asks for request versions from before PRODUCER_FENCED (error 90): Kafka
		// answers a fenced producer INVALID_PRODUCER_EPOCH there.
		fenced: [2]Expectation{
			{Desc: "KafkaJSProtocolError INVALID_PRODUCER_EPOCH", Match: scriptErrAny("", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED")},
			{Desc: "KafkaJSProtocolError INVALID_PRODUCER_EPOCH", Match: scriptErrAny("", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED")},
		},
	}
}
