// Package streamsbench sets Gregor Streams beside lovoo/goka, the stream-processing library
// Go users pick today, on the same job: counting words. Both run in the test process
// against one `gregor server` process (testutil.StartCluster), so the CPU the test process
// spends is the application's (and its output checker's) and none of the broker's.
//
// The job is the same for both, two stages as a Kafka Streams word count has them:
//
//	text-lines --split into lower-case words, re-keyed by word--> a repartition topic
//	           --count per word in a store backed by a compacted topic--> word-counts
//
// where each output record is the word and its running count as a decimal string.
// Gregor Streams runs it at-least-once and exactly_once_v2 with its default pebble stores,
// and at-least-once with in-memory stores; goka (at-least-once only, it has no
// transactions) with its default LevelDB storage and with its in-memory storage.
//
// TestSameCounts runs each on a small input and checks every final count: the benchmark
// below compares programs that are known to compute the same thing.
//
// BenchmarkWordCount preloads a fixed number of lines, then times each library from its
// start until every word's final count is in word-counts, reporting lines/s and lines per
// CPU-second of the test process (lines/cpu-s, "per core"). BenchmarkLatency produces lines
// at a fixed rate, each with a word of its own, and reports the time from a line's produce
// until its word's count is read from word-counts (p50, p99). Run them with
//
//	go test ./test/streamsbench -run XXX -bench . -benchtime 1x -count 3
//
// and see docs/benchmarks.md for figures.
package streamsbench
