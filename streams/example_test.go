package streams_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/gregor-project/gregor/streams"
	"github.com/gregor-project/gregor/streams/serde"
)

// Word count, run in the test driver.
func Example() {
	b := streams.NewBuilder()
	lines := streams.Stream(b, "text-lines", serde.String, serde.String)
	words := streams.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
	counts := streams.Count(streams.GroupBy(words, func(_, w string) string { return w }, serde.String), streams.Named("counts"))
	streams.To(streams.ToStream(counts), "word-counts", serde.String, serde.Int64Text)

	// In a test, streamstest.New(t, b) wraps this driver with typed inputs and outputs.
	d, err := streams.NewTestDriver(b, "wordcount", time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := d.PipeRaw("text-lines", nil, []byte("to be or not to be"), time.Now(), nil); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range d.ReadOutput("word-counts") {
		fmt.Println(string(r.Key), string(r.Value))
	}
	// Output:
	// to 1
	// be 1
	// or 1
	// not 1
	// to 2
	// be 2
}
