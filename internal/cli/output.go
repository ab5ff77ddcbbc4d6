package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Output formats accepted by -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

func parseOutput(s string) (string, error) {
	switch strings.ToLower(s) {
	case outputTable, "":
		return outputTable, nil
	case outputJSON:
		return outputJSON, nil
	}
	return "", fmt.Errorf("--output %q: want table or json", s)
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table accumulates rows and aligns their columns when flushed.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// joinInt32s renders a replica list the way Kafka's tools do: "1,2,3".
func joinInt32s(xs []int32) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(int64(x), 10)
	}
	return strings.Join(parts, ",")
}

// offsetText renders an offset, using "-" for unknown (-1).
func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}
