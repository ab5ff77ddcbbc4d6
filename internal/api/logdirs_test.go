package api_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregor-project/gregor/internal/testutil"
)

// Several log dirs (JBOD): every directory of log.dirs holds partitions, new ones placed in
// the dir with the fewest, each dir with its own meta.properties (directory.id, KIP-858) and
// checkpoints; a restart finds every partition where it was.

// threeDirs makes three log dirs under a temp dir and returns them and the log.dirs setting.
func threeDirs(t *testing.T) ([]string, string) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "d0"), filepath.Join(root, "d1"), filepath.Join(root, "d2")}
	return dirs, "log.dirs=" + strings.Join(dirs, ",")
}

// partitionsIn lists the partition directories of topic in dir.
func partitionsIn(t *testing.T, dir, topic string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), topic+"-") && !strings.Contains(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// metaProps reads a dir's meta.properties as key=value pairs.
func metaProps(t *testing.T, dir string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

// logDirsOf describes the broker's log dirs with kadm: dir -> partition "topic-p" -> size.
func logDirsOf(t *testing.T, addr string) map[string]map[string]int64 {
	t.Helper()
	adm := newAdmin(t, addr)
	all, err := adm.DescribeAllLogDirs(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	all.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Fatalf("dir %s: %v", d.Dir, d.Err)
		}
		parts := map[string]int64{}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			parts[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Size
		})
		out[d.Dir] = parts
	})
	return out
}

