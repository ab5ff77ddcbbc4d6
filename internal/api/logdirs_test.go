package api_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// dirOf is the one log dir holding partition part (e.g. "mv-0"), failing when it is not
// exactly one.
func dirOf(t *testing.T, dirs []string, part string) string {
	t.Helper()
	var in []string
	for _, d := range dirs {
		topic := part[:strings.LastIndexByte(part, '-')]
		if slices.Contains(partitionsIn(t, d, topic), part) {
			in = append(in, d)
		}
	}
	if len(in) != 1 {
		t.Fatalf("%s is in %v", part, in)
	}
	return in[0]
}

// futureDirs lists the future replica directories (<topic>-<partition>.<id>-future) in dir.
func futureDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "-future") {
			out = append(out, e.Name())
		}
	}
	return out
}

// recordIndex is the i of a value(i) record.
func recordIndex(t *testing.T, v []byte) int {
	t.Helper()
	s, _, ok := strings.Cut(strings.TrimPrefix(string(v), "record-"), "|")
	var i int
	if _, err := fmt.Sscanf(s, "%d", &i); !ok || err != nil {
		t.Fatalf("record value %q", v[:20])
	}
	return i
}

// checkAll reads the partition from the start and checks it holds records 0..n-1, each once,
// in order.
func checkAll(t *testing.T, addr, topic string, n int) {
	t.Helper()
	recs := consumeN(t, addr, topic, n)
	for j, r := range recs {
		if i := recordIndex(t, r.Value); i != j || r.Offset != int64(j) {
			t.Fatalf("record %d at offset %d is value %d", j, r.Offset, i)
		}
	}
}

// AlterReplicaLogDirs moves a replica to another dir while a producer writes to it: the move
// is a future replica in the destination (DescribeLogDirs is_future_key) copied under
// replica.alter.log.dirs.io.max.bytes.per.second, swapped in once caught up; no acknowledged
// record is lost, and the partition stays in the new dir across a restart.
func TestAlterReplicaLogDirsMovesWhileProducing(t *testing.T) {
	dirs, set := threeDirs(t)
	const throttle = "replica.alter.log.dirs.io.max.bytes.per.second"
	b := testutil.StartBroker(t, set, throttle+"=131072")
	segBytes := "65536"
	createTopic(t, b.Addr(), "mv", 1, map[string]*string{"segment.bytes": &segBytes})
	cl := newClient(t, b.Addr(), uncompressed, kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(16<<10))
	const initial = 4000 // 200-byte values: about 900 KiB, 6 s of copying at the throttle
	var rs []*kgo.Record
	for i := range initial {
		rs = append(rs, &kgo.Record{Topic: "mv", Value: value(i)})
	}
	produceSync(t, cl, rs...)

	// A producer writing one record at a time until stopped; acked counts what it was told.
	stop, stopped := make(chan struct{}), make(chan error, 1)
	var acked atomicInt
	acked.set(initial)
	go func() {
		for i := initial; ; i++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "mv", Value: value(i)}).FirstErr(); err != nil {
				stopped <- fmt.Errorf("record %d: %w", i, err)
				return
			}
			acked.set(i + 1)
		}
	}()

	from := dirOf(t, dirs, "mv-0")
	dest := dirs[(slices.Index(dirs, from)+1)%3]
	adm := newAdmin(t, b.Addr())
	var req kadm.AlterReplicaLogDirsReq
	req.Add(dest, kadm.TopicsSet{"mv": {0: {}}})
	resps, err := adm.AlterBrokerReplicaLogDirs(ctxT(t), 1, req)
	if err != nil {
		t.Fatal(err)
	}
	resps.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Fatalf("alter %s-%d to %s: %v", r.Topic, r.Partition, r.Dir, r.Err)
		}
	})

	// While it copies: the current replica in from, the future one in dest.
	ds, err := adm.DescribeBrokerLogDirs(ctxT(t), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	cur, ok1 := ds.Lookup(from, "mv", 0)
	fut, ok2 := ds.Lookup(dest, "mv", 0)
	if !ok1 || !ok2 || cur.IsFuture || !fut.IsFuture || fut.OffsetLag <= 0 {
		t.Fatalf("during the move: current %+v (%v), future %+v (%v)", cur, ok1, fut, ok2)
	}
	if fs := futureDirs(t, dest); len(fs) != 1 || !strings.HasPrefix(fs[0], "mv-0.") {
		t.Fatalf("future replica directories in %s: %v", dest, fs)
	}

	// Lift the throttle (dynamically, on this broker) and wait for the swap.
	unlimited := "9223372036854775807"
	if _, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: throttle, Value: &unlimited}}, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the move to finish", func() bool {
		d, err := adm.DescribeBrokerLogDirs(ctxT(t), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, ok := d.Lookup(dest, "mv", 0)
		_, old := d.Lookup(from, "mv", 0)
		return ok && !p.IsFuture && !old
	})
	if got := dirOf(t, dirs, "mv-0"); got != dest || len(futureDirs(t, dest)) != 0 {
		t.Fatalf("after the move mv-0 is in %s (future dirs %v), want %s", got, futureDirs(t, dest), dest)
	}
	// The producer goes on writing to the moved replica.
	moved := acked.get()
	waitFor(t, 30*time.Second, "records produced after the move", func() bool { return acked.get() >= moved+50 })
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatalf("producing during the move: %v", err)
	}
	n := acked.get()
	checkAll(t, b.Addr(), "mv", n)

	b = b.Restart()
	if got := dirOf(t, dirs, "mv-0"); got != dest {
		t.Fatalf("after restart mv-0 is in %s, want %s", got, dest)
	}
	checkAll(t, b.Addr(), "mv", n)
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "mv", Value: value(n)})
	checkAll(t, b.Addr(), "mv", n+1)
}

