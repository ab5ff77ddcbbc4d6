package cli

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultConsumeFormat prints each record's value on its own line, like
// kafka-console-consumer.
const DefaultConsumeFormat = `%v\n`

// nullText is printed for a null key or value, as kafka-console-consumer
// does.
const nullText = "null"

// recordFormat is a parsed --format string. Verbs:
//
//	%k key        %v value       %o offset     %p partition
//	%t topic      %T timestamp (Unix milliseconds)
//	%h headers as k=v,k=v (empty when there are none)
//	%% a literal percent sign
//
// and escapes \n, \t, \r, \\. A null key or value prints as "null". Unknown
// verbs and escapes are rejected when parsing, so a typo fails up front
// instead of printing garbage for every record.
type recordFormat struct {
	parts []formatPart
}

// formatPart is either a literal run of bytes (verb == 0) or one verb.
type formatPart struct {
	verb byte
	lit  []byte
}

// parseRecordFormat parses a --format string.
func parseRecordFormat(s string) (*recordFormat, error) {
	var (
		f   recordFormat
		lit []byte
	)
	flush := func() {
		if len(lit) > 0 {
			f.parts = append(f.parts, formatPart{lit: lit})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '%':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("format %q: trailing %%", s)
			}
			i++
			switch v := s[i]; v {
			case '%':
				lit = append(lit, '%')
			case 'k', 'v', 'o', 'p', 't', 'T', 'h':
				flush()
				f.parts = append(f.parts, formatPart{verb: v})
			default:
				return nil, fmt.Errorf("format %q: unknown verb %%%c (want %%k %%v %%o %%p %%t %%T %%h %%%%)", s, v)
			}
		case '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("format %q: trailing backslash", s)
			}
			i++
			switch e := s[i]; e {
			case 'n':
				lit = append(lit, '\n')
			case 't':
				lit = append(lit, '\t')
			case 'r':
				lit = append(lit, '\r')
			case '\\':
				lit = append(lit, '\\')
			default:
				return nil, fmt.Errorf("format %q: unknown escape \\%c (want \\n \\t \\r \\\\)", s, e)
			}
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return &f, nil
}

// appendRecord appends r rendered by f to dst.
func (f *recordFormat) appendRecord(dst []byte, r *kgo.Record) []byte {
	for _, p := range f.parts {
		switch p.verb {
		case 0:
			dst = append(dst, p.lit...)
		case 'k':
			dst = appendNullable(dst, r.Key)
		case 'v':
			dst = appendNullable(dst, r.Value)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 't':
			dst = append(dst, r.Topic...)
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		}
	}
	return dst
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return append(dst, nullText...)
	}
	return append(dst, b...)
}

// jsonRecord is one record in `consume -o json` output (JSON Lines). Keys,
// values and header values are strings; null stays null.
type jsonRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

func nullableString(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// appendRecordJSON appends r as one compact JSON object and a newline.
func appendRecordJSON(dst []byte, r *kgo.Record) ([]byte, error) {
	jr := jsonRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Key:       nullableString(r.Key),
		Value:     nullableString(r.Value),
		Headers:   make([]jsonHeader, len(r.Headers)),
	}
	for i, h := range r.Headers {
		jr.Headers[i] = jsonHeader{Key: h.Key, Value: nullableString(h.Value)}
	}
	b, err := json.Marshal(jr)
	if err != nil {
		return dst, err
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}
