// Package streamstest tests a Gregor Streams topology without a broker, as Kafka's
// TopologyTestDriver does: in memory, deterministic, records piped in with explicit
// timestamps, output topics read back, stores inspected, the wall clock advanced by hand.
//
//	b := streams.NewBuilder()
//	... build the topology ...
//	d := streamstest.New(t, b)
//	in := streamstest.Input(d, "text-lines", serde.String, serde.String)
//	out := streamstest.Output(d, "word-counts", serde.String, serde.Int64Text)
//	in.Pipe("", "a b a", at(0))
//	got := out.ReadKeyValues() // [{a 1} {b 1} {a 2}]
//
// Every topic has one partition; records written to the topology's internal repartition
// topics are processed before Pipe returns, and a record piped into a global table's topic
// updates its store at once. Failures (a serde error, a processor's error)
// fail the test.
package streamstest