// AlterReplicaLogDirs answers as Kafka: LOG_DIR_NOT_FOUND for a dir not in log.dirs,
// UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have, and NONE for a
// replica already in the dir named (here by a relative path), INVALID_TOPIC_EXCEPTION for a
// topic name too long for a future replica's directory. REPLICA_NOT_AVAILABLE is in
// TestAlterReplicaLogDirsOnFollower.
func TestAlterReplicaLogDirsErrors(t *testing.T) {
	dirs, set := threeDirs(t)
	b := testutil.StartBroker(t, set)
	createTopic(t, b.Addr(), "e", 1, nil)
	long := strings.Repeat("l", 240) // its future replica's directory name would pass 255 bytes
	createTopic(t, b.Addr(), long, 1, nil)
	here := dirOf(t, dirs, "e-0")
	cl := newClient(t, b.Addr())
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relHere, err := filepath.Rel(wd, here) // a relative dir is made absolute, as Kafka does
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, topic string }{
		{"/nonexistent/dir", "e"}, {relHere, "e"}, {dirs[0], "missing"}, {dirs[1], long},
	} {
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = c.dir
		tp := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
		tp.Topic, tp.Partitions = c.topic, []int32{0}
		if c.dir == "/nonexistent/dir" {
			tp.Partitions = []int32{1} // e-1 does not exist either: the dir is checked first
		}
		d.Topics = append(d.Topics, tp)
		req.Dirs = append(req.Dirs, d)
	}
	raw, err := cl.Broker(1).Request(ctxT(t), req) // to this broker, not split by partition leaders
	if err != nil {
		t.Fatal(err)
	}
	resp := raw.(*kmsg.AlterReplicaLogDirsResponse)
	got := map[string]int16{}
	for _, tr := range resp.Topics {
		for _, p := range tr.Partitions {
			got[fmt.Sprintf("%s-%d", tr.Topic, p.Partition)] = p.ErrorCode
		}
	}
	want := map[string]int16{"e-1": kerr.LogDirNotFound.Code, "e-0": 0, "missing-0": kerr.UnknownTopicOrPartition.Code,
		long + "-0": kerr.InvalidTopicException.Code}
	if !maps.Equal(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if dirOf(t, dirs, "e-0") != here || len(futureDirs(t, here)) != 0 {
		t.Fatal("a move to the replica's own dir changed something")
	}
}

// atomicInt is an int shared with the producing goroutine.
type atomicInt struct{ v atomic.Int64 }

func (a *atomicInt) set(n int) { a.v.Store(int64(n)) }
func (a *atomicInt) get() int  { return int(a.v.Load()) }

// A move a stop interrupts resumes after the restart: the future replica is found in the
// destination, shown by DescribeLogDirs again, and completes.
func TestAlterReplicaLogDirsResumesAfterRestart(t *testing.T) {
	dirs, set := threeDirs(t)
	const throttle = "replica.alter.log.dirs.io.max.bytes.per.second"
	b := testutil.StartBroker(t, set, throttle+"=65536")
	createTopic(t, b.Addr(), "rs", 1, nil)
	cl := newClient(t, b.Addr(), uncompressed, kgo.ProducerBatchMaxBytes(16<<10))
	const n = 3000 // about 650 KiB: 10 s at the throttle
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: "rs", Value: value(i)})
	}
	produceSync(t, cl, rs...)
	from := dirOf(t, dirs, "rs-0")
	dest := dirs[(slices.Index(dirs, from)+2)%3]
	var req kadm.AlterReplicaLogDirsReq
	req.Add(dest, kadm.TopicsSet{"rs": {0: {}}})
	if _, err := newAdmin(t, b.Addr()).AlterBrokerReplicaLogDirs(ctxT(t), 1, req); err != nil {
		t.Fatal(err)
	}
	if fs := futureDirs(t, dest); len(fs) != 1 {
		t.Fatalf("future replica directories in %s: %v", dest, fs)
	}

	b = b.Restart()
	adm := newAdmin(t, b.Addr())
	ds, err := adm.DescribeBrokerLogDirs(ctxT(t), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := ds.Lookup(dest, "rs", 0); !ok || !p.IsFuture {
		t.Fatalf("after restart, the future replica in %s: %+v %v", dest, p, ok)
	}
	unlimited := "9223372036854775807"
	if _, err := adm.AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: throttle, Value: &unlimited}}, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the resumed move to finish", func() bool {
		return len(futureDirs(t, dest)) == 0 && slices.Contains(partitionsIn(t, dest, "rs"), "rs-0") &&
			!slices.Contains(partitionsIn(t, from, "rs"), "rs-0")
	})
	if got := dirOf(t, dirs, "rs-0"); got != dest {
		t.Fatalf("rs-0 is in %s, want %s", got, dest)
	}
	checkAll(t, b.Addr(), "rs", n)
}

