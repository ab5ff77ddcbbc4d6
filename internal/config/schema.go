package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
)

// Config types, as Kafka reports them in DescribeConfigs (kmsg.ConfigType).
const (
	TypeBoolean  int8 = 1
	TypeString   int8 = 2
	TypeInt      int8 = 3
	TypeShort    int8 = 4
	TypeLong     int8 = 5
	TypeDouble   int8 = 6
	TypeList     int8 = 7
	TypeClass    int8 = 8
	TypePassword int8 = 9
)

// Config sources, as Kafka reports them in DescribeConfigs (kmsg.ConfigSource).
const (
	SourceTopic                int8 = 1 // DYNAMIC_TOPIC_CONFIG: a topic override
	SourceDynamicBroker        int8 = 2 // DYNAMIC_BROKER_CONFIG: set for this broker at runtime
	SourceDynamicDefaultBroker int8 = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: cluster-wide runtime default
	SourceStaticBroker         int8 = 4 // STATIC_BROKER_CONFIG: server.properties or --set
	SourceDefault              int8 = 5 // DEFAULT_CONFIG: built-in default
)

// Sentinel errors. Every error this package returns for a bad key or value is
// an *Error wrapping one of these; the API layer maps both to Kafka's
// INVALID_CONFIG (40), which is also what Kafka answers for an unknown topic
// config in CreateTopics.
var (
	ErrUnknownConfig = errors.New("unknown configuration")
	ErrInvalidConfig = errors.New("invalid configuration")
)

// Error names the configuration key (and value) that was rejected.
type Error struct {
	Key    string
	Value  string
	Reason string // e.g. `"abc" is not an integer`
	Err    error  // ErrUnknownConfig or ErrInvalidConfig
}

func (e *Error) Error() string { return "config: " + e.Key + ": " + e.Reason }

// Unwrap returns ErrUnknownConfig or ErrInvalidConfig.
func (e *Error) Unwrap() error { return e.Err }

func invalid(key, value, reason string) *Error {
	return &Error{Key: key, Value: value, Reason: reason, Err: ErrInvalidConfig}
}

func unknown(key, what string) *Error {
	return &Error{Key: key, Reason: "unknown " + what, Err: ErrUnknownConfig}
}

// valueType parses and validates one configuration value. parse receives the
// trimmed text and returns the typed value (int16, int32, int64, bool,
// float64, string, []string, or a key-specific type), its normalized text
// (how Kafka prints the parsed value) and, on failure, a reason.
type valueType struct {
	typ   int8
	parse func(s string) (v any, norm string, reason string)
}

const (
	noMin = math.MinInt64
	noMax = math.MaxInt64
)

func rangeReason(n, lo, hi int64) string {
	switch {
	case lo != noMin && hi != noMax && (n < lo || n > hi):
		return fmt.Sprintf("%d is not between %d and %d", n, lo, hi)
	case n < lo:
		return fmt.Sprintf("%d is less than the minimum %d", n, lo)
	case n > hi:
		return fmt.Sprintf("%d is greater than the maximum %d", n, hi)
	}
	return ""
}

func parseInteger(s string, bits int, lo, hi int64) (int64, string) {
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Sprintf("%q does not fit in a %d-bit integer", s, bits)
		}
		return 0, fmt.Sprintf("%q is not an integer", s)
	}
	return n, rangeReason(n, lo, hi)
}

// shortType is Kafka's SHORT (int16) with an inclusive range.
func shortType(lo, hi int64) valueType {
	return valueType{TypeShort, func(s string) (any, string, string) {
		n, r := parseInteger(s, 16, lo, hi)
		return int16(n), strconv.FormatInt(n, 10), r
	}}
}

// intType is Kafka's INT (int32) with an inclusive range.
func intType(lo, hi int64) valueType {
	return valueType{TypeInt, func(s string) (any, string, string) {
		n, r := parseInteger(s, 32, lo, hi)
		return int32(n), strconv.FormatInt(n, 10), r
	}}
}

// longType is Kafka's LONG (int64) with an inclusive range.
func longType(lo, hi int64) valueType {
	return valueType{TypeLong, func(s string) (any, string, string) {
		n, r := parseInteger(s, 64, lo, hi)
		return n, strconv.FormatInt(n, 10), r
	}}
}

// boolType is Kafka's BOOLEAN: "true" or "false" in any case.
func boolType() valueType {
	return valueType{TypeBoolean, func(s string) (any, string, string) {
		switch strings.ToLower(s) {
		case "true":
			return true, "true", ""
		case "false":
			return false, "false", ""
		}
		return false, "", fmt.Sprintf("%q is not a boolean (true or false)", s)
	}}
}

