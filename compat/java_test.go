package compat_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gregor-project/gregor/compat"
)

// Kafka's own Java client, org.apache.kafka:kafka-clients (compat/java, built by Maven:
// scripts/test runs compat/java/build.sh). One JVM serves every Java step of a test run
// (javaServer), since starting a JVM per step would cost more than the steps.

func TestJava(t *testing.T) {
	t.Parallel()
	runScenario(t, javaClient())
}

func TestJavaTxn(t *testing.T) {
	t.Parallel()
	runTxnScenario(t, javaClient())
}

func TestSecureJava(t *testing.T) { t.Parallel(); runSecure(t, javaClient()) }

// TestJavaConsumerGroupProtocol runs the scenario's group step with the Java consumer's
// group.protocol=consumer (KIP-848: ConsumerGroupHeartbeat, the broker's assignor), which
// Kafka's Java client has had as generally available since 4.0. The members subscribe with a
// regex the broker resolves (SubscriptionPattern "group", matching that topic's whole name),
// so they learn their topics by id.
func TestJavaConsumerGroupProtocol(t *testing.T) {
	t.Parallel()
	c := javaClient()
	c.info.Name, c.info.Variant, c.info.Order = "kafka-clients (group.protocol=consumer)", "kafka-clients", 10
	c.extra = map[string]any{"group_protocol": "consumer", "broker_regex": true}
	info := c.Info()
	recordClient(info)
	b := startBroker(t)
	step(t, compat.SectionScenario, info.Name, "group", func(t *stepT) {
		groupStep(t, c, &b)
		groups, err := kadm.NewClient(refClient(t, b.Addr())).ListGroups(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatalf("list groups: %v", err)
		}
		if g, ok := groups["compat-group"]; !ok || g.GroupType != "consumer" {
			t.Fatalf("the group is listed as %+v (found %v), want a group of type consumer (KIP-848)", g, ok)
		}
		t.Note("KIP-848's consumer protocol with a regex subscription the broker resolves, the broker's uniform assignor")
	})
}