// The controller's metadata log goes to metadata.log.dir, formatted like a log dir, and no
// partition is placed there.
func TestMetadataLogDir(t *testing.T) {
	dirs, set := threeDirs(t)
	meta := filepath.Join(filepath.Dir(dirs[0]), "meta")
	b := testutil.StartBroker(t, set, "metadata.log.dir="+meta)
	createTopic(t, b.Addr(), "md", 3, nil)
	if _, err := os.Stat(filepath.Join(meta, "__cluster_metadata-0")); err != nil {
		t.Fatalf("metadata log not in metadata.log.dir: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "__cluster_metadata-0")); !os.IsNotExist(err) {
			t.Fatalf("%s holds a metadata log: %v", d, err)
		}
		if len(partitionsIn(t, d, "md")) != 1 {
			t.Fatalf("%s holds %v", d, partitionsIn(t, d, "md"))
		}
	}
	if mp := metaProps(t, meta); mp["cluster.id"] != metaProps(t, dirs[0])["cluster.id"] || mp["directory.id"] == "" || mp["node.id"] != "1" {
		t.Fatalf("metadata.log.dir's meta.properties: %v", mp)
	}
	if len(partitionsIn(t, meta, "md")) != 0 {
		t.Fatal("a partition was placed in metadata.log.dir")
	}
	b = b.Restart() // the metadata log is found there again: the topic is still known
	produceSync(t, newClient(t, b.Addr()), &kgo.Record{Topic: "md", Value: value(0)})
	if recs := consumeN(t, b.Addr(), "md", 1); recordIndex(t, recs[0].Value) != 0 {
		t.Fatalf("read back %q", recs[0].Value)
	}
}

// A move is replaced by a move elsewhere, given up by naming the replica's own dir, and ends
// with its topic's deletion, leaving no copy behind each time.
func TestAlterReplicaLogDirsRedirectCancelDelete(t *testing.T) {
	dirs, set := threeDirs(t)
	const throttle = "replica.alter.log.dirs.io.max.bytes.per.second"
	b := testutil.StartBroker(t, set, throttle+"=16384")
	createTopic(t, b.Addr(), "rd", 1, nil)
	cl := newClient(t, b.Addr(), uncompressed, kgo.ProducerBatchMaxBytes(16<<10))
	const n = 2000
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: "rd", Value: value(i)})
	}
	produceSync(t, cl, rs...)
	adm := newAdmin(t, b.Addr())
	move := func(dir string) {
		t.Helper()
		var req kadm.AlterReplicaLogDirsReq
		req.Add(dir, kadm.TopicsSet{"rd": {0: {}}})
		resps, err := adm.AlterBrokerReplicaLogDirs(ctxT(t), 1, req)
		if err != nil {
			t.Fatal(err)
		}
		resps.Each(func(r kadm.AlterReplicaLogDirsResponse) {
			if r.Err != nil {
				t.Fatalf("alter to %s: %v", dir, r.Err)
			}
		})
	}
	futures := func() map[string]int {
		out := map[string]int{}
		for _, d := range dirs {
			if fs := futureDirs(t, d); len(fs) > 0 {
				out[d] = len(fs)
			}
		}
		return out
	}
	from := dirOf(t, dirs, "rd-0")
	i := slices.Index(dirs, from)
	first, second := dirs[(i+1)%3], dirs[(i+2)%3]

	move(first)
	if f := futures(); !maps.Equal(f, map[string]int{first: 1}) {
		t.Fatalf("future replicas after a move to %s: %v", first, f)
	}
	move(second) // elsewhere: the first copy goes
	if f := futures(); !maps.Equal(f, map[string]int{second: 1}) {
		t.Fatalf("future replicas after redirecting to %s: %v", second, f)
	}
	move(from) // its own dir: the move is given up
	if f := futures(); len(f) != 0 {
		t.Fatalf("future replicas after moving back to %s: %v", from, f)
	}
	if dirOf(t, dirs, "rd-0") != from {
		t.Fatal("the replica moved")
	}
	checkAll(t, b.Addr(), "rd", n)

	move(first)
	if r, err := adm.DeleteTopic(ctxT(t), "rd"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	waitFor(t, 30*time.Second, "the deleted topic's replica and copy to go", func() bool {
		for _, d := range dirs {
			if len(partitionsIn(t, d, "rd")) > 0 {
				return false
			}
		}
		return len(futures()) == 0
	})
}
