package main

import (
	"bytes"
	"context"
	"maps"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
)

// TestWordCount builds the program, runs it against an embedded Gregor node as a user would,
// under each processing guarantee, checks every word's latest committed count against
// counts computed here (and, exactly once, that each word's counts are 1..n), then stops it
// with SIGTERM and expects a clean exit.
func TestWordCount(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "wordcount")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, g := range []string{"at_least_once", "exactly_once_v2"} {
		t.Run(g, func(t *testing.T) { testWordCount(t, bin, g) })
	}
}

func testWordCount(t *testing.T, bin, guarantee string) {
	n := embedtest.Start(t, embed.Options{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, topic := range []string{"lines", "counts"} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--bootstrap-server", n.Addr(), "--input", "lines", "--output", "counts",
		"--application-id", "wc-example", "--processing-guarantee", guarantee, "--state-dir", t.TempDir())
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited {
			if err := cmd.Process.Kill(); err != nil {
				t.Errorf("kill: %v", err)
			}
			<-exited
		}
	}()

	lines := []string{"To be or not to be", "that is the question", "Whether tis nobler in the mind to suffer", "BE  be\tbe"}
	want := map[string]int64{}
	var rs []*kgo.Record
	for _, l := range lines {
		rs = append(rs, &kgo.Record{Topic: "lines", Value: []byte(l)})
		for _, w := range strings.Fields(strings.ToLower(l)) {
			want[w]++
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	out, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.ConsumeTopics("counts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got := map[string]int64{}
	seq := map[string][]int64{}
	for !maps.Equal(got, want) {
		fs := out.PollFetches(wctx)
		if wctx.Err() != nil {
			t.Fatalf("counts %v, want %v; program stderr:\n%s", got, want, stderr.String())
		}
		fs.EachRecord(func(r *kgo.Record) {
			c, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil {
				t.Errorf("count %q of %q is not decimal", r.Value, r.Key)
			}
			got[string(r.Key)] = c
			seq[string(r.Key)] = append(seq[string(r.Key)], c)
		})
	}
	if guarantee == "exactly_once_v2" {
		for w, cs := range seq {
			for i, c := range cs {
				if c != int64(i+1) {
					t.Fatalf("committed counts of %q: %v", w, cs)
				}
			}
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("no exit a minute after SIGTERM\n%s", stderr.String())
	}
}
