package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gregor-project/gregor/internal/config"
)

func runDev(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := devCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// gregor dev cluster-config writes one file per node that gregor server
// loads, with the port layout, the shared cluster id and direct voters; a
// second run in the same directory keeps the cluster id.
func TestDevClusterConfig(t *testing.T) {
	dir := t.TempDir()
	out, err := runDev(t, "cluster-config", "3", "--dir", dir, "--base-port", "20000", "--set", "num.partitions=6")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "bootstrap servers: 127.0.0.1:20000,127.0.0.1:20001,127.0.0.1:20002") {
		t.Errorf("output lacks the bootstrap list:\n%s", out)
	}
	var clusterID string
	for i := 1; i <= 3; i++ {
		file := filepath.Join(dir, fmt.Sprintf("node-%d.properties", i))
		cfg, err := config.Load(file, nil)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if i == 1 {
			clusterID = cfg.ClusterID
		}
		if cfg.ClusterID == "" || cfg.ClusterID != clusterID {
			t.Errorf("node %d: cluster.id %q, node 1 has %q", i, cfg.ClusterID, clusterID)
		}
		if cfg.NodeID != int32(i) || !slices.Equal(cfg.ProcessRoles, []string{"broker", "controller"}) {
			t.Errorf("node %d: node.id %d, roles %v", i, cfg.NodeID, cfg.ProcessRoles)
		}
		want := []string{
			fmt.Sprintf("CLIENT://127.0.0.1:%d", 20000+i-1),
			fmt.Sprintf("INTERNAL://127.0.0.1:%d", 20100+i-1),
			fmt.Sprintf("CONTROLLER://127.0.0.1:%d", 20200+i-1),
		}
		var got []string
		for _, l := range cfg.Listeners {
			got = append(got, l.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("node %d: listeners %v, want %v", i, got, want)
		}
		if cfg.ControllerQuorumVoters != "1@127.0.0.1:20200,2@127.0.0.1:20201,3@127.0.0.1:20202" {
			t.Errorf("node %d: voters %q", i, cfg.ControllerQuorumVoters)
		}
		if !slices.Equal(cfg.LogDirs, []string{filepath.Join(dir, fmt.Sprintf("node-%d", i))}) {
			t.Errorf("node %d: log.dirs %v", i, cfg.LogDirs)
		}
		if cfg.NumPartitions != 6 || cfg.OffsetsTopicReplicationFactor != 3 {
			t.Errorf("node %d: num.partitions %d, offsets RF %d", i, cfg.NumPartitions, cfg.OffsetsTopicReplicationFactor)
		}
	}

	if out, err := runDev(t, "cluster-config", "3", "--dir", dir, "--base-port", "20000"); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	cfg, err := config.Load(filepath.Join(dir, "node-2.properties"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClusterID != clusterID {
		t.Errorf("second run changed the cluster id: %q, was %q", cfg.ClusterID, clusterID)
	}
}

func TestDevClusterConfigRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"cluster-config", "0", "--dir", dir},
		{"cluster-config", "x", "--dir", dir},
		{"cluster-config", "100", "--dir", dir},
		{"cluster-config", "3", "--dir", dir, "--base-port", "65400"},
		{"cluster-config", "3", "--dir", dir, "--set", "novalue"},
	} {
		if out, err := runDev(t, args...); err == nil {
			t.Errorf("%v: no error\n%s", args, out)
		}
	}
}
