package compat_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gregor-project/gregor/compat"
)

func TestKcat(t *testing.T) {
	t.Parallel()
	runScenario(t, kcatClient{})
}

// kcatClient drives the kcat tool (Debian's, on Debian's librdkafka) as a user would: one
// process per step, records as lines on stdin ("key<TAB>value"), read back with a -f format
// that gives key and value lengths, so binary bytes survive.
type kcatClient struct{}

// kcatFormat prints a header line per record, then its key and value bytes.
const kcatFormat = `%p\t%o\t%T\t%K\t%S\t%h\n%k%s\n`

func kcatPath() (string, error) {
	p, err := exec.LookPath("kcat")
	if err != nil {
		return "", fmt.Errorf("kcat is not installed (the README's test command installs Debian's kcat): %w", err)
	}
	return p, nil
}

func (kcatClient) Info() compat.ClientInfo {
	v := "not installed"
	if p, err := kcatPath(); err == nil {
		out, _ := exec.Command(p, "-V").Output()
		if m := regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`).FindSubmatch(out); m != nil {
			v = fmt.Sprintf("%s (librdkafka %s)", m[1], m[2])
		}
	}
	return compat.ClientInfo{Name: "kcat", Language: "C (librdkafka)", Version: v, Order: 5}
}

func (kcatClient) Caps() Caps {
	return Caps{Codecs: []string{"none", "gzip", "snappy", "lz4", "zstd"}, Headers: true, RunHeaders: true, SkipsCompression: true,
		Note: "kcat sets no record timestamps (the producer's clock is used); its -H headers apply to every record of a run"}
}

// kcatSecurity adds -X properties for the TLS and SASL settings of the secured listener that
// args name with -b.
func kcatSecurity(args []string) []string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-b" {
			for _, p := range secured(args[i+1]).librdkafka() {
				args = append(args, "-X", p[0]+"="+p[1])
			}
			break
		}
	}
	return args
}

// run runs kcat with stdin and returns stdout; a non-zero exit is an error with stderr.
func kcatRun(ctx context.Context, stdin []byte, args ...string) ([]byte, []byte, error) {
	p, err := kcatPath()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, p, kcatSecurity(args)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("kcat %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), errb.Bytes(), err
}

func (kcatClient) Admin(context.Context, string, string) (AdminResult, error) {
	return AdminResult{}, notSupported("kcat has no admin commands (-L lists metadata only)")
}

// kcatProduce writes recs with one kcat run per explicit partition. kcat's -H headers apply
// to all records of a run, so records are grouped by their headers too.
func kcatProduce(ctx context.Context, addr, topic, codec string, recs []Rec, extra ...string) error {
	type run struct {
		part    int32
		headers string
	}
	var order []run
	groups := map[run][]Rec{}
	for _, r := range recs {
		var hs []string
		for _, h := range r.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		k := run{r.Partition, strings.Join(hs, "\x00")}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for _, k := range order {
		// -Z: an empty value is sent as null (the suite's values are never empty).
		args := []string{"-P", "-b", addr, "-t", topic, "-K", `\t`, "-Z", "-z", codec, "-p", strconv.Itoa(int(k.part))}
		if k.headers != "" {
			for _, h := range strings.Split(k.headers, "\x00") {
				args = append(args, "-H", h)
			}
		}
		var in bytes.Buffer
		for _, r := range groups[k] {
			if bytes.ContainsAny(r.Key, "\t\n") || bytes.ContainsAny(r.Value, "\t\n") {
				return fmt.Errorf("record %s: kcat cannot carry a newline or a tab here", r.id())
			}
			if r.Key != nil { // no key delimiter: a null key
				in.Write(r.Key)
				in.WriteByte('\t')
			}
			in.Write(r.Value)
			in.WriteByte('\n')
		}
		if _, stderr, err := kcatRun(ctx, in.Bytes(), append(args, extra...)...); err != nil ||
			bytes.Contains(stderr, []byte("Delivery failed")) || bytes.Contains(stderr, []byte("ERROR")) {
			return fmt.Errorf("kcat -P: %v: %w", err, &kcatError{msg: strings.TrimSpace(string(stderr))})
		}
	}
	return nil
}

// kcatError is what kcat printed about a failure.
type kcatError struct{ msg string }

func (e *kcatError) Error() string { return e.msg }

func (kcatClient) Produce(ctx context.Context, addr, topic, codec string, recs []Rec) error {
	return kcatProduce(ctx, addr, topic, codec, recs)
}

// kcatParse reads records printed with kcatFormat.
func kcatParse(out []byte) ([]Rec, error) {
	var recs []Rec
	rd := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := rd.ReadString('\n')
		if err == io.EOF && line == "" {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("kcat output: %w", err)
		}
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "\t", 6)
		if len(f) != 6 {
			return recs, fmt.Errorf("kcat output line %q", line)
		}
		var n [5]int64
		for i := range n {
			if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				return recs, fmt.Errorf("kcat output line %q: %w", line, err)
			}
		}
		r := Rec{Partition: int32(n[0]), Offset: n[1], Timestamp: n[2]}
		read := func(l int64) ([]byte, error) {
			if l < 0 {
				return nil, nil
			}
			b := make([]byte, l)
			_, err := io.ReadFull(rd, b)
			return b, err
		}
		if r.Key, err = read(n[3]); err != nil {
			return recs, err
		}
		if r.Value, err = read(n[4]); err != nil {
			return recs, err
		}
		if b, err := rd.ReadByte(); err != nil || b != '\n' {
			return recs, fmt.Errorf("kcat output: no newline after record at p%d@%d", r.Partition, r.Offset)
		}
		if f[5] != "" {
			for _, kv := range strings.Split(f[5], ",") {
				k, v, _ := strings.Cut(kv, "=")
				r.Headers = append(r.Headers, Header{k, []byte(v)})
			}
		}
		recs = append(recs, r)
	}
}

func (kcatClient) Consume(ctx context.Context, addr, topic string, n int) ([]Rec, error) {
	out, _, err := kcatRun(ctx, nil, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatFormat)
	if err != nil {
		return nil, err
	}
	recs, err := kcatParse(out)
	if err == nil && len(recs) < n {
		err = fmt.Errorf("kcat read %d of %d records before the end", len(recs), n)
	}
	return recs, err
}

// kcatMember is one `kcat -G` process: its stderr tells its assignment, its stdout the
// records.
type kcatMember struct {
	cmd      *exec.Cmd
	mu       sync.Mutex
	assigned []int32
	out      bytes.Buffer
	done     chan struct{}
}

var kcatAssigned = regexp.MustCompile(`rebalanced .*: assigned: (.*)`)

func (m *kcatMember) records() ([]Rec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return kcatParse(m.out.Bytes())
}

func (kcatClient) Group(ctx context.Context, addr, topic, group string, recs []Rec) ([2]Member, error) {
	var members [2]Member
	p, err := kcatPath()
	if err != nil {
		return members, err
	}
	var ms [2]*kcatMember
	for i := range ms {
		m := &kcatMember{done: make(chan struct{})}
		m.cmd = exec.CommandContext(ctx, p, kcatSecurity([]string{"-b", addr, "-G", group, "-X", "auto.offset.reset=earliest", "-f", kcatFormat, "-u", topic})...)
		stderr, err := m.cmd.StderrPipe()
		if err != nil {
			return members, err
		}
		m.cmd.Stdout = &lockedWriter{mu: &m.mu, w: &m.out}
		if err := m.cmd.Start(); err != nil {
			return members, err
		}
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				line := sc.Text()
				m.mu.Lock()
				if strings.Contains(line, "rebalanced") && strings.Contains(line, "revoked") {
					m.assigned = nil
				}
				if a := kcatAssigned.FindStringSubmatch(line); a != nil {
					m.assigned = nil
					for _, tp := range regexp.MustCompile(`\[(\d+)\]`).FindAllStringSubmatch(a[1], -1) {
						n, _ := strconv.Atoi(tp[1])
						m.assigned = append(m.assigned, int32(n))
					}
				}
				m.mu.Unlock()
			}
			close(m.done)
		}()
		defer func() {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			<-m.done
			_ = m.cmd.Wait()
		}()
		ms[i] = m
	}
	if err := waitFor(ctx, "partitions split between two members", func() bool {
		n := 0
		for i, m := range ms {
			m.mu.Lock()
			members[i].Assigned = append([]int32(nil), m.assigned...)
			m.mu.Unlock()
			n += len(members[i].Assigned)
			if len(members[i].Assigned) == 0 {
				return false
			}
		}
		return n == 3
	}); err != nil {
		return members, fmt.Errorf("%w (assigned %v, %v)", err, members[0].Assigned, members[1].Assigned)
	}
	if err := kcatProduce(ctx, addr, topic, "none", recs); err != nil {
		return members, fmt.Errorf("produce: %w", err)
	}
	var parseErr error
	if err := waitFor(ctx, "group read every record", func() bool {
		total := 0
		for _, m := range ms {
			rs, err := m.records()
			if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				parseErr = err
				return true
			}
			total += len(rs)
		}
		return total >= len(recs)
	}); err != nil {
		return members, err
	}
	if parseErr != nil {
		return members, parseErr
	}
	// SIGTERM: kcat closes the consumer, which commits the offsets it stored.
	for i, m := range ms {
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			return members, err
		}
		<-m.done
		if err := m.cmd.Wait(); err != nil {
			return members, fmt.Errorf("kcat -G exit: %w", err)
		}
		if members[i].Records, err = m.records(); err != nil {
			return members, err
		}
	}
	return members, nil
}

// lockedWriter serialises writes to w with mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func kcatPartition(ctx context.Context, addr, topic string, partition int32, offset string, n int, extra ...string) ([]Rec, error) {
	args := append([]string{"-C", "-b", addr, "-t", topic, "-p", strconv.Itoa(int(partition)), "-o", offset,
		"-c", strconv.Itoa(n), "-q", "-f", kcatFormat}, extra...)
	out, _, err := kcatRun(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	recs, err := kcatParse(out)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
	return recs, err
}

func (kcatClient) SeekOffset(ctx context.Context, addr, topic string, partition int32, offset int64, n int) ([]Rec, error) {
	return kcatPartition(ctx, addr, topic, partition, strconv.FormatInt(offset, 10), n)
}

func (kcatClient) SeekTime(ctx context.Context, addr, topic string, partition int32, ts int64, n int) ([]Rec, error) {
	return kcatPartition(ctx, addr, topic, partition, "s@"+strconv.FormatInt(ts, 10), n)
}

// ProduceUnknown: librdkafka holds records for an unknown topic for
// topic.metadata.propagation.max.ms (30s by default) before failing them; 1s keeps the suite
// fast and changes nothing else.
func (kcatClient) ProduceUnknown(ctx context.Context, addr, topic string) error {
	return kcatProduce(ctx, addr, topic, "none", []Rec{{Partition: -1, Key: []byte("k"), Value: []byte("v")}},
		"-X", "topic.metadata.propagation.max.ms=1000")
}

func (kcatClient) OutOfRange(ctx context.Context, addr, topic string, partition int32, _, high int64, n int) ([]Rec, error) {
	return kcatPartition(ctx, addr, topic, partition, strconv.FormatInt(high, 10), n, "-X", "auto.offset.reset=earliest")
}

func (kcatClient) ProduceTooLarge(ctx context.Context, addr, topic string, rec Rec) error {
	return kcatProduce(ctx, addr, topic, "none", []Rec{rec})
}

func (kcatClient) Expect(kind string) Expectation {
	says := func(s string) func(error) bool {
		return func(err error) bool { return strings.Contains(err.Error(), s) }
	}
	switch kind {
	case "unknown-topic":
		return Expectation{Desc: `"Delivery failed … Broker: Unknown topic or partition"`, Match: says("Unknown topic or partition")}
	case "out-of-range":
		return Expectation{Desc: "auto.offset.reset=earliest: resets to the log start", Reset: true}
	default:
		return Expectation{Desc: `"Delivery failed … Broker: Message size too large"`, Match: says("Message size too large")}
	}
}
