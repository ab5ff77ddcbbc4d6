package embed_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/embed"
	"github.com/gregor-project/gregor/embed/embedtest"
)

// A node started on a given directory keeps it on Close, and a node started on it again
// serves what the first one stored; one on a temporary directory removes it.
func TestNodeDirKeptOrRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	n, err := embed.Start(ctx, embed.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if n.DataDir() != dir || n.ID() != 1 {
		t.Fatalf("DataDir %q ID %d, want %q and 1", n.DataDir(), n.ID(), dir)
	}
	produce(t, ctx, n.Addr(), "kept", "first")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/meta.properties"); err != nil {
		t.Fatalf("given dir not kept: %v", err)
	}
	n = embedtest.Start(t, embed.Options{Dir: dir})
	if got := consume(t, ctx, n.Addr(), "kept", 1); got[0] != "first" {
		t.Fatalf("after a restart on the same dir: %v", got)
	}

	tmp, err := embed.Start(ctx, embed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tmpDir := tmp.DataDir()
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmpDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary dir %s left after Close: %v", tmpDir, err)
	}
}

// Options.Config reaches the broker by Kafka's names, over embed's defaults; an unknown key
// or a key embed places itself fails the start naming it.
func TestNodeConfig(t *testing.T) {
	n := embedtest.Start(t, embed.Options{Config: map[string]string{"num.partitions": "3", "log.retention.ms": "123456"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, -1, -1, nil, "three"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "three")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(td["three"].Partitions); got != 3 {
		t.Fatalf("num.partitions=3: topic has %d partitions", got)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, int32(n.ID()))
	if err != nil {
		t.Fatal(err)
	}
	want := embed.Defaults() // what embed sets over Kafka's defaults is what the broker runs with
	if want["group.initial.rebalance.delay.ms"] != "0" {
		t.Fatalf("Defaults: %v", want)
	}
	want["log.retention.ms"] = "123456"
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if w, ok := want[c.Key]; ok {
				if c.MaybeValue() != w {
					t.Errorf("%s = %q, want %q", c.Key, c.MaybeValue(), w)
				}
				delete(want, c.Key)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("not described: %v", want)
	}

	for key, cfg := range map[string]map[string]string{
		"no.such.key": {"no.such.key": "1"},
		"log.dirs":    {"log.dirs": t.TempDir()},
	} {
		n, err := embed.Start(ctx, embed.Options{Config: cfg})
		if err == nil {
			n.Close()
			t.Fatalf("Start with %v succeeded", cfg)
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Start with %v: error %q does not name %s", cfg, err, key)
		}
	}
	_, err = embed.StartCluster(ctx, 3, embed.Options{Config: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0"}})
	if err == nil || !strings.Contains(err.Error(), "listeners") {
		t.Fatalf("StartCluster with listeners: %v", err)
	}
}

func produce(t *testing.T, ctx context.Context, addr, topic string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

func consume(t *testing.T, ctx context.Context, addr, topic string, n int) (got []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// A node given several log dirs (LogDirs, JBOD) uses them all and keeps them; Dir and LogDirs
// together are refused.
func TestNodeLogDirs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dirs := []string{t.TempDir(), t.TempDir()}
	n := embedtest.Start(t, embed.Options{LogDirs: dirs})
	if n.DataDir() != dirs[0] {
		t.Fatalf("DataDir %q, want the first log dir %q", n.DataDir(), dirs[0])
	}
	produce(t, ctx, n.Addr(), "jbod", "a")
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ds, err := kadm.NewClient(cl).DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, ok := ds[d]; !ok {
			t.Fatalf("DescribeLogDirs lacks %s: %v", d, ds)
		}
		if _, err := os.Stat(d + "/meta.properties"); err != nil {
			t.Fatalf("%s not formatted: %v", d, err)
		}
	}
	if _, err := embed.Start(ctx, embed.Options{Dir: t.TempDir(), LogDirs: dirs}); err == nil {
		t.Fatal("Start with Dir and LogDirs succeeded")
	}
}