// doubleType is Kafka's DOUBLE with an inclusive range.
func doubleType(lo, hi float64) valueType {
	return valueType{TypeDouble, func(s string) (any, string, string) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0.0, "", fmt.Sprintf("%q is not a number", s)
		}
		if f < lo || f > hi {
			return 0.0, "", fmt.Sprintf("%s is not between %s and %s", s, formatDouble(lo), formatDouble(hi))
		}
		return f, formatDouble(f), ""
	}}
}

// formatDouble prints f the way Java's Double.toString does for ordinary
// values ("0.5", "1.0").
func formatDouble(f float64) string {
	if a := math.Abs(f); a >= 1e7 || (a > 0 && a < 1e-3) {
		// Java's Double.toString: 1.7976931348623157E308, 1.0E-4.
		s := strings.Replace(strconv.FormatFloat(f, 'E', -1, 64), "E+", "E", 1)
		if m, e, _ := strings.Cut(s, "E"); !strings.Contains(m, ".") {
			s = m + ".0E" + e
		}
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// stringType is Kafka's STRING; if valid is non-empty the value must be one of
// them (case-sensitive, as Kafka's ValidString).
func stringType(valid ...string) valueType {
	return valueType{TypeString, func(s string) (any, string, string) {
		if len(valid) > 0 && !contains(valid, s) {
			return "", "", fmt.Sprintf("%q is not one of %s", s, strings.Join(valid, ", "))
		}
		return s, s, ""
	}}
}

// listType is Kafka's LIST: comma-separated, blanks around commas ignored,
// the empty string is the empty list. Elements may not be empty or repeat;
// if valid is non-empty each element must be one of them.
func listType(nonEmpty bool, valid ...string) valueType {
	return valueType{TypeList, func(s string) (any, string, string) {
		l, r := splitList(s)
		if r != "" {
			return nil, "", r
		}
		if nonEmpty && len(l) == 0 {
			return nil, "", "must not be empty"
		}
		for _, e := range l {
			if len(valid) > 0 && !contains(valid, e) {
				return nil, "", fmt.Sprintf("%q is not one of %s", e, strings.Join(valid, ", "))
			}
		}
		return l, strings.Join(l, ","), ""
	}}
}

// splitList splits a Kafka LIST value, rejecting empty and repeated elements.
func splitList(s string) ([]string, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []string{}, ""
	}
	parts := strings.Split(s, ",")
	seen := make(map[string]bool, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, fmt.Sprintf("%q has an empty element", s)
		}
		if seen[p] {
			return nil, fmt.Sprintf("%q lists %q twice", s, p)
		}
		seen[p] = true
		parts[i] = p
	}
	return parts, ""
}

// levelType is an INT that is either def (the codec's "default level") or in lo..hi.
func levelType(def, lo, hi int64) valueType {
	return valueType{TypeInt, func(s string) (any, string, string) {
		n, r := parseInteger(s, 32, noMin, noMax)
		if r == "" && n != def && (n < lo || n > hi) {
			r = fmt.Sprintf("%d is not between %d and %d", n, lo, hi)
		}
		return int32(n), strconv.FormatInt(n, 10), r
	}}
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// assign stores a parsed value v (from a valueType) into ptr, a pointer to a
// field of the matching Go type. A mismatch is a bug in the tables of this
// package, caught by its tests.
func assign(ptr, v any) {
	switch p := ptr.(type) {
	case *int16:
		*p = v.(int16)
	case *int32:
		*p = v.(int32)
	case *int64:
		*p = v.(int64)
	case *bool:
		*p = v.(bool)
	case *float64:
		*p = v.(float64)
	case *string:
		*p = v.(string)
	case *[]string:
		*p = append([]string(nil), v.([]string)...)
	case *[]Listener:
		*p = append([]Listener(nil), v.([]Listener)...)
	case *map[string]int32:
		*p = maps.Clone(v.(map[string]int32))
	default:
		panic(fmt.Sprintf("config: cannot assign %T to %T", v, ptr))
	}
}

// format prints the value ptr points to as Kafka prints config values.
func format(ptr any) string {
	switch p := ptr.(type) {
	case *int16:
		return strconv.FormatInt(int64(*p), 10)
	case *int32:
		return strconv.FormatInt(int64(*p), 10)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *bool:
		return strconv.FormatBool(*p)
	case *float64:
		return formatDouble(*p)
	case *string:
		return *p
	case *[]string:
		return strings.Join(*p, ",")
	case *[]Listener:
		return formatListeners(*p)
	case *map[string]int32:
		return formatConnOverrides(*p)
	}
	panic(fmt.Sprintf("config: cannot format %T", ptr))
}