func TestLogDirsPlacementAndRestart(t *testing.T) {
	dirs, set := threeDirs(t)
	b := testutil.StartBroker(t, set)
	createTopic(t, b.Addr(), "jbod", 6, nil)

	// Two partitions in each dir; meta.properties in each, one cluster and node, own dir id.
	where := map[string]string{}
	ids := map[string]bool{}
	for _, d := range dirs {
		ps := partitionsIn(t, d, "jbod")
		if len(ps) != 2 {
			t.Fatalf("%s holds %v, want 2 partitions of 6 over 3 dirs", d, ps)
		}
		for _, p := range ps {
			where[p] = d
		}
		mp := metaProps(t, d)
		if mp["cluster.id"] != metaProps(t, dirs[0])["cluster.id"] || mp["node.id"] != "1" || mp["version"] != "1" {
			t.Fatalf("%s/meta.properties: %v", d, mp)
		}
		if id := mp["directory.id"]; len(id) != 22 || ids[id] {
			t.Fatalf("%s: directory.id %q missing, malformed or shared", d, id)
		}
		ids[mp["directory.id"]] = true
	}

	cl := newClient(t, b.Addr(), uncompressed, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range 6 {
		for i := range 10 {
			produceSync(t, cl, &kgo.Record{Topic: "jbod", Partition: int32(p), Value: value(p*10 + i)})
		}
	}

	// DescribeLogDirs names every dir with its own partitions and their sizes.
	described := logDirsOf(t, b.Addr())
	if len(described) != 3 {
		t.Fatalf("DescribeLogDirs: %d dirs, want 3: %v", len(described), described)
	}
	for p, d := range where {
		if size, ok := described[d][p]; !ok || size != int64(len(segmentBytes(t, d, p))) || size == 0 {
			t.Fatalf("DescribeLogDirs %s in %s: size %d (reported %v), want its .log size %d",
				p, d, size, ok, len(segmentBytes(t, d, p)))
		}
	}
	for d, parts := range described {
		for p := range parts {
			if strings.HasPrefix(p, "jbod-") && where[p] != d {
				t.Fatalf("DescribeLogDirs puts %s in %s, it is in %s", p, d, where[p])
			}
		}
	}

	b = b.Restart()
	for _, d := range dirs {
		for _, p := range partitionsIn(t, d, "jbod") {
			if where[p] != d {
				t.Fatalf("after restart %s is in %s, was in %s", p, d, where[p])
			}
		}
		// Each dir checkpoints its own partitions only.
		data, err := os.ReadFile(filepath.Join(d, "recovery-point-offset-checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		for p, pd := range where {
			i := strings.LastIndexByte(p, '-')
			entry := "\n" + p[:i] + " " + p[i+1:] + " "
			if strings.Contains(string(data), entry) != (pd == d) {
				t.Fatalf("%s/recovery-point-offset-checkpoint and %s (in %s):\n%s", d, p, pd, data)
			}
		}
	}
	recs := consumeN(t, b.Addr(), "jbod", 60)
	got := make([]string, 0, len(recs))
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d/%d/%s", r.Partition, r.Offset, r.Value[:11]))
	}
	slices.Sort(got)
	var want []string
	for p := range 6 {
		for i := range 10 {
			want = append(want, fmt.Sprintf("%d/%d/%s", p, i, value(p*10 + i)[:11]))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after restart read %v\nwant %v", got, want)
	}

	// A new topic goes on filling the dirs evenly.
	createTopic(t, b.Addr(), "more", 3, nil)
	for _, d := range dirs {
		if ps := partitionsIn(t, d, "more"); len(ps) != 1 {
			t.Fatalf("%s holds %v of a new 3-partition topic, want 1", d, ps)
		}
	}
}

// segmentBytes is the content of a partition's first segment.
func segmentBytes(t *testing.T, dir, part string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, part, "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A log dir that belongs to another cluster, or a partition found in two dirs, stops start-up.
func TestLogDirsRefusedAtStart(t *testing.T) {
	dirs, set := threeDirs(t)
	b := testutil.StartBroker(t, set)
	createTopic(t, b.Addr(), "dup", 3, nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Copy dup-0 into a second dir: which copy is right cannot be told, so start-up refuses.
	var from string
	for _, d := range dirs {
		if slices.Contains(partitionsIn(t, d, "dup"), "dup-0") {
			from = d
		}
	}
	to := dirs[0]
	if from == to {
		to = dirs[1]
	}
	if err := os.CopyFS(filepath.Join(to, "dup-0"), os.DirFS(filepath.Join(from, "dup-0"))); err != nil {
		t.Fatal(err)
	}
	err := startErr(t, set)
	if err == nil || !strings.Contains(err.Error(), "dup-0") || !strings.Contains(err.Error(), "two log dirs") {
		t.Fatalf("start with dup-0 in %s and %s: %v", from, to, err)
	}
	if err := os.RemoveAll(filepath.Join(to, "dup-0")); err != nil {
		t.Fatal(err)
	}

	// A dir of another cluster among them.
	mp := filepath.Join(dirs[2], "meta.properties")
	data, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(string(data), "cluster.id="+metaProps(t, dirs[2])["cluster.id"], "cluster.id=AAAAAAAAAAAAAAAAAAAAAA", 1)
	if err := os.WriteFile(mp, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := startErr(t, set); err == nil || !strings.Contains(err.Error(), "meta.properties does not match") {
		t.Fatalf("start with a dir of another cluster: %v", err)
	}
}

// A dir added to log.dirs is formatted at start with a new directory id and takes new
// partitions, the existing ones staying where they are.
func TestLogDirsAddedDir(t *testing.T) {
	dirs, _ := threeDirs(t)
	b := testutil.StartBroker(t, "log.dirs="+dirs[0])
	createTopic(t, b.Addr(), "grow", 2, nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = testutil.StartBroker(t, "log.dirs="+dirs[0]+","+dirs[1])
	if mp := metaProps(t, dirs[1]); mp["cluster.id"] != metaProps(t, dirs[0])["cluster.id"] ||
		mp["directory.id"] == "" || mp["directory.id"] == metaProps(t, dirs[0])["directory.id"] {
		t.Fatalf("added dir's meta.properties %v, first dir's %v", mp, metaProps(t, dirs[0]))
	}
	if ps := partitionsIn(t, dirs[0], "grow"); len(ps) != 2 {
		t.Fatalf("existing partitions moved: %v", ps)
	}
	createTopic(t, b.Addr(), "new", 2, nil)
	if ps := partitionsIn(t, dirs[1], "new"); len(ps) != 2 {
		t.Fatalf("the emptier dir got %v of a new 2-partition topic, want both", ps)
	}
}

// startErr starts a broker with sets expecting it to fail, returning its error.
func startErr(t *testing.T, sets ...string) error {
	t.Helper()
	b, err := testutil.TryStartBrokerIn(t, t.TempDir(), nil, sets...)
	if err == nil {
		if cerr := b.Close(); cerr != nil {
			t.Error(cerr)
		}
	}
	return err
}
