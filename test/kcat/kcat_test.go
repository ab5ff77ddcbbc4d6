// Package kcat drives the kcat tool (librdkafka) against a real broker.
package kcat

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/testutil"
)

func kcat(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is not installed: the README's test command installs it (apt-get install kcat)")
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// kcat produces keyed records (librdkafka's idempotent-capable producer, each codec) and
// consumes them back with keys, offsets and partitions.
func TestKcatProduceConsume(t *testing.T) {
	b := testutil.StartBroker(t)
	var want []string
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for i := 0; i < 20; i++ {
			line := codec + "-key:" + codec + "-value-" + strings.Repeat("x", i)
			in.WriteString(line + "\n")
			want = append(want, strings.Replace(line, ":", "=", 1))
		}
		kcat(t, in.String(), "-b", b.Addr(), "-P", "-t", "kc", "-K", ":", "-z", codec,
			"-X", "enable.idempotence=true", "-X", "topic.partitioner=murmur2_random")
	}
	out := kcat(t, "", "-b", b.Addr(), "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s\n")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("consumed %d records, want %d:\n%s", len(got), len(want), out)
	}
	gotSet := map[string]int{}
	for _, g := range got {
		gotSet[g]++
	}
	for _, w := range want {
		if gotSet[w] == 0 {
			t.Fatalf("record %q not consumed", w)
		}
		gotSet[w]--
	}
	// Metadata listing shows the auto-created topic.
	if meta := kcat(t, "", "-b", b.Addr(), "-L", "-t", "kc"); !strings.Contains(meta, `topic "kc"`) {
		t.Fatalf("kcat -L:\n%s", meta)
	}
}