// TestJavaIdempotentByDefault: the Java producer's defaults (enable.idempotence=true,
// acks=all) hold against Gregor: the broker records the producer's id and its sequence up to
// the last record, as the scenario's note on the produce step says.
func TestJavaIdempotentByDefault(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopic(t, b.Addr(), "idempotent", 1, nil)
	recs := genRecords(genOpts{prefix: "idem", n: 20, partition: func(int) int32 { return 0 }})
	if err := javaClient().Produce(ctxFor(t, time.Minute), b.Addr(), "idempotent", "lz4", recs); err != nil {
		t.Fatal(err)
	}
	ps, err := kadm.NewClient(refClient(t, b.Addr())).DescribeProducers(ctxFor(t, 30*time.Second), kadm.TopicsSet{"idempotent": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	got := ps.SortedProducers()
	if len(got) != 1 || got[0].ProducerID < 0 || got[0].LastSequence != int32(len(recs)-1) {
		t.Fatalf("producers of the partition: %+v; want one with sequences 0..%d", got, len(recs)-1)
	}
}

// TestJavaAdminTour: the Java Admin client's read-only calls beyond the scenario's admin step
// (the metadata quorum, topics by id, client quotas, every ListOffsets spec, log dirs,
// producers, transactions, groups, reassignments, DeleteRecords) each get an answer the client
// accepts. Each answered differently from Kafka once: a null where Kafka sends an empty
// array, a topic id not taken for one, an API a Kafka broker forwards and Gregor did not.
func TestJavaAdminTour(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopic(t, b.Addr(), "tour", 1, nil)
	refProduce(t, b.Addr(), "tour", genRecords(genOpts{prefix: "tour", n: 5, partition: func(int) int32 { return 0 }}))
	resp, err := javaClient().call(ctxFor(t, time.Minute), "admin-tour", scriptRequest{Addr: b.Addr(), Topic: "tour"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Calls) != 20 {
		t.Fatalf("%d calls answered: %v", len(resp.Calls), resp.Calls)
	}
	for name, got := range resp.Calls {
		if got != "ok" {
			t.Errorf("%s: %s", name, got)
		}
	}
}

func javaClient() *scriptClient {
	return &scriptClient{
		info: compat.ClientInfo{Name: "kafka-clients", Language: "Java", Order: 9},
		caps: Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Timestamps: true, Headers: true,
			Note: "the producer's defaults: idempotent, acks=all"},
		jvm: javaServer,
		expect: map[string]Expectation{
			"unknown-topic": {Desc: "TimeoutException: the producer waits for the topic's metadata until max.block.ms (5 s here)",
				Match: scriptErr("TimeoutException", "REQUEST_TIMED_OUT")},
			"out-of-range": {Desc: "auto.offset.reset=earliest: resets to the log start", Reset: true},
			"too-large":    {Desc: "RecordTooLargeException MESSAGE_TOO_LARGE", Match: scriptErr("RecordTooLargeException", "MESSAGE_TOO_LARGE")},
		},
		// Since Kafka 2.7 a partition leader answers a fenced producer's write
		// INVALID_PRODUCER_EPOCH, an abortable error for the Java client: the transaction's
		// commit then fails with it too (its next step, abortTransaction, meets PRODUCER_FENCED).
		fenced: [2]Expectation{
			{Desc: "InvalidProducerEpochException (INVALID_PRODUCER_EPOCH)", Match: scriptErr("InvalidProducerEpochException", "INVALID_PRODUCER_EPOCH")},
			{Desc: "commitTransaction: InvalidProducerEpochException, the transaction's abortable error",
				Match: scriptErr("InvalidProducerEpochException", "INVALID_PRODUCER_EPOCH")},
		},
	}
}

// javaServer is the suite's one JVM running compat/java in serve mode (see its Main): it
// starts at the first Java request and stops when TestMain ends (stopJava).
var javaServer = &jvmServer{}

// jvmServer sends requests to a long-running `gregor.compat.Main serve` and hands each
// answer to its caller.
//
// Lock order: mu only; it guards the process, its stdin and the waiting callers.
type jvmServer struct {
	mu struct {
		sync.Mutex
		cmd     *exec.Cmd
		stdin   io.WriteCloser
		next    int64
		waiting map[int64]chan json.RawMessage
		exited  chan struct{} // closed when cmd has exited
		dead    error         // why the process ended; a new request starts another
		stderr  *tailBuffer
	}
}

// tailBuffer keeps the last max bytes written to it (the JVM's stderr, for failure messages).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// javaDir is compat/java; javaClasspath the classpath Maven's package phase leaves there.
func javaDir() string { return filepath.Join(compatDir(), "java") }

func javaClasspath() string {
	return filepath.Join(javaDir(), "target", "gregor-compat.jar") + string(os.PathListSeparator) +
		filepath.Join(javaDir(), "target", "lib", "*")
}

// javaSourceHash is the hash compat/java/build.sh stamps a build with: SHA-256 over pom.xml
// and every file under src, in byte order of their paths.
func javaSourceHash() (string, error) {
	files := []string{"pom.xml"}
	err := filepath.WalkDir(filepath.Join(javaDir(), "src"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(javaDir(), p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files[1:])
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(javaDir(), f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// startLocked starts the JVM; it fails when compat/java is not built from its sources.
func (s *jvmServer) startLocked() error {
	want, err := javaSourceHash()
	if err != nil {
		return err
	}
	stamp, _ := os.ReadFile(filepath.Join(javaDir(), "target", ".built"))
	if strings.TrimSpace(string(stamp)) != want {
		return fmt.Errorf("compat/java is not built from its current sources: run compat/java/build.sh (scripts/test does)")
	}
	// One JVM serves the whole run: the C1 compiler alone and the serial collector keep its
	// CPU small on a machine the broker and the other clients share.
	cmd := exec.Command("java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m",
		"-cp", javaClasspath(), "gregor.compat.Main", "serve")
	cmd.Dir = javaDir()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.mu.stderr = &tailBuffer{max: 64 << 10}
	cmd.Stderr = s.mu.stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	s.mu.cmd, s.mu.stdin, s.mu.dead = cmd, stdin, nil
	s.mu.waiting = map[int64]chan json.RawMessage{}
	s.mu.exited = make(chan struct{})
	go s.read(cmd, stdout, s.mu.exited)
	return nil
}

// read hands each answer of cmd to its caller until cmd's stdout closes.
func (s *jvmServer) read(cmd *exec.Cmd, stdout io.Reader, exited chan struct{}) {
	defer close(exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var ans struct {
			ID   int64           `json:"id"`
			Resp json.RawMessage `json:"resp"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ans); err != nil {
			continue // not an answer: the JVM printed something else
		}
		s.mu.Lock()
		ch := s.mu.waiting[ans.ID]
		delete(s.mu.waiting, ans.ID)
		s.mu.Unlock()
		if ch != nil {
			ch <- ans.Resp
		}
	}
	err := cmd.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == cmd {
		s.mu.cmd = nil
		s.mu.dead = fmt.Errorf("the JVM exited (%v, scan %v)", err, sc.Err())
		for id, ch := range s.mu.waiting {
			close(ch)
			delete(s.mu.waiting, id)
		}
	}
}

// do sends one request and waits for its answer (raw JSON) or ctx's end.
func (s *jvmServer) do(ctx context.Context, op string, req []byte) ([]byte, error) {
	s.mu.Lock()
	if s.mu.cmd == nil {
		if err := s.startLocked(); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	s.mu.next++
	id := s.mu.next
	ch := make(chan json.RawMessage, 1)
	s.mu.waiting[id] = ch
	line, err := json.Marshal(map[string]any{"id": id, "op": op, "req": json.RawMessage(req)})
	if err == nil {
		_, err = s.mu.stdin.Write(append(line, '\n'))
	}
	stderr := s.mu.stderr
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("java %s: send: %w", op, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			s.mu.Lock()
			dead := s.mu.dead
			s.mu.Unlock()
			return nil, fmt.Errorf("java %s: %v\n%s", op, dead, tail(stderr.String(), 3000))
		}
		return resp, nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.mu.waiting, id)
		s.mu.Unlock()
		return nil, fmt.Errorf("java %s: no answer: %w\n%s", op, ctx.Err(), tail(stderr.String(), 3000))
	}
}

// stop closes the JVM's stdin, on which it exits, and kills it if it has not within 10 s.
func (s *jvmServer) stop() {
	s.mu.Lock()
	cmd, stdin, exited := s.mu.cmd, s.mu.stdin, s.mu.exited
	s.mu.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	stdin.Close()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		if err := cmd.Process.Kill(); err != nil {
			fmt.Fprintln(os.Stderr, "kill the JVM:", err)
		}
		<-exited
	}
}
