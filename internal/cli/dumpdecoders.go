package cli

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The record decoders of `gregor dump-log --offsets-decoder` and --transaction-log-decoder,
// as kafka-dump-log.sh's: the keys and values of __consumer_offsets and __transaction_state
// records, decoded with kmsg (generated from Kafka's own schemas for these records) and
// printed as JSON {"type": key version, "data": {...}} / {"version": N, "data": {...}}.

// decodedText renders a decoded record part, or why it did not decode.
func decodedText(label string, version int16, v any, err error) string {
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	b, err := json.Marshal(map[string]any{label: fmt.Sprint(version), "data": v})
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

// recordVersion is the int16 version every key and value of these topics starts with.
func recordVersion(b []byte) (int16, bool) {
	if len(b) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(b)), true
}

// decodeOffsetsRecord decodes a __consumer_offsets key and value: key versions 0 and 1 are
// offset commits, 2 group metadata.
func decodeOffsetsRecord(key, value []byte) (k, v string) {
	kv, ok := recordVersion(key)
	if !ok {
		return `{"error":"short key"}`, ""
	}
	switch kv {
	case 0, 1:
		var ok kmsg.OffsetCommitKey
		k = decodedText("type", kv, &ok, ok.ReadFrom(key))
		if value != nil {
			var ov kmsg.OffsetCommitValue
			vv, _ := recordVersion(value)
			v = decodedText("version", vv, &ov, ov.ReadFrom(value))
		}
	case 2:
		var gk kmsg.GroupMetadataKey
		k = decodedText("type", kv, &gk, gk.ReadFrom(key))
		if value != nil {
			var gv kmsg.GroupMetadataValue
			vv, _ := recordVersion(value)
			v = decodedText("version", vv, &gv, gv.ReadFrom(value))
		}
	default:
		k = fmt.Sprintf(`{"type":"%d","data":"unknown record type"}`, kv)
	}
	if value == nil {
		v = "<DELETE>"
	}
	return k, v
}

// decodeTxnLogRecord decodes a __transaction_state key and value.
func decodeTxnLogRecord(key, value []byte) (k, v string) {
	kv, ok := recordVersion(key)
	if !ok {
		return `{"error":"short key"}`, ""
	}
	var tk kmsg.TxnMetadataKey
	k = decodedText("type", kv, &tk, tk.ReadFrom(key))
	if value == nil {
		return k, "<DELETE>"
	}
	var tv kmsg.TxnMetadataValue
	vv, _ := recordVersion(value)
	return k, decodedText("version", vv, &tv, tv.ReadFrom(value))
}
